"""Which battles of a file enter a fit: the filters every command shares, applied to battle columns.

:class:`BattleFilter` is what ``--language``, ``--since``/``--until``, ``--anony-only``, ``--models``,
``--exclude-models`` and ``--judge`` ask for; :func:`select_battles` applies it to the columns of a
battles file (one array per field, one entry per battle) and codes what is left as
:class:`leaderboard.battles.Battles`. Self-battles among the selected battles are returned apart, for the
caller to refuse or report: they never vanish unnoticed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from leaderboard.battles import Battles
from leaderboard.data import OUTCOME_STRINGS
from votes.battle_rows import BattleRecord

__all__ = ["BattleColumns", "BattleFilter", "keep_mask", "record_columns", "select_battles"]

_CODES = {label: int(code) for code, label in OUTCOME_STRINGS.items()}


@dataclass(frozen=True)
class BattleFilter:
    """The battles to keep (every field None or False: all of them).

    ``since <= tstamp < until`` (unknown times never match a time bound); ``anony_only`` keeps battles
    marked ``anony`` true (the public leaderboards count only votes cast before the names were shown);
    ``models`` keeps battles between two listed models, ``exclude_models`` drops battles involving one;
    ``judge`` keeps battles of that judge (annotator).
    """

    language: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    anony_only: bool = False
    models: tuple[str, ...] | None = None
    exclude_models: tuple[str, ...] = ()
    judge: str | None = None

    def as_metadata(self) -> dict[str, Any]:
        """The filters as JSON values, for a snapshot's metadata."""
        out = asdict(self)
        for key in ("since", "until"):
            if out[key] is not None:
                out[key] = out[key].isoformat()
        out["models"] = None if self.models is None else list(self.models)
        out["exclude_models"] = list(self.exclude_models)
        return out


@dataclass(frozen=True)
class BattleColumns:
    """A battles file as columns (object arrays hold ``None`` for a missing value)."""

    model_a: npt.NDArray[np.object_]
    model_b: npt.NDArray[np.object_]
    winner: npt.NDArray[np.object_]
    language: npt.NDArray[np.object_]
    tstamp: npt.NDArray[np.float64]
    anony: npt.NDArray[np.object_]
    judge: npt.NDArray[np.object_]
    weight: npt.NDArray[np.float64]
    sided: npt.NDArray[np.bool_]
    #: the prompt each battle was on (text; None where the file has none)
    question_id: npt.NDArray[np.object_] | None = None

    def __len__(self) -> int:
        return int(self.model_a.shape[0])


def _member(values: npt.NDArray[np.object_], names: tuple[str, ...]) -> npt.NDArray[np.bool_]:
    out: npt.NDArray[np.bool_] = pd.Series(values, dtype=object).isin(list(names)).to_numpy()
    return out


def record_columns(records: list[BattleRecord]) -> BattleColumns:
    """Validated battle rows as columns."""

    def objects(name: str) -> npt.NDArray[np.object_]:
        out = np.empty(len(records), dtype=object)
        out[:] = [getattr(r, name) for r in records]
        return out

    return BattleColumns(
        model_a=objects("model_a"),
        model_b=objects("model_b"),
        winner=objects("winner"),
        language=objects("language"),
        tstamp=np.asarray([np.nan if r.tstamp is None else r.tstamp for r in records], dtype=np.float64),
        anony=objects("anony"),
        judge=objects("judge"),
        weight=np.asarray([r.weight for r in records], dtype=np.float64),
        sided=np.asarray([r.sided for r in records], dtype=bool),
        question_id=objects("question_id"),
    )


def keep_mask(cols: BattleColumns, f: BattleFilter) -> npt.NDArray[np.bool_]:
    """Which battles ``f`` keeps (self-battles included)."""
    keep = np.ones(len(cols), dtype=bool)
    if f.language is not None:
        keep &= cols.language == f.language
    if f.since is not None:
        keep &= cols.tstamp >= f.since.timestamp()
    if f.until is not None:
        keep &= cols.tstamp < f.until.timestamp()
    if f.anony_only:
        keep &= cols.anony == True  # noqa: E712 (an object array: None and False are not anonymous)
    if f.models is not None:
        allowed = list(f.models)
        keep &= (
            pd.Series(cols.model_a).isin(allowed).to_numpy()
            & pd.Series(cols.model_b).isin(allowed).to_numpy()
        )
    if f.exclude_models:
        banned = list(f.exclude_models)
        keep &= ~(
            pd.Series(cols.model_a).isin(banned).to_numpy() | pd.Series(cols.model_b).isin(banned).to_numpy()
        )
    if f.judge is not None:
        keep &= cols.judge == f.judge
    return keep


def select_battles(cols: BattleColumns, f: BattleFilter) -> tuple[Battles, npt.NDArray[np.int64]]:
    """The battles ``f`` keeps, coded against the models they name (sorted by name), without self-battles.

    Returns the battles and the row positions (into ``cols``) of the selected self-battles.

    Raises
    ------
    ValueError
        If a selected battle has an unknown winner.
    """
    keep = keep_mask(cols, f)
    self_battle = keep & (cols.model_a == cols.model_b)
    keep &= ~self_battle
    every = bool(keep.all())

    def kept(column: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """The kept rows of ``column``: the column itself when every row is kept (no copy of a million)."""
        return column if every else column[keep]

    a, b, w = kept(cols.model_a), kept(cols.model_b), kept(cols.winner)
    codes, names = pd.factorize(np.concatenate([a, b]), sort=True)
    ia, ib = codes[: a.shape[0]], codes[a.shape[0] :]
    outcome = pd.Series(w, dtype=object).map(_CODES)  # NaN for anything but the four strings
    if outcome.isna().any():
        bad = w[outcome.isna().to_numpy()][0]
        raise ValueError(f"unknown winner {bad!r}; expected one of {', '.join(map(repr, _CODES))}")
    weight = kept(cols.weight)
    sided = kept(cols.sided)
    stamps = kept(cols.tstamp)
    judges = pd.Series(kept(cols.judge), dtype=object)
    known = judges.notna().to_numpy()
    annotator = None
    annotator_names: tuple[str, ...] = ()
    if known.any():  # judges coded in order of first appearance; a battle without one is -1 (its own)
        codes, uniques = pd.factorize(judges, use_na_sentinel=True)
        annotator = np.asarray(codes, dtype=np.int64)
        annotator_names = tuple(str(u) for u in uniques)
    prompt = None
    if cols.question_id is not None:
        questions = pd.Series(kept(cols.question_id), dtype=object)
        if questions.notna().any():  # prompts coded in order of first appearance; none is -1
            prompt = np.asarray(pd.factorize(questions, use_na_sentinel=True)[0], dtype=np.int64)
    battles = Battles(
        models=tuple(str(n) for n in names),
        model_a=ia,
        model_b=ib,
        outcome=np.asarray(outcome.to_numpy(), dtype=np.int8),
        # times only when every battle has one: the time split and online raters need a full clock
        time=stamps if np.all(np.isfinite(stamps)) else None,
        weight=None if np.all(weight == 1.0) else weight,
        sided=None if np.all(sided) else sided,
        annotator=annotator,
        annotator_names=annotator_names,
        prompt=prompt,
    )
    return battles, np.flatnonzero(self_battle).astype(np.int64)
