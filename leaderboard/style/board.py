"""The style-controlled board: the published leaderboard refitted with style covariates, beside the default.

Chatbot Arena's default view controls for style: answer length in tokens and Markdown decoration (and, as
its search arena does, citations) enter the Bradley-Terry linear predictor as covariates (left minus right,
see :mod:`leaderboard.style.features`), fitted jointly with the ratings, so a model's rating is its strength
at equal style. This module picks the covariates asked for, reports those that separate the votes (their
maximum likelihood estimate is infinite, so they are left out rather than fitted to a huge coefficient), fits
the board through :func:`~leaderboard.bt.compute.fit_leaderboard` (the one engine, one cell per vote, the
default board's own :class:`~leaderboard.bt.request.FitRequest`) and
lays out its table with each model's rank change against the default board.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from leaderboard.battles import Battles
from leaderboard.data import Outcome
from leaderboard.result import Leaderboard
from leaderboard.snapshot.files import dump_json, leaderboard_table
from leaderboard.spreadsheet import escape_frame

if TYPE_CHECKING:
    from leaderboard.bt.bootstrap import Progress
    from leaderboard.bt.request import FitRequest

__all__ = [
    "STYLE_CSV_FILE",
    "STYLE_GROUPS",
    "STYLE_JSON_FILE",
    "StyleBoard",
    "compute_style_board",
    "expand_style",
    "read_style_table",
    "separating_features",
    "style_board_files",
    "style_board_table",
]

IntArray = npt.NDArray[np.int64]

STYLE_CSV_FILE = "leaderboard_style.csv"
STYLE_JSON_FILE = "leaderboard_style.json"

#: What ``--style`` accepts and the covariates of :data:`leaderboard.style.features.STYLE_FEATURES` each
# names.
STYLE_GROUPS: Mapping[str, tuple[str, ...]] = {
    "length": ("length",),
    "markdown": ("headers", "lists", "bold"),
    "headers": ("headers",),
    "lists": ("lists",),
    "bold": ("bold",),
    "citations": ("citations",),
}


def expand_style(groups: Sequence[str]) -> tuple[str, ...]:
    """Covariate names for the groups asked for (``length``, ``markdown``, or single features), in order.

    Raises
    ------
    ValueError
        For an unknown group name or an empty request.
    """
    names: list[str] = []
    for group in groups:
        key = group.strip().lower()
        if key not in STYLE_GROUPS:
            raise ValueError(f"unknown style feature {group!r}; choose from {', '.join(STYLE_GROUPS)}")
        names.extend(n for n in STYLE_GROUPS[key] if n not in names)
    if not names:
        raise ValueError("name at least one style feature")
    return tuple(names)


def separating_features(battles: Battles) -> tuple[str, ...]:
    """Covariates whose sign alone decides every decisive vote in which they are not zero.

    On such a covariate the log-likelihood keeps rising as its coefficient grows (complete or
    quasi-complete separation; Albert and Anderson, 1984): the estimate is infinite, whatever an
    optimiser stops at. Ties are left out of the check (a tie pulls both ways only weakly).

    Parameters
    ----------
    battles : Battles
        With ``features`` (one row per vote, NaN rows excluded beforehand).

    Returns
    -------
    tuple of str
        Names of the separating covariates.
    """
    if battles.features is None:
        return ()
    left = battles.outcome == Outcome.MODEL_A
    right = battles.outcome == Outcome.MODEL_B
    out: list[str] = []
    for k, name in enumerate(battles.feature_names):
        x = battles.features[:, k]
        informative = (left | right) & (x != 0)
        if not informative.any():
            continue
        agrees = (x > 0) == left
        if bool(np.all(agrees[informative])) or not bool(np.any(agrees[informative])):
            out.append(name)
    return tuple(out)


@dataclass(frozen=True)
class StyleBoard:
    """A style-controlled leaderboard and how it was made.

    Attributes
    ----------
    leaderboard : the fitted board (``parameters_fitted`` holds ``style_<name>_elo`` with intervals)
    features : the covariates fitted
    separating : covariates asked for but left out because they separate the votes
    missing : covariates asked for that the votes do not vary in often enough (left out)
    measured : how the covariates were measured (the length: tokens from generation provenance or estimated)
    n_votes_without_texts : votes left out because an answer text was missing
    rank_change : per model (aligned with ``leaderboard.models``), default rank minus style rank:
        positive means the model moves up once style is controlled
    """

    leaderboard: Leaderboard
    features: tuple[str, ...]
    separating: tuple[str, ...]
    missing: tuple[str, ...]
    n_votes_without_texts: int
    rank_change: IntArray
    measured: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        """The metadata entry: covariates, their coefficients with intervals (Elo points per unit), what was
        left out and why."""
        coefficients = {
            name: dict(self.leaderboard.parameters_fitted.get(f"style_{name}_elo", {}))
            for name in self.features
        }
        return {
            "features": list(self.features),
            "coefficients_elo": coefficients,
            "separating": list(self.separating),
            "not_varying": list(self.missing),
            "n_votes": int(self.leaderboard.n_votes),
            "n_votes_without_texts": self.n_votes_without_texts,
            # how each fitted covariate was measured (the length: tokens from generation or estimated)
            "measured": {k: v for k, v in self.measured.items() if k in self.features},
        }


def compute_style_board(
    battles: Battles,
    *,
    features: Sequence[str],
    default: Leaderboard,
    request: FitRequest,
    progress: Progress | None = None,
) -> StyleBoard:
    """Fit the style-controlled board on the same votes, with the same request (and so seed) as ``default``.

    Parameters
    ----------
    battles : Battles
        One row per vote with ``features``/``feature_names`` (NaN rows: votes without answer texts,
        left out).
    features : covariate names to fit (see :func:`expand_style`)
    default : the default board of the same votes, for the rank changes
    request : the default board's :class:`~leaderboard.bt.request.FitRequest`: method, model options,
        intervals, anchor and seed
    progress : ``progress(done, total)`` after each bootstrap round, as for
        :func:`~leaderboard.bt.compute.compute_leaderboard`

    Returns
    -------
    StyleBoard

    Raises
    ------
    ValueError
        If the battles carry no covariates, or none of those asked for can be fitted.
    """
    if battles.features is None:
        raise ValueError("style control needs answer texts: the votes carry no style covariates")
    known = battles.feature_names
    missing = tuple(n for n in features if n not in known)
    columns = np.array([known.index(n) for n in features if n in known], dtype=np.int64)
    has_text = ~np.isnan(battles.features).any(axis=1)
    rows = np.flatnonzero(has_text)
    chosen = Battles(
        models=battles.models,
        model_a=battles.model_a[rows],
        model_b=battles.model_b[rows],
        outcome=battles.outcome[rows],
        time=None if battles.time is None else battles.time[rows],
        features=battles.features[np.ix_(rows, columns)],
        feature_names=tuple(known[k] for k in columns),
    )
    values = battles.features[np.ix_(rows, columns)]
    separating = separating_features(chosen)
    keep = [k for k, n in enumerate(chosen.feature_names) if n not in separating]
    if not keep:
        raise ValueError(
            "no style covariate can be fitted: "
            + (f"{', '.join(separating)} separate the votes" if separating else "none varies in the votes")
        )
    # the fitting stack loads here, not when the snapshot pages import this module to read a style table
    from leaderboard.bt.compute import fit_leaderboard  # the fitting stack, on first fit
    from leaderboard.evaluation.held_out import votes_to_counts  # the fitting stack, on first fit

    counts = votes_to_counts(chosen, keep_time=request.model.half_life is not None, per_vote=True)
    board, _ = fit_leaderboard(
        counts,
        request,
        progress=progress,
        features=values[:, keep],
        feature_names=tuple(chosen.feature_names[k] for k in keep),
    )
    default_rank = dict(zip(default.models, np.asarray(default.rank, dtype=np.int64), strict=True))
    change = np.array(
        [default_rank.get(m, r) - r for m, r in zip(board.models, board.rank, strict=True)], dtype=np.int64
    )
    return StyleBoard(
        leaderboard=board,
        features=tuple(chosen.feature_names[k] for k in keep),
        separating=separating,
        missing=missing,
        n_votes_without_texts=int((~has_text).sum()),
        rank_change=change,
        measured=dict(battles.feature_notes),
    )


def style_board_table(style: StyleBoard) -> pd.DataFrame:
    """The style-controlled table (the columns of the default one) plus ``rank_change`` against it."""
    table = leaderboard_table(style.leaderboard)
    change = dict(zip(style.leaderboard.models, style.rank_change, strict=True))
    table["rank_change"] = np.array([change[m] for m in table["model"]], dtype=np.int64)
    return table


def style_board_files(style: StyleBoard) -> dict[str, bytes]:
    """The style-controlled board as snapshot files (CSV and JSON), rounded like the default board's."""
    table = style_board_table(style)
    board = style.leaderboard
    document = {
        "method": board.method,
        "interval": board.interval,
        "parameters": board.parameters,
        "parameters_fitted": board.parameters_fitted,
        "style_control": style.describe(),
        "models": table.to_dict(orient="records"),
    }
    return {
        STYLE_CSV_FILE: escape_frame(table).to_csv(index=False, lineterminator="\n").encode("utf-8"),
        STYLE_JSON_FILE: dump_json(document),
    }


def read_style_table(folder: Path | str) -> pd.DataFrame | None:
    """The style-controlled table of a snapshot folder, or None when it was published without one."""
    path = Path(folder) / STYLE_CSV_FILE
    if not path.exists():
        return None
    return pd.read_csv(path, keep_default_na=False, dtype={"model": str})
