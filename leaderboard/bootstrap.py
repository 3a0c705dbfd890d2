"""Bootstrap and sandwich intervals for Bradley-Terry ratings, and rank intervals.

Resampling N votes with replacement is one multinomial draw of N over the aggregated cells, and since
plain BT only sees :class:`~leaderboard.data.PairStats`, cells that share a pair and an outcome class
(left or right win, tie or both-bad) can be merged first: the merged counts of a multinomial are again
multinomial with summed probabilities. So a round draws a multinomial over at most three categories per
pair (about 15,000 for 100 models), exactly the vote-level bootstrap in distribution, and never touches
the votes.

The multinomial itself is drawn by :func:`draw_multinomial` (independent Poisson counts, then an exact
correction of their total), about twice as fast as numpy's ``Generator.multinomial``, which draws one
conditional binomial per category. Rounds run in blocks, each with its own generator spawned from one
``SeedSequence``, so the output is the same bit for bit for a seed whatever the number of threads;
numpy releases the GIL while drawing and in the linear algebra, so two threads use both cores. Each
block is refit at once by :func:`~leaderboard.bt.solve_bt_batch`, warm-started at the point estimate.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy import stats as sps
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from leaderboard.bt import BTFit, NonConvergenceError, fit_bt, solve_bt_batch
from leaderboard.data import PairCounts, outcome_class

__all__ = [
    "BootstrapResult",
    "DegenerateRoundsWarning",
    "IntervalResult",
    "bootstrap_ratings",
    "draw_multinomial",
    "percentile_intervals",
    "rank_intervals",
    "rank_upper_bound",
    "ranks_of",
    "sandwich_intervals",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Progress = Callable[[int, int], None]

#: Ridge used only in bootstrap rounds whose MLE does not exist (a model that won or lost every draw).
DEGENERATE_RIDGE = 1e-3


class DegenerateRoundsWarning(UserWarning):
    """Some bootstrap rounds had no finite MLE (too few votes); they were fit with a weak ridge."""


@dataclass(frozen=True)
class BootstrapResult:
    """Per-round ratings and the intervals made from them; arrays aligned with ``models``.

    Attributes
    ----------
    models : tuple of str
    rating : the point estimate
    ratings : array (n_rounds, M), one row of ratings per round
    ci_low, ci_high : percentile intervals at ``level``
    ranks : int array (n_rounds, M), 1 + models strictly higher in that round
    rank_low, rank_high : best and worst rank at ``level`` over the rounds
    level, n_rounds, random_state : how it was made
    n_degenerate : rounds fit with the ridge (see :class:`DegenerateRoundsWarning`)
    """

    models: tuple[str, ...]
    rating: FloatArray
    ratings: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    ranks: IntArray
    rank_low: IntArray
    rank_high: IntArray
    level: float
    n_rounds: int
    random_state: int
    n_degenerate: int


@dataclass(frozen=True)
class IntervalResult:
    """Normal-approximation intervals (sandwich or model-based)."""

    models: tuple[str, ...]
    rating: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    se: FloatArray
    cov: FloatArray
    level: float
    kind: str


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


def draw_multinomial(counts: npt.ArrayLike, size: int, rng: np.random.Generator) -> IntArray:
    """Resample ``N = sum(counts)`` items with replacement, ``size`` times: multinomial draws.

    Each row is distributed exactly as ``rng.multinomial(N, counts / N)``, but costs one Poisson
    variate per category instead of one conditional binomial (numpy's method), plus a correction of
    order ``sqrt(N)`` items:

    1. draw independent ``X_k ~ Poisson(counts_k)`` for a whole block of rows in one call;
    2. a row whose total ``S`` exceeds ``N`` loses ``S - N`` of its ``S`` items chosen uniformly
       without replacement (distinct ranks in ``[0, S)`` mapped to categories through the row's
       cumulative sum);
    3. a row whose total falls short gains ``N - S`` items drawn independently from ``counts / N``.

    Given its total ``S = s``, a vector of independent Poisson counts is ``Multinomial(s, p)``
    (with ``p = counts / N``); a uniform subset of ``N`` of those ``s`` independent categorical
    items, or ``N - s`` more such items, gives ``Multinomial(N, p)``. That holds for every ``s``,
    so it holds unconditionally. Integer arithmetic throughout: no rounding of probabilities.

    Parameters
    ----------
    counts : int array, shape (K,)
        Items per category (non-negative whole numbers, at least one item in all).
    size : int
        Number of resamples (rows).
    rng : numpy.random.Generator

    Returns
    -------
    int64 array, shape (size, K), every row summing to ``N``
    """
    votes = np.asarray(counts)
    if votes.ndim != 1:
        raise ValueError("counts must be one-dimensional")
    whole = np.round(votes)
    if np.any(whole < 0) or not np.array_equal(whole, votes):
        raise ValueError("counts must be non-negative whole numbers")
    cum_votes = np.cumsum(whole.astype(np.int64))
    n_total = int(cum_votes[-1]) if cum_votes.size else 0
    if n_total <= 0:
        raise ValueError("counts must hold at least one item")
    k = votes.size
    x: IntArray = rng.poisson(whole.astype(np.float64), size=(size, k)).astype(np.int64, copy=False)
    totals = x.sum(axis=1)
    for r in np.flatnonzero(totals != n_total):
        row = x[r]
        excess = int(totals[r]) - n_total
        if excess > 0:
            ranks = rng.choice(int(totals[r]), size=excess, replace=False, shuffle=False)
            hit = np.searchsorted(np.cumsum(row), ranks, side="right")
            row -= np.bincount(hit, minlength=k)
        else:
            items = rng.integers(0, n_total, size=-excess)
            row += np.bincount(np.searchsorted(cum_votes, items, side="right"), minlength=k)
    return x


def _anchor_rows(
    ratings: FloatArray, models: tuple[str, ...], anchor: tuple[str, float] | None
) -> FloatArray:
    if anchor is None:
        return ratings
    k = models.index(anchor[0])
    out: FloatArray = ratings - ratings[:, k : k + 1] + anchor[1]
    return out


class _Categories:
    """Cells merged by (pair, outcome class, weight per vote), with sparse maps back to pair statistics."""

    def __init__(self, counts: PairCounts, fit: BTFit) -> None:
        votes = counts.vote_counts
        if not np.allclose(votes, np.round(votes)):
            raise ValueError("bootstrap needs whole vote numbers per cell (PairCounts.votes)")
        lo, hi, cls = outcome_class(counts)
        m = counts.n_models
        ratio = np.divide(counts.count, votes, out=np.ones_like(votes), where=votes > 0)
        _, ratio_code = np.unique(ratio, return_inverse=True)
        key = ((lo * m + hi) * 3 + cls) * (int(ratio_code.max(initial=0)) + 1) + ratio_code
        uniq, inverse = np.unique(key, return_inverse=True)
        cat_votes = np.bincount(inverse, weights=votes)
        first = np.zeros(len(uniq), dtype=np.int64)
        first[inverse[::-1]] = np.arange(len(key))[::-1]
        keep = cat_votes > 0
        self.votes = np.round(cat_votes[keep]).astype(np.int64)
        self.n_total = int(self.votes.sum())
        cell = first[keep]
        pair_key = fit.stats.lo * m + fit.stats.hi
        pair_index = np.searchsorted(pair_key, lo[cell] * m + hi[cell])
        c = len(cell)
        n_pairs = len(pair_key)
        r = ratio[cell]
        score = np.array([1.0, 0.0, 0.5])[cls[cell]] * r
        self.to_n = sp.csr_matrix((r, (np.arange(c), pair_index)), shape=(c, n_pairs))
        self.to_s = sp.csr_matrix((score, (np.arange(c), pair_index)), shape=(c, n_pairs))
        self.p = self.votes / self.n_total


def _run_block(
    seed: np.random.SeedSequence,
    size: int,
    cats: _Categories,
    fit: BTFit,
    fixed: FloatArray,
    tol: float,
) -> tuple[FloatArray, int]:
    rng = np.random.Generator(np.random.PCG64(seed))
    draws = draw_multinomial(cats.votes, size, rng).astype(np.float64)
    n = np.asarray(draws @ cats.to_n)
    s = np.asarray(draws @ cats.to_s)
    st = fit.stats
    m = len(fit.models)
    theta, ok, _ = solve_bt_batch(
        st.lo, st.hi, n, s, n_models=m, theta0=fit.theta, fixed_hessian=fixed, tol=tol
    )
    bad = np.flatnonzero(~ok)
    if bad.size:
        fixed_bad, ok_bad, it = solve_bt_batch(
            st.lo, st.hi, n[bad], s[bad], n_models=m, ridge=DEGENERATE_RIDGE, tol=tol, max_iter=200
        )
        if not ok_bad.all():
            raise NonConvergenceError(
                f"bootstrap rounds did not converge even with a ridge ({it} iterations)"
            )
        theta[bad] = fixed_bad
    return theta, int(bad.size)


def bootstrap_ratings(
    counts: PairCounts,
    *,
    n_rounds: int = 1000,
    level: float = 0.95,
    random_state: int = 0,
    progress: Progress | None = None,
    fit: BTFit | None = None,
    anchor: tuple[str, float] | None = None,
    scale: float = 400.0,
    base: float = 10.0,
    initial: float = 1000.0,
    n_jobs: int | None = None,
    block_size: int = 50,
    tol: float = 1e-9,
) -> BootstrapResult:
    """Percentile bootstrap of plain Bradley-Terry ratings by multinomial resampling of the counts.

    Parameters
    ----------
    counts : PairCounts
    n_rounds : int
        Bootstrap rounds; each redraws all N votes with replacement and refits the MLE exactly.
    level : float
        Interval level (0.95: 2.5th and 97.5th percentiles).
    random_state : int
        Seed: the same seed gives identical output, bit for bit, for any ``n_jobs``.
    progress : callable(done, total), optional
        Called after each block of rounds.
    fit : BTFit, optional
        The point fit (computed with :func:`~leaderboard.bt.fit_bt` when not given).
    anchor : (model, rating), optional
        Anchor each round's ratings (so the anchor's interval is a point).
    scale, base, initial : rating scale, when ``fit`` is not given.
    n_jobs : int, optional
        Threads (default: up to 2, the cores of the target machine).
    block_size : int
        Rounds per block (fixed, so results do not depend on ``n_jobs``).
    tol : float
        Newton tolerance per round, natural-log units.

    Returns
    -------
    BootstrapResult

    Warns
    -----
    DegenerateRoundsWarning
        When some rounds had no finite MLE (small data) and were fit with a weak ridge.
    """
    if n_rounds < 1:
        raise ValueError("n_rounds must be at least 1")
    if fit is None:
        fit = fit_bt(counts, anchor=anchor, scale=scale, base=base, initial=initial)
    if anchor is None:
        anchor = fit.anchor
    cats = _Categories(counts, fit)
    fixed = fit.hessian / math.log(fit.base) ** 2
    sizes = [min(block_size, n_rounds - start) for start in range(0, n_rounds, block_size)]
    seeds = np.random.SeedSequence(random_state).spawn(len(sizes))
    jobs = n_jobs if n_jobs is not None else min(2, os.cpu_count() or 1)
    thetas: list[FloatArray] = []
    n_degenerate = 0
    done = 0
    # The blocks are the parallelism: BLAS threads on top (small M x M products) only contend for the
    # same cores and spin; limiting them to one made refits 2-3x cheaper on the 2-core target.
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = pool.map(
            lambda a: _run_block(a[0], a[1], cats, fit, fixed, tol), zip(seeds, sizes, strict=True)
        )
        for theta, bad in results:
            thetas.append(theta)
            n_degenerate += bad
            done += theta.shape[0]
            if progress is not None:
                progress(done, n_rounds)
    if n_degenerate:
        warnings.warn(
            f"{n_degenerate} of {n_rounds} bootstrap rounds had no finite maximum-likelihood estimate "
            f"(a model won or lost every resampled battle); they were fit with ridge {DEGENERATE_RIDGE}",
            DegenerateRoundsWarning,
            stacklevel=2,
        )
    coef = np.concatenate(thetas) / math.log(fit.base)
    ratings = _anchor_rows(fit.scale * coef + fit.initial, fit.models, anchor)
    low, high = percentile_intervals(ratings, level)
    ranks = ranks_of(ratings)
    r_low, r_high = rank_intervals(ranks, level)
    return BootstrapResult(
        models=fit.models,
        rating=fit.rating,
        ratings=ratings,
        ci_low=low,
        ci_high=high,
        ranks=ranks,
        rank_low=r_low,
        rank_high=r_high,
        level=level,
        n_rounds=n_rounds,
        random_state=random_state,
        n_degenerate=n_degenerate,
    )


def sandwich_intervals(
    counts: PairCounts | None = None,
    *,
    fit: BTFit | None = None,
    level: float = 0.95,
    anchor: tuple[str, float] | None = None,
    robust: bool = True,
) -> IntervalResult:
    """Normal intervals from the sandwich covariance ``H^+ S H^+`` of the coefficients.

    ``H`` is the Hessian of the negative log-likelihood and ``S`` the sum of outer products of the
    per-vote scores (Huber 1967, White 1980); with ties scored as half wins the model is misspecified
    for them, and the sandwich stays honest where the model-based ``H^+`` would not. ``H^+`` is the
    pseudo-inverse on the sum-zero gauge; with an anchor the covariance is that of differences to it.

    Parameters
    ----------
    counts : PairCounts, optional
        Needed only when ``fit`` is not given.
    fit : BTFit, optional
    level : float
    anchor : (model, rating), optional; default: the fit's anchor
    robust : bool
        ``False`` gives the model-based covariance ``H^+``.

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
    cov = h_inv @ fit.score_outer @ h_inv if robust else h_inv
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
    return IntervalResult(
        models=fit.models,
        rating=rating,
        ci_low=rating - z * se,
        ci_high=rating + z * se,
        se=se,
        cov=np.asarray(cov_rating, dtype=np.float64),
        level=level,
        kind="sandwich" if robust else "model",
    )
