"""One entry point for the CLI, snapshots and the web: counts in, a filled :class:`Leaderboard` out.

:data:`METHODS` names the members of the Bradley-Terry family a leaderboard can be made with; every one
runs through :func:`~leaderboard.bt.fit.fit_bt` and :func:`~leaderboard.bt.bootstrap.bootstrap_ratings` (or
the sandwich), and takes every option (time weights, prior, both-bad handling, style covariates, the rating
scale). Ranks, rank intervals, the rank upper bound, battles and win rates are filled in here the same
way for every method.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import binomtest

from leaderboard.bt.bootstrap import Progress, bootstrap_ratings
from leaderboard.bt.clusters import Clusters
from leaderboard.bt.fit import BTFit, fit_bt
from leaderboard.bt.intervals import rank_intervals, rank_upper_bound, ranks_of, sandwich_intervals
from leaderboard.bt.matrices import model_totals
from leaderboard.bt.spec import BTSpec
from leaderboard.data import Outcome, PairCounts
from leaderboard.result import Leaderboard

__all__ = [
    "INTERVALS",
    "METHODS",
    "SOURCE_METHODS",
    "assemble_board",
    "available_methods",
    "both_bad_rates",
    "compute_leaderboard",
    "fit_leaderboard",
]

FloatArray = npt.NDArray[np.float64]
INTERVALS = ("bootstrap", "sandwich", "none")

#: Method names and the member of the Bradley-Terry family each one fits: logit (``bt``, ``davidson``)
#: and probit (Thurstone-Mosteller ``tm``, Glenn-David ties) links, each with and without position.
METHODS: Mapping[str, BTSpec] = {
    "bt": BTSpec(),
    "bt-position": BTSpec(position="common"),
    "davidson": BTSpec(ties="davidson"),
    "davidson-position": BTSpec(position="common", ties="davidson"),
    "tm": BTSpec(link="probit"),
    "tm-position": BTSpec(position="common", link="probit"),
    "glenn-david": BTSpec(ties="glenn-david", link="probit"),
    "glenn-david-position": BTSpec(position="common", ties="glenn-david", link="probit"),
}

#: Options every method takes (besides the interval settings of :func:`compute_leaderboard`).
_OPTIONS = frozenset(
    {
        "scale",
        "base",
        "initial",
        "n_jobs",
        "half_life",
        "now",
        "prior",
        "both_bad",
        "per_model_position",
        "features",
        "feature_names",
    }
)


#: Methods that need to know who cast each vote (a human or which LLM judge), so they fit the votes
#: one by one with their sources rather than the aggregated counts: the source-aware composite
#: (:func:`leaderboard.composite.board.composite_board`).
SOURCE_METHODS: tuple[str, ...] = ("composite",)


def available_methods() -> tuple[str, ...]:
    """Every method name a board can be made with: the Bradley-Terry family of :func:`compute_leaderboard`
    and the source-aware methods of :data:`SOURCE_METHODS`."""
    return tuple(sorted([*METHODS, *SOURCE_METHODS]))


def method_spec(method: str, options: Mapping[str, Any]) -> BTSpec:
    """The :class:`BTSpec` of ``method`` with the model options among ``options`` applied."""
    if method in SOURCE_METHODS:
        raise ValueError(f"method {method!r} needs each vote's source (human or judge), not counts")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(available_methods())}")
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ValueError(f"method {method!r} does not take options {sorted(unknown)}")
    base = METHODS[method]
    per_model = bool(options.get("per_model_position", False)) and base.position != "none"
    features = options.get("features")
    return replace(
        base,
        half_life=options.get("half_life"),
        now=options.get("now"),
        prior_sd=options.get("prior"),
        both_bad=options.get("both_bad", "tie"),
        position="per-model" if per_model else base.position,
        features=None if features is None else np.asarray(features, dtype=np.float64),
        feature_names=tuple(options.get("feature_names", ())),
    )


def both_bad_rates(counts: PairCounts) -> FloatArray:
    """Per model, the share of its votes that were ``tie (bothbad)``: an absolute quality signal."""
    votes = counts.vote_counts
    n = counts.n_models
    battles = np.bincount(counts.model_a, votes, n) + np.bincount(counts.model_b, votes, n)
    bad = counts.outcome == Outcome.BOTHBAD
    n_bad = np.bincount(counts.model_a[bad], votes[bad], n) + np.bincount(counts.model_b[bad], votes[bad], n)
    rates: FloatArray = np.divide(n_bad, battles, out=np.zeros(n), where=battles > 0)
    return rates


def _both_bad_fitted(counts: PairCounts, level: float) -> dict[str, dict[str, float]]:
    """Per-model both-bad rates with Wilson score intervals (only when there are both-bad votes)."""
    if not np.any(counts.outcome == Outcome.BOTHBAD):
        return {}
    votes = counts.vote_counts
    n = counts.n_models
    per_model = np.bincount(counts.model_a, votes, n) + np.bincount(counts.model_b, votes, n)
    out: dict[str, dict[str, float]] = {}
    for name, rate, m in zip(counts.models, both_bad_rates(counts), per_model, strict=True):
        trials = int(round(m))
        ci = binomtest(int(round(rate * m)), trials).proportion_ci(confidence_level=level, method="wilson")
        out[f"both_bad_rate:{name}"] = {"value": float(rate), "ci_low": ci.low, "ci_high": ci.high}
    return out


def _fit_method(
    counts: PairCounts,
    spec: BTSpec,
    *,
    interval: str,
    n_rounds: int,
    level: float,
    anchor: tuple[str, float] | None,
    random_state: int,
    progress: Progress | None,
    options: Mapping[str, Any],
    clusters: Clusters | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray | None, dict[str, Any], dict[str, Any], BTFit]:
    """Point fit and intervals through the one engine: rating, low, high, rounds, parameters, fitted and
    the point fit itself."""
    scale_options = {k: options[k] for k in ("scale", "base", "initial") if k in options}
    fit = fit_bt(counts, spec=spec, anchor=anchor, **scale_options)
    params: dict[str, Any]
    if spec.is_plain:
        params = {"solver": fit.solver, "scale": fit.scale, "base": fit.base, "initial": fit.initial}
        if fit.unbounded:
            params["unbounded_models"] = list(fit.unbounded)
            params["ridge"] = fit.ridge
    else:
        params = {"style": list(fit.feature_names), "optimiser_iterations": fit.n_iter}
    rating, low, high, rounds = fit.rating, fit.rating, fit.rating, None
    extra = {name: (v, v, v) for name, v in fit.extras_of(fit.x).items()}
    if interval == "bootstrap":
        boot = bootstrap_ratings(
            counts,
            fit=fit,
            n_rounds=n_rounds,
            level=level,
            random_state=random_state,
            progress=progress,
            n_jobs=options.get("n_jobs"),
            clusters=clusters,
        )
        if spec.is_plain:
            params["degenerate_rounds"] = boot.n_degenerate
        low, high, rounds, extra = boot.ci_low, boot.ci_high, boot.ratings, boot.extra
    elif interval == "sandwich":
        sw = sandwich_intervals(counts, fit=fit, level=level, clusters=clusters)
        low, high, extra = sw.ci_low, sw.ci_high, sw.extra
    fitted: dict[str, Any] = {
        k: {"value": v, "ci_low": lo, "ci_high": hi} for k, (v, lo, hi) in extra.items()
    }
    if not spec.is_plain:
        fitted.update(_both_bad_fitted(counts, level))
    return rating, low, high, rounds, params, fitted, fit


def compute_leaderboard(
    counts: PairCounts,
    *,
    method: str = "bt",
    n_rounds: int = 1000,
    level: float = 0.95,
    interval: str = "bootstrap",
    anchor: tuple[str, float] | None = None,
    random_state: int = 0,
    progress: Progress | None = None,
    clusters: Clusters | None = None,
    **options: Any,
) -> Leaderboard:
    """Fit ``method`` on ``counts`` and return a complete :class:`Leaderboard`.

    Parameters
    ----------
    counts : PairCounts
    method : str
        One of :data:`METHODS`; ``"bt"`` is Bradley-Terry (plain unless options ask for more).
    n_rounds, level, random_state, progress :
        Bootstrap rounds, interval level, seed and progress callback ``(done, total)``.
    interval : ``"bootstrap"``, ``"sandwich"`` or ``"none"``
        ``"none"`` gives intervals equal to the rating and ranks from ratings alone.
    anchor : (model, rating), optional
    clusters : Clusters, optional
        Resample (bootstrap) or sum scores (sandwich) per cluster of votes; recorded as ``cluster`` in
        the parameters (``none`` without).
    **options :
        Model options (``half_life``, ``now``, ``prior``, ``both_bad``, ``per_model_position``,
        ``features``, ``feature_names``), the rating scale (``scale``, ``base``, ``initial``) and
        ``n_jobs`` for the bootstrap.

    Returns
    -------
    Leaderboard
        ``rank_low``/``rank_high`` from the bootstrap rounds when there are any, else from the
        intervals (best: 1 + models whose lower bound beats this upper bound; worst: models whose
        upper bound reaches this lower bound).
    """
    return fit_leaderboard(
        counts,
        method=method,
        n_rounds=n_rounds,
        level=level,
        interval=interval,
        anchor=anchor,
        random_state=random_state,
        progress=progress,
        clusters=clusters,
        **options,
    )[0]


def fit_leaderboard(
    counts: PairCounts,
    *,
    method: str = "bt",
    n_rounds: int = 1000,
    level: float = 0.95,
    interval: str = "bootstrap",
    anchor: tuple[str, float] | None = None,
    random_state: int = 0,
    progress: Progress | None = None,
    clusters: Clusters | None = None,
    **options: Any,
) -> tuple[Leaderboard, BTFit]:
    """:func:`compute_leaderboard`, and the point fit it made: what a certificate of the same board
    (:func:`leaderboard.design.fragility.fragility`) starts from instead of fitting the votes a second
    time."""
    if interval not in INTERVALS:
        raise ValueError(f"interval must be one of {INTERVALS}")
    spec = method_spec(method, options)
    rating, low, high, rounds, fit_params, fitted, fit = _fit_method(
        counts,
        spec,
        interval=interval,
        n_rounds=n_rounds,
        level=level,
        anchor=anchor,
        random_state=random_state,
        progress=progress,
        options=options,
        clusters=clusters,
    )
    parameters: dict[str, Any] = {
        "level": level,
        "interval": interval,
        "n_rounds": n_rounds if interval == "bootstrap" else 0,
        "random_state": random_state,
        "anchor": None if anchor is None else [anchor[0], float(anchor[1])],
        # the bootstrap's threads are not a parameter of the board: its rounds are the same for any number
        **{k: v for k, v in options.items() if isinstance(v, (int, float, str, bool)) and k != "n_jobs"},
        **fit_params,
    }
    if clusters is not None:
        parameters["cluster"] = clusters.label
        parameters["cluster_counts"] = list(clusters.n_levels)
    board = assemble_board(
        counts,
        rating,
        low,
        high,
        rounds,
        method=method,
        level=level,
        interval=interval,
        parameters=parameters,
        fitted=fitted,
    )
    return board, fit


def assemble_board(
    counts: PairCounts,
    rating: FloatArray,
    low: FloatArray,
    high: FloatArray,
    rounds: FloatArray | None,
    *,
    method: str,
    level: float,
    interval: str,
    parameters: dict[str, Any],
    fitted: Mapping[str, Mapping[str, float]],
) -> Leaderboard:
    """A complete :class:`Leaderboard` from ratings and intervals: ranks, rank intervals, the rank upper
    bound, battles and win rates, filled the same way for every method (the Bradley-Terry family here,
    the source-aware composite in :mod:`leaderboard.composite.board`)."""
    rating = np.asarray(rating, dtype=np.float64)
    low = np.array(low, dtype=np.float64)
    high = np.array(high, dtype=np.float64)
    rank = ranks_of(rating)[0]
    rank_ub = rank_upper_bound(low, high)
    if rounds is not None:
        rank_low, rank_high = rank_intervals(ranks_of(np.asarray(rounds)), level)
    else:
        rank_low = rank_ub
        rank_high = (high[None, :] >= low[:, None]).sum(axis=1).astype(np.int64)
    battles, win_rate = model_totals(counts)
    return Leaderboard(
        models=counts.models,
        rating=rating,
        ci_low=low,
        ci_high=high,
        rank=rank,
        rank_low=rank_low,
        rank_high=rank_high,
        rank_ub=rank_ub,
        battles=battles,
        win_rate=win_rate,
        method=method,
        parameters=parameters,
        parameters_fitted={k: dict(v) for k, v in fitted.items()},
        interval=interval,
        n_votes=counts.n_votes,
        rounds=None if rounds is None else np.asarray(rounds, dtype=np.float64),
    )
