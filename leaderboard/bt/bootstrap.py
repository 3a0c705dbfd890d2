"""The one bootstrap driver: resample the votes as multinomial draws over cells, refit, take percentiles.

Resampling N votes with replacement is one multinomial draw of N over the aggregated cells, so a round
never touches the votes. Rounds run in blocks, each with its own generator spawned from one
``SeedSequence``, so the output is the same bit for bit for a seed whatever the number of threads; numpy
releases the GIL while drawing and in the linear algebra, so two threads use both cores.

Plain Bradley-Terry only sees :class:`~leaderboard.data.PairStats`, so cells that share a pair and an
outcome class (left or right win, tie or both-bad) are merged first: the merged counts of a multinomial
are again multinomial with summed probabilities, at most three categories per pair, exactly the
vote-level bootstrap in distribution. Each block is then refit at once by
:func:`~leaderboard.bt.newton.solve_bt_batch`, warm-started at the point estimate. Every other member of the
family redraws its cells and refits each round by Newton's method, warm-started too.

**Weights that differ within a cell.** A cell's likelihood needs only its weight total, but a vote
bootstrap redraws votes, each with its own weight: given ``k`` of a cell's votes drawn, their total has
mean ``k m`` and variance ``k v`` (``m`` and ``v`` the mean and variance of the cell's weights, known from
the summed weights and squared weights, :attr:`~leaderboard.data.PairCounts.weight_spread`). Drawing
every cell at its mean weight (``k m``) drops the ``k v`` and the intervals come out too narrow; a round
instead draws the total from a gamma law with that mean and variance (:func:`draw_weight_totals`), one
variate per such cell, so the round's totals have the first two moments of the per-vote bootstrap
without the votes. Cells of equal weights draw nothing more (unweighted rounds are unchanged, bit for bit).

The multinomial itself is drawn by :func:`draw_multinomial` (independent Poisson counts, then an exact
correction of their total), about twice as fast as numpy's ``Generator.multinomial``, which draws one
conditional binomial per category.

**Clustered votes.** Votes by one annotator (or on one prompt) are not independent, and resampling single
votes then understates the uncertainty. With ``clusters`` (:class:`~leaderboard.bt.clusters.Clusters`) a round
resamples whole clusters instead: ``G`` draws with replacement from the ``G`` clusters (a multinomial over
clusters, :func:`draw_multinomial` again), and the round's cell counts are the clusters' cell counts
weighted by how often each was drawn, a sparse product on counts aggregated per cluster once, so a round
costs the same whatever the number of votes. Crossed annotator and prompt clusters use the pigeonhole
bootstrap (Owen 2007): annotators and prompts are resampled independently and a vote weighs the product
of its annotator's and its prompt's draw counts. No bootstrap reproduces the variance of a crossed design
exactly (McCullagh 2000). For a mean over R annotators crossed with C prompts (N votes), with annotator,
prompt and residual variances ``sA, sB, sE``, the true variance is about ``sA/R + sB/C + sE/N``; with
weights ``W_i V_j`` the bootstrap's is about ``sA/R + sB/C + 3 sE/N`` (Owen 2007): each of the two
resampled dimensions carries the residual once more, so it errs on the wide side, never the narrow one,
by a term of order 1/N against main effects of order 1/R and 1/C. Resampling one dimension alone would
instead drop the other's term entirely. Rounds no longer hold exactly N votes;
the weighted likelihood does not need them to.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from leaderboard.bt.cells import Layout, Objective, maximise
from leaderboard.bt.clusters import Clusters
from leaderboard.bt.fit import BTFit, fit_bt
from leaderboard.bt.intervals import percentile_intervals, rank_intervals, ranks_of
from leaderboard.bt.newton import solve_bt_batch
from leaderboard.bt.spec import BTSpec, NonConvergenceError
from leaderboard.data import Outcome, PairCounts, outcome_class

__all__ = [
    "BootstrapResult",
    "DegenerateRoundsWarning",
    "bootstrap_ratings",
    "cluster_weights",
    "draw_multinomial",
    "draw_weight_totals",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Progress = Callable[[int, int], None]

#: Ridge used only in plain bootstrap rounds whose MLE does not exist (a model that won or lost every draw).
DEGENERATE_RIDGE = 1e-3
#: Gradient tolerance (per vote) of a refit round of the general path.
_ROUND_TOL = 1e-7


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
    extra : each fitted extra parameter as ``(value, low, high)`` (percentile interval)
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
    extra: dict[str, tuple[float, float, float]] = field(default_factory=dict)


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


def draw_weight_totals(
    draws: FloatArray, mean: FloatArray, spread: FloatArray, rng: np.random.Generator
) -> FloatArray:
    """Rounds of votes drawn per cell (rows) turned into the drawn votes' weight totals, in votes at
    the cell's ``mean`` weight, where the weights spread within the cell (``spread``, their variance).

    ``k`` votes drawn from a cell carry a total of mean ``k m`` and variance ``k v``; a gamma law of
    shape ``k m^2 / v`` and scale ``v / m`` has both, stays positive and adds up over votes (a sum of
    ``k`` gammas of shape ``m^2 / v``), so a round's totals have the per-vote bootstrap's first two
    moments. Columns without spread are returned as drawn.
    """
    cols = np.flatnonzero((spread > 0) & (mean > 0))
    if not cols.size:
        return draws
    m, v = mean[cols], spread[cols]
    out = draws.copy()
    out[:, cols] = rng.gamma(draws[:, cols] * (m * m / v), v / m) / m
    return out


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
        self.ratio = ratio[cell]
        # Variance of the vote weights within each category (None: equal weights throughout).
        self.spread: FloatArray | None = None
        if np.any(counts.weight_spread > 0):
            squares = np.bincount(inverse, weights=counts.squared_weights)[keep] / self.votes
            spread = squares - self.ratio**2
            spread[spread <= 1e-12 * self.ratio**2] = 0.0
            self.spread = spread
        pair_key = fit.stats.lo * m + fit.stats.hi
        pair_index = np.searchsorted(pair_key, lo[cell] * m + hi[cell])
        c = len(cell)
        n_pairs = len(pair_key)
        r = ratio[cell]
        score = np.array([1.0, 0.0, 0.5])[cls[cell]] * r
        self.to_n = sp.csr_matrix((r, (np.arange(c), pair_index)), shape=(c, n_pairs))
        self.to_s = sp.csr_matrix((score, (np.arange(c), pair_index)), shape=(c, n_pairs))
        self.p = self.votes / self.n_total
        kept = np.cumsum(keep) - 1
        on = keep[inverse]
        self.cell_to_cat = sp.csr_matrix(
            (np.ones(int(on.sum())), (np.flatnonzero(on), kept[inverse[on]])), shape=(len(key), c)
        )


def cluster_weights(clusters: Clusters, rng: np.random.Generator, size: int) -> FloatArray:
    """``size`` rounds of weights per cluster row: each dimension's clusters resampled with replacement
    (a multinomial over its clusters); a row of two dimensions (an annotator-prompt intersection) weighs
    the product of its two clusters' draw counts (the pigeonhole bootstrap)."""
    out = np.ones((size, clusters.codes.shape[0]))
    for d, n in enumerate(clusters.n_levels):
        draws = draw_multinomial(np.ones(n, dtype=np.int64), size, rng).astype(np.float64)
        out *= draws[:, clusters.codes[:, d]]
    return out


