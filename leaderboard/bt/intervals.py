"""Intervals on fitted ratings: the sandwich covariance, percentile and rank intervals, the rank upper bound.

The sandwich ``H^+ S H^+`` (Huber 1967, White 1980) works for every member of the Bradley-Terry family
from the curvature a :class:`~leaderboard.bt.fit.BTFit` carries; the percentile and rank helpers turn the
rounds of :func:`leaderboard.bt.bootstrap.bootstrap_ratings` into intervals.

With clustered votes (:class:`~leaderboard.bt.clusters.Clusters`) the meat sums the scores within each
cluster before taking outer products (Liang and Zeger 1986), scaled by ``G / (G - 1)``; crossed annotator
and prompt clusters take the two one-way meats minus the intersection's (Cameron, Gelbach and Miller
2011), with negative eigenvalues set to zero so the covariance stays positive semi-definite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy import stats as sps

from leaderboard.bt.cells import Layout, Objective
from leaderboard.bt.clusters import Clusters
from leaderboard.bt.fit import BTFit, fit_bt
from leaderboard.data import FEW_VOTES, Outcome, PairCounts

__all__ = [
    "IntervalResult",
    "cluster_meat",
    "few_vote_floor",
    "percentile_intervals",
    "plain_cell_scores",
    "rank_intervals",
    "rank_upper_bound",
    "ranks_of",
    "sandwich_intervals",
    "vote_scores",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class IntervalResult:
    """Normal-approximation intervals (sandwich or model-based).

    ``extra`` maps each fitted extra parameter (position advantage, tie propensity, style coefficient)
    to ``(value, low, high)``.
    """

    models: tuple[str, ...]
    rating: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    se: FloatArray
    cov: FloatArray
    level: float
    kind: str
    extra: dict[str, tuple[float, float, float]] = field(default_factory=dict)


def percentile_intervals(samples: FloatArray, level: float) -> tuple[FloatArray, FloatArray]:
    """Percentile interval of each column at ``level`` (linear interpolation, as numpy's default)."""
    if not 0 < level < 1:
        raise ValueError("level must be between 0 and 1")
    low, high = np.percentile(samples, [50 * (1 - level), 50 * (1 + level)], axis=0)
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)


def ranks_of(ratings: FloatArray) -> IntArray:
    """Rank of each model in each row: 1 + the number of models with a strictly higher rating."""
    r = np.atleast_2d(ratings)
    out: IntArray = sps.rankdata(-r, method="min", axis=1).astype(np.int64)
    return out


def rank_intervals(ranks: IntArray, level: float) -> tuple[IntArray, IntArray]:
    """Best and worst rank at ``level`` over rounds (inward-rounded order statistics)."""
    low = np.quantile(ranks, (1 - level) / 2, axis=0, method="lower")
    high = np.quantile(ranks, (1 + level) / 2, axis=0, method="higher")
    return np.asarray(low, dtype=np.int64), np.asarray(high, dtype=np.int64)


def rank_upper_bound(ci_low: npt.ArrayLike, ci_high: npt.ArrayLike) -> IntArray:
    """Chatbot Arena's rank upper bound: 1 + number of models whose ``ci_low`` exceeds this ``ci_high``.

    Parameters
    ----------
    ci_low, ci_high : arrays, shape (M,)

    Returns
    -------
    int array, shape (M,)
    """
    low = np.asarray(ci_low, dtype=np.float64)
    high = np.asarray(ci_high, dtype=np.float64)
    out: IntArray = 1 + (low[None, :] > high[:, None]).sum(axis=1).astype(np.int64)
    return out


def plain_cell_scores(fit: BTFit, counts: PairCounts) -> FloatArray:
    """A plain fit's per-vote score of each cell w.r.t. ``fit.x`` (weighted by the vote's weight), as one
    number per cell: the score vector of a vote of cell ``c`` is this number at ``model_a[c]``, its
    negative at ``model_b[c]`` and zero elsewhere (what :func:`vote_scores` spells out as a matrix)."""
    if not fit.spec.is_plain:
        raise ValueError("one number per cell is the score of a plain fit only")
    votes = counts.vote_counts
    weight = np.divide(counts.count, votes, out=np.ones_like(votes), where=votes > 0)
    theta = fit.theta
    a, b = counts.model_a, counts.model_b
    won = np.array([1.0, 0.0, 0.5, 0.5])[counts.outcome.astype(np.int64)]
    p = 1.0 / (1.0 + np.exp(theta[b] - theta[a]))
    g: FloatArray = math.log(fit.base) * (won - p) * weight
    return g


