"""One entry point for the CLI, snapshots and the web: counts and a fit request in, a filled board out.

A :class:`~leaderboard.bt.request.FitRequest` names a member of the Bradley-Terry family
(:data:`~leaderboard.bt.request.METHODS`) with its model options (time weights, prior, both-bad handling)
and its intervals; every member runs through :func:`~leaderboard.bt.fit.fit_bt` and
:func:`~leaderboard.bt.bootstrap.bootstrap_ratings` (or the sandwich), style covariates included. Ranks,
rank intervals, the rank upper bound, battles and win rates are filled in here the same way for every
method.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import binomtest

from leaderboard.bt.bootstrap import Progress, bootstrap_ratings
from leaderboard.bt.clusters import Clusters
from leaderboard.bt.fit import BTFit, fit_bt
from leaderboard.bt.intervals import (
    few_vote_floor,
    rank_intervals,
    rank_upper_bound,
    ranks_of,
    sandwich_intervals,
)
from leaderboard.bt.matrices import model_totals
from leaderboard.bt.request import FitRequest, method_spec
from leaderboard.bt.spec import BTSpec
from leaderboard.data import FEW_VOTES, Outcome, PairCounts
from leaderboard.result import Leaderboard

__all__ = [
    "assemble_board",
    "both_bad_rates",
    "compute_leaderboard",
    "fit_leaderboard",
]

FloatArray = npt.NDArray[np.float64]


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
    request: FitRequest,
    *,
    progress: Progress | None,
    clusters: Clusters | None,
    n_jobs: int | None,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray | None, dict[str, Any], dict[str, Any], BTFit]:
    """Point fit and intervals through the one engine: rating, low, high, rounds, parameters, fitted and
    the point fit itself."""
    fit = fit_bt(counts, spec=spec, anchor=request.anchor)
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
    if request.interval == "bootstrap":
        boot = bootstrap_ratings(
            counts,
            fit=fit,
            n_rounds=request.n_rounds,
            level=request.level,
            random_state=request.random_state,
            progress=progress,
            n_jobs=n_jobs,
            clusters=clusters,
        )
        if spec.is_plain:
            params["degenerate_rounds"] = boot.n_degenerate
        low, high, rounds, extra = boot.ci_low, boot.ci_high, boot.ratings, boot.extra
    elif request.interval == "sandwich":
        sw = sandwich_intervals(counts, fit=fit, level=request.level, clusters=clusters)
        low, high, extra = sw.ci_low, sw.ci_high, sw.extra
    if request.interval != "none":
        low, high, few = few_vote_floor(counts, fit, low, high, level=request.level)
        if few.any():  # said only where it happened: other boards' parameters stay as they were
            params["few_votes"] = {
                "below": FEW_VOTES,
                "models": [m for m, f in zip(fit.models, few, strict=True) if f],
            }
    fitted: dict[str, Any] = {
        k: {"value": v, "ci_low": lo, "ci_high": hi} for k, (v, lo, hi) in extra.items()
    }
    if not spec.is_plain:
        fitted.update(_both_bad_fitted(counts, request.level))
    return rating, low, high, rounds, params, fitted, fit


def compute_leaderboard(
    counts: PairCounts,
    request: FitRequest = FitRequest(),  # noqa: B008 - frozen, so a shared default is safe
    *,
    progress: Progress | None = None,
    clusters: Clusters | None = None,
) -> Leaderboard:
    """Fit ``request``'s method on ``counts`` and return a complete :class:`Leaderboard`.

    Parameters
    ----------
    counts : PairCounts
    request : FitRequest
        The method (one of :data:`~leaderboard.bt.request.METHODS`; ``"bt"`` is Bradley-Terry, plain unless
        the model options ask for more), its model options, the interval (``"bootstrap"``, ``"sandwich"``
        or ``"none"``: intervals equal to the rating and ranks from ratings alone), bootstrap rounds, level,
        anchor and seed.
    progress : callable, optional
        ``progress(done, total)`` after each bootstrap round (or batch of rounds).
    clusters : Clusters, optional
        Resample (bootstrap) or sum scores (sandwich) per cluster of votes; recorded as ``cluster`` in
        the parameters (``none`` without).

    Returns
    -------
    Leaderboard
        ``rank_low``/``rank_high`` from the bootstrap rounds when there are any, else from the
        intervals (best: 1 + models whose lower bound beats this upper bound; worst: models whose
        upper bound reaches this lower bound).

    Raises
    ------
    ValueError
        For a source-aware method (it fits votes with who cast them, not counts).
    """
    return fit_leaderboard(counts, request, progress=progress, clusters=clusters)[0]


def fit_leaderboard(
    counts: PairCounts,
    request: FitRequest,
    *,
    progress: Progress | None = None,
    clusters: Clusters | None = None,
    n_jobs: int | None = None,
    features: FloatArray | None = None,
    feature_names: Sequence[str] = (),
) -> tuple[Leaderboard, BTFit]:
    """:func:`compute_leaderboard`, and the point fit it made: what a certificate of the same board
    (:func:`leaderboard.design.fragility.fragility`) starts from instead of fitting the votes a second
    time. ``n_jobs`` bootstrap threads (default: up to two) change how fast, never what; ``features``
    (one row per cell, named ``feature_names``) are style covariates in the linear predictor
    (:mod:`leaderboard.style.board`)."""
    spec = method_spec(request.method, request.model, features=features, feature_names=feature_names)
    rating, low, high, rounds, fit_params, fitted, fit = _fit_method(
        counts, spec, request, progress=progress, clusters=clusters, n_jobs=n_jobs
    )
    anchor = request.anchor
    parameters: dict[str, Any] = {
        "level": request.level,
        "interval": request.interval,
        "n_rounds": request.n_rounds if request.interval == "bootstrap" else 0,
        "random_state": request.random_state,
        "anchor": None if anchor is None else [anchor[0], float(anchor[1])],
        **request.model.describe(),
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
        method=request.method,
        level=request.level,
        interval=request.interval,
        parameters=parameters,
        fitted=fitted,
        widened=fit_params.get("few_votes", {}).get("models", ()),
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
    widened: Sequence[str] = (),
) -> Leaderboard:
    """A complete :class:`Leaderboard` from ratings and intervals: ranks, rank intervals, the rank upper
    bound, battles and win rates, filled the same way for every method (the Bradley-Terry family here,
    the source-aware composite in :mod:`leaderboard.composite.board`). The rank range of a model in
    ``widened`` (its interval wider than its rounds say: :func:`~leaderboard.bt.intervals.few_vote_floor`)
    also spans every rank its interval allows."""
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
    if widened:
        wide = np.isin(np.asarray(counts.models, dtype=object), list(widened))
        reach = (high[None, :] >= low[:, None]).sum(axis=1).astype(np.int64)
        rank_low = np.where(wide, np.minimum(rank_low, rank_ub), rank_low)
        rank_high = np.where(wide, np.maximum(rank_high, reach), rank_high)
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