def _run_block(
    seed: np.random.SeedSequence,
    size: int,
    cats: _Categories,
    fit: BTFit,
    fixed: FloatArray,
    tol: float,
    per_cluster: tuple[Clusters, sp.csr_matrix, sp.csr_matrix] | None = None,
) -> tuple[FloatArray, int]:
    rng = np.random.Generator(np.random.PCG64(seed))
    if per_cluster is None:
        draws = draw_multinomial(cats.votes, size, rng).astype(np.float64)
        if cats.spread is not None:
            draws = draw_weight_totals(draws, cats.ratio, cats.spread, rng)
        n = np.asarray(draws @ cats.to_n)
        s = np.asarray(draws @ cats.to_s)
    else:
        clusters, cluster_n, cluster_s = per_cluster
        weights = cluster_weights(clusters, rng, size)
        n = np.asarray(weights @ cluster_n)
        s = np.asarray(weights @ cluster_s)
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


def _run_cells_block(
    seed: np.random.SeedSequence,
    size: int,
    fit: BTFit,
    per_cluster: tuple[Clusters, sp.csr_matrix] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Redraw the cells of a non-plain fit ``size`` times and refit each round from the point estimate;
    returns the rounds' centred coefficients (size x M) and extra parameters (size x n_extra)."""
    cells = fit.cells
    if cells is None:
        raise ValueError("this fit has no cells to resample")
    rng = np.random.Generator(np.random.PCG64(seed))
    if per_cluster is None:
        draws = draw_multinomial(cells.count, size, rng).astype(np.float64)
        if cells.spread is not None:
            draws = draw_weight_totals(draws, cells.weight, cells.spread, rng)
    else:
        draws = np.asarray(cluster_weights(per_cluster[0], rng, size) @ per_cluster[1])
    layout = Layout.of(fit.spec, cells.n_models)
    objective = Objective(cells, fit.spec, layout, nat_per_point=math.log(fit.base) / fit.scale)
    xs = np.empty((size, fit.x.shape[0]))
    for r in range(size):
        objective.set_count(draws[r])
        x, _, message = maximise(objective, fit.x, tol=_ROUND_TOL, max_iter=200)
        if message:
            raise NonConvergenceError(f"a bootstrap round did not converge: {message}")
        xs[r] = x
    extras = np.array([list(fit.extras_of(x).values()) for x in xs]).reshape(size, len(fit.extra_terms))
    return fit.coef_of(xs), extras


def bootstrap_ratings(
    counts: PairCounts,
    *,
    n_rounds: int = 1000,
    level: float = 0.95,
    random_state: int = 0,
    progress: Progress | None = None,
    fit: BTFit | None = None,
    spec: BTSpec | None = None,
    anchor: tuple[str, float] | None = None,
    scale: float = 400.0,
    base: float = 10.0,
    initial: float = 1000.0,
    n_jobs: int | None = None,
    block_size: int = 50,
    tol: float = 1e-9,
    clusters: Clusters | None = None,
) -> BootstrapResult:
    """Percentile bootstrap of Bradley-Terry ratings by multinomial resampling of the counts.

    Parameters
    ----------
    counts : PairCounts
    n_rounds : int
        Bootstrap rounds; each redraws all N votes with replacement and refits exactly.
    level : float
        Interval level (0.95: 2.5th and 97.5th percentiles).
    random_state : int
        Seed: the same seed gives identical output, bit for bit, for any ``n_jobs``.
    progress : callable(done, total), optional
        Called after each block of rounds.
    fit : BTFit, optional
        The point fit (made with :func:`~leaderboard.bt.fit.fit_bt` and ``spec`` when not given); its spec
        is the member of the family refit each round.
    spec : BTSpec, optional
        What to fit when ``fit`` is not given (plain Bradley-Terry by default).
    anchor : (model, rating), optional
        Anchor each round's ratings (so the anchor's interval is a point).
    scale, base, initial : rating scale, when ``fit`` is not given.
    n_jobs : int, optional
        Threads (default: up to 2, the cores of the target machine).
    block_size : int
        Rounds per block (fixed, so results do not depend on ``n_jobs``).
    tol : float
        Newton tolerance per plain round, natural-log units.
    clusters : Clusters, optional
        Resample whole clusters (annotators, prompts, or both crossed) instead of single votes; made by
        :func:`~leaderboard.bt.clusters.cluster_cells` from the battles behind ``counts``.

    Returns
    -------
    BootstrapResult

    Warns
    -----
    DegenerateRoundsWarning
        When some plain rounds had no finite MLE (small data) and were fit with a weak ridge.
    """
    if n_rounds < 1:
        raise ValueError("n_rounds must be at least 1")
    if fit is None:
        fit = fit_bt(counts, spec=spec or BTSpec(), anchor=anchor, scale=scale, base=base, initial=initial)
    if anchor is None:
        anchor = fit.anchor
    sizes = [min(block_size, n_rounds - start) for start in range(0, n_rounds, block_size)]
    seeds = np.random.SeedSequence(random_state).spawn(len(sizes))
    jobs = n_jobs if n_jobs is not None else min(2, os.cpu_count() or 1)
    block: Callable[[tuple[np.random.SeedSequence, int]], tuple[FloatArray, FloatArray, int]]
    if clusters is not None and clusters.members.shape[1] != counts.n_cells:
        raise ValueError("clusters were made for other counts (cell numbers differ)")
    if fit.spec.is_plain:
        cats = _Categories(counts, fit)
        fixed = fit.hessian / math.log(fit.base) ** 2
        no_extras = np.zeros((0, 0))
        plain_clusters = None
        if clusters is not None:
            to_cat = (clusters.resampled @ cats.cell_to_cat).tocsr()
            plain_clusters = (clusters, (to_cat @ cats.to_n).tocsr(), (to_cat @ cats.to_s).tocsr())

        def block(job: tuple[np.random.SeedSequence, int]) -> tuple[FloatArray, FloatArray, int]:
            theta, bad = _run_block(job[0], job[1], cats, fit, fixed, tol, plain_clusters)
            return theta / math.log(fit.base), no_extras, bad

    else:
        cell_clusters = None
        if clusters is not None:
            kept = np.ones(counts.n_cells, dtype=bool)
            if fit.spec.both_bad == "exclude":
                kept = counts.outcome != Outcome.BOTHBAD
            cell_clusters = (clusters, clusters.resampled[:, np.flatnonzero(kept)].tocsr())

        def block(job: tuple[np.random.SeedSequence, int]) -> tuple[FloatArray, FloatArray, int]:
            coef, extras = _run_cells_block(job[0], job[1], fit, cell_clusters)
            return coef, extras, 0

    coefs: list[FloatArray] = []
    extra_rows: list[FloatArray] = []
    n_degenerate = 0
    done = 0
    # The blocks are the parallelism: BLAS threads on top (small M x M products) only contend for the
    # same cores and spin; limiting them to one made refits 2-3x cheaper on the 2-core target.
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for coef, extras, bad in pool.map(block, zip(seeds, sizes, strict=True)):
            coefs.append(coef)
            extra_rows.append(extras)
            n_degenerate += bad
            done += coef.shape[0]
            if progress is not None:
                progress(done, n_rounds)
    if n_degenerate:
        warnings.warn(
            f"{n_degenerate} of {n_rounds} bootstrap rounds had no finite maximum-likelihood estimate "
            f"(a model won or lost every resampled battle); they were fit with ridge {DEGENERATE_RIDGE}",
            DegenerateRoundsWarning,
            stacklevel=2,
        )
    coef = np.concatenate(coefs)
    ratings = _anchor_rows(fit.scale * coef + fit.initial, fit.models, anchor)
    low, high = percentile_intervals(ratings, level)
    ranks = ranks_of(ratings)
    r_low, r_high = rank_intervals(ranks, level)
    extra: dict[str, tuple[float, float, float]] = {}
    if fit.extra_terms:
        e_low, e_high = percentile_intervals(np.concatenate(extra_rows), level)
        values = fit.extras_of(fit.x)
        for k, name in enumerate(values):
            extra[name] = (values[name], float(e_low[k]), float(e_high[k]))
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
        extra=extra,
    )