def vote_scores(fit: BTFit, counts: PairCounts) -> tuple[FloatArray, FloatArray]:
    """Per-vote score of each cell of ``counts`` w.r.t. ``fit.x`` (weighted by the vote's weight), and
    the columns of ``counts`` those rows belong to."""
    if fit.spec.is_plain:
        g = plain_cell_scores(fit, counts)
        a, b = counts.model_a, counts.model_b
        rows = np.arange(counts.n_cells)
        out = np.zeros((counts.n_cells, len(fit.models)))
        np.add.at(out, (rows, a), g)
        np.add.at(out, (rows, b), -g)
        return out, rows.astype(np.float64)
    cells = fit.cells
    if cells is None:
        raise ValueError("this fit has no cells")
    layout = Layout.of(fit.spec, cells.n_models)
    objective = Objective(cells, fit.spec, layout, nat_per_point=math.log(fit.base) / fit.scale)
    kept = np.ones(counts.n_cells, dtype=bool)
    if fit.spec.both_bad == "exclude":
        kept = counts.outcome != Outcome.BOTHBAD
    scores: FloatArray = objective.scores(fit.x) * cells.weight[:, None]
    return scores, np.flatnonzero(kept).astype(np.float64)


def cluster_meat(fit: BTFit, counts: PairCounts, clusters: Clusters) -> FloatArray:
    """The cluster-robust meat: outer products of the per-cluster sums of vote scores (w.r.t. ``fit.x``).

    One dimension: ``G / (G - 1) sum_g U_g U_g^T``, ``U_g`` the sum of the weighted scores of cluster
    ``g``'s votes, each with its own weight. Two crossed dimensions: the annotator meat plus the prompt
    meat minus the intersection meat, projected onto the positive semi-definite cone.
    """
    if clusters.members.shape[1] != counts.n_cells:
        raise ValueError("clusters were made for other counts (cell numbers differ)")
    scores, columns = vote_scores(fit, counts)
    # a vote's score is at its cell's mean weight; ``resampled`` counts each cluster's votes in those units
    members = clusters.resampled[:, columns.astype(np.int64)]

    def one(matrix: sp.csr_matrix, n_groups: int) -> FloatArray:
        u = np.asarray(matrix @ scores)
        factor = n_groups / (n_groups - 1) if n_groups > 1 else 1.0
        out: FloatArray = factor * (u.T @ u)
        return out

    if len(clusters.by) == 1:
        return one(members, clusters.n_levels[0])
    n_rows = clusters.codes.shape[0]
    meat = one(members, n_rows).copy() * -1.0
    for d, n in enumerate(clusters.n_levels):
        collapse = sp.csr_matrix(
            (np.ones(n_rows), (clusters.codes[:, d], np.arange(n_rows))), shape=(n, n_rows)
        )
        meat += one((collapse @ members).tocsr(), n)
    values, vectors = np.linalg.eigh(0.5 * (meat + meat.T))
    psd: FloatArray = (vectors * np.maximum(values, 0.0)) @ vectors.T
    return psd


def sandwich_intervals(
    counts: PairCounts | None = None,
    *,
    fit: BTFit | None = None,
    level: float = 0.95,
    anchor: tuple[str, float] | None = None,
    robust: bool = True,
    clusters: Clusters | None = None,
) -> IntervalResult:
    """Normal intervals from the sandwich covariance ``H^+ S H^+`` of the fitted parameters.

    ``H`` is the Hessian of the negative log-likelihood and ``S`` the sum of outer products of the
    per-vote scores (Huber 1967, White 1980); with ties scored as half wins the model is misspecified
    for them, and the sandwich stays honest where the model-based ``H^+`` would not. ``H^+`` is the
    pseudo-inverse (on the sum-zero gauge for plain fits); ratings are linear in the parameters, so
    their covariance is mapped through ``fit.coef_map``; with an anchor it is that of differences to
    it. A tie propensity gets ``exp`` of a normal interval on ``log nu``.

    Parameters
    ----------
    counts : PairCounts, optional
        Needed only when ``fit`` is not given (a plain fit is made).
    fit : BTFit, optional
    level : float
    anchor : (model, rating), optional; default: the fit's anchor
    robust : bool
        ``False`` gives the model-based covariance ``H^+``.
    clusters : Clusters, optional
        Cluster-robust meat (:func:`cluster_meat`); needs the ``counts`` the clusters were made for.

    Returns
    -------
    IntervalResult
    """
    if fit is None:
        if counts is None:
            raise ValueError("give counts or fit")
        fit = fit_bt(counts, anchor=anchor)
    if anchor is None:
        anchor = fit.anchor
    m = len(fit.models)
    h_inv = np.linalg.pinv(fit.hessian, hermitian=True)
    meat = fit.score_outer
    if clusters is not None:
        if counts is None:
            raise ValueError("a clustered sandwich needs the counts the clusters were made for")
        meat = cluster_meat(fit, counts, clusters)
    cov_x = h_inv @ meat @ h_inv if robust else h_inv
    cov = cov_x if fit.coef_map is None else fit.coef_map @ cov_x @ fit.coef_map.T
    if anchor is not None:
        k = fit.models.index(anchor[0])
        t = np.eye(m)
        t[:, k] -= 1.0
        cov = t @ cov @ t.T
    cov_rating = fit.scale**2 * cov
    se = np.sqrt(np.maximum(np.diag(cov_rating), 0.0))
    z = float(sps.norm.ppf(0.5 + level / 2))
    rating = fit.rating
    if anchor is not None:
        rating = rating - rating[fit.models.index(anchor[0])] + anchor[1]
    per_nat = fit.scale / math.log(fit.base)
    extra: dict[str, tuple[float, float, float]] = {}
    for term in fit.extra_terms:
        value = float(fit.x[term.index])
        half = z * math.sqrt(max(float(cov_x[term.index, term.index]), 0.0))
        if term.kind == "exp":
            extra[term.name] = (math.exp(value), math.exp(value - half), math.exp(value + half))
        else:
            extra[term.name] = (per_nat * value, per_nat * (value - half), per_nat * (value + half))
    return IntervalResult(
        models=fit.models,
        rating=rating,
        ci_low=rating - z * se,
        ci_high=rating + z * se,
        se=se,
        cov=np.asarray(cov_rating, dtype=np.float64),
        level=level,
        kind=("sandwich" if clusters is None else f"sandwich:{clusters.label}") if robust else "model",
        extra=extra,
    )


def few_vote_floor(
    counts: PairCounts, fit: BTFit, ci_low: FloatArray, ci_high: FloatArray, *, level: float
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """Intervals of models in fewer than :data:`FEW_VOTES` votes widened to at least the model-based
    normal interval (``H^+`` of the point fit), and which models those are.

    Resampling a handful of votes cannot show how little they say. A model whose only vote is a tie has
    that tie in every round that draws it, and the tie puts it exactly at its opponent, so its bootstrap
    distribution is its opponent's; in a round that misses its votes it has no rating of its own, and the
    warm-started Newton step moves it with the opponent it is tied to (its row of the point Hessian
    couples it to nothing else). Its percentile interval, and its rank range, were then the opponent's,
    to the decimal. The sandwich fails the same way (a tie's score is zero at equal ratings). The
    curvature of the likelihood still says how much one vote tells (about ±480 points for one tie at
    95%); models with enough votes keep their intervals as they were."""
    few = counts.model_votes() < FEW_VOTES
    if not few.any():
        return ci_low, ci_high, few
    model = sandwich_intervals(counts, fit=fit, level=level, robust=False)
    low = np.where(few, np.minimum(ci_low, model.ci_low), ci_low)
    high = np.where(few, np.maximum(ci_high, model.ci_high), ci_high)
    return low, high, few
