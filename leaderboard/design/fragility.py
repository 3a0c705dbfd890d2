"""How fragile a board is: the fewest votes whose removal changes #1, or swaps two neighbours.

An interval says how much a rating would move if the votes were drawn again; it does not say how few
votes hold an order in place. Removing a handful of well-chosen votes can change a public #1 even when
the intervals look separated (Broderick, Giordano and Meager's "approximate maximum influence
perturbation"). For a pair ``i`` above ``j`` the first-order effect of removing one vote ``v`` on
the gap is ``-(e_i - e_j)^T C H^{-1} g_v``, with ``g_v`` the vote's (weighted) score, ``H`` the
Hessian of the negative log-likelihood at the fit and ``C`` the map to ratings. Votes of one cell share
the same effect, so candidates are whole cells ranked by it: the greedy set removes the most helpful
votes first until the linear prediction closes the gap. That prediction is only a guide: every answer is
verified by refitting without the chosen votes (re-linearising at the refit when the gap is not yet
closed), then shortened vote by vote while the refit still shows the swap. The numbers are therefore
achievable (removing them does swap the pair) and upper bounds on the true minimum; the tests check them
against exhaustive search on small boards.

Everything the pairs share is computed once per board (:class:`_Board`): the base fit's vote scores and
pseudo-inverse Hessian (so a pair's first candidate ranking and its shortening cost one product, not one
eigen-decomposition each) and, for plain fits, which pair statistic every cell adds to (so a refit after
removing votes is one ``bincount``, not a sort of every cell), each cell's score as one number (a vote
moves only its two models) and the inverse of the board's Hessian, which the refits iterate with
instead of solving a new system per Newton step: removing a few votes of many barely changes the
Hessian, so the iterations reach the same optimum (to the solver's tolerance, far inside the swap
test's margin). A 100-model board's certificate: 0.93 s before these two, 0.45 s after, the same
answers. The many small refits run with one BLAS thread: on a busy machine a multi-threaded 100 x 100
solve waits on its own threads far longer than it computes.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from leaderboard.bt.cells import Layout, Objective, make_cells, maximise
from leaderboard.bt.fit import BTFit, fit_bt
from leaderboard.bt.intervals import plain_cell_scores, vote_scores
from leaderboard.bt.newton import PairSystem, solve_bt_batch
from leaderboard.bt.spec import BTSpec, UnboundedRatingWarning
from leaderboard.data import PairCounts, PairStats, collapse_pairs, outcome_class

__all__ = ["Fragility", "fragility", "remove_votes"]

FloatArray = npt.NDArray[np.float64]

#: A swap must put the lower model ahead by more than this (log-strength units): an exact tie is no swap.
_TIE_NATS = 1e-9
#: Refits allowed per pair before giving up (the answer is then "more than the votes tried").
_MAX_REFITS = 12


@dataclass(frozen=True)
class Fragility:
    """The certificate: per adjacent pair and for #1, the fewest votes found whose removal swaps them.

    ``None`` means no swap was found within ``max_share`` of the votes. ``pairs`` lists
    ``(upper, lower, votes)`` in board order; ``top`` is ``(votes, challenger)`` for #1.
    """

    top: tuple[int | None, str | None]
    pairs: tuple[tuple[str, str, int | None], ...]
    max_votes: int

    def describe(self) -> dict[str, Any]:
        return {
            "top_change_votes": self.top[0],
            "top_challenger": self.top[1],
            "adjacent_swap_votes": [{"upper": u, "lower": lo, "votes": k} for u, lo, k in self.pairs],
            "search_limit_votes": self.max_votes,
            "method": "influence-function candidates from the Hessian, verified by refits",
        }


def remove_votes(counts: PairCounts, removed: FloatArray) -> PairCounts:
    """``counts`` without ``removed`` votes per cell (each removed vote takes its cell's mean weight)."""
    votes = counts.vote_counts
    if np.any(removed < 0) or np.any(removed > votes):
        raise ValueError("cannot remove more votes than a cell holds")
    left = votes - removed
    if counts.votes is None:
        return replace(counts, count=left)
    per_vote = np.divide(counts.count, votes, out=np.zeros_like(votes), where=votes > 0)
    squares = None if counts.weight_sq is None else counts.weight_sq - removed * per_vote**2
    return replace(counts, count=per_vote * left, votes=left, weight_sq=squares)


class _Board:
    """What every pair's search on one board shares: the base fit's vote scores and pseudo-inverse
    Hessian, and (plain fits) the pair statistic each cell adds to, as :func:`collapse_pairs` groups them,
    and the inverse of the Hessian the refits iterate with."""

    def __init__(self, counts: PairCounts, fit: BTFit) -> None:
        self.counts = counts
        self.fit = fit
        self.h_inv = np.asarray(np.linalg.pinv(fit.hessian, hermitian=True), dtype=np.float64)
        self.scores = _Scores(fit, counts)
        self.slots: npt.NDArray[np.int64] | None = None
        self.fixed_inverse: FloatArray | None = None
        if fit.spec.is_plain:
            n = counts.n_models
            lo, hi, cls = outcome_class(counts)
            pairs, inverse = np.unique(lo * n + hi, return_inverse=True)
            self.slots = inverse * 3 + cls
            self.n_pairs = len(pairs)
            self.lo = (pairs // n).astype(np.int64) if n else pairs.astype(np.int64)
            self.hi = (pairs % n).astype(np.int64) if n else pairs.astype(np.int64)
            self.system = PairSystem(self.lo, self.hi, n)
            # A refit removes a few votes of many: its Hessian is the board's to a few parts in a
            # thousand, so Newton's iterations with the board's (an inverse made once, a product per
            # iteration) reach the same optimum as full steps, at a tenth of the cost each.
            ln_base = math.log(fit.base)
            centre = np.full((n, n), 1.0 / n) if n else np.zeros((0, 0))
            try:
                self.fixed_inverse = np.asarray(np.linalg.inv(fit.hessian / ln_base**2 + centre), np.float64)
            except np.linalg.LinAlgError:  # a board without a finite optimum: refits take full steps
                self.fixed_inverse = None

    def collapse(self, counts: PairCounts) -> PairStats:
        """:func:`collapse_pairs` of ``counts`` (this board's cells, other vote numbers), without the sort."""
        if self.slots is None:
            return collapse_pairs(counts)
        sums = np.bincount(self.slots, weights=counts.count, minlength=3 * self.n_pairs).reshape(
            self.n_pairs, 3
        )
        return PairStats(
            n_models=counts.n_models,
            lo=self.lo,
            hi=self.hi,
            wins_lo=sums[:, 0].astype(np.float64),
            wins_hi=sums[:, 1].astype(np.float64),
            ties=sums[:, 2].astype(np.float64),
        )

    def gap_effects(self, fit: BTFit, counts: PairCounts, upper: int, lower: int) -> FloatArray:
        """:func:`_gap_effects`, from the shared scores and inverse when ``fit`` is the board's own."""
        if fit is self.fit and counts is self.counts:
            return self.scores.effects(self.h_inv, fit, upper, lower)
        return _gap_effects(fit, counts, upper, lower)


class _Scores:
    """Each cell's per-vote score w.r.t. ``fit.x``, and :meth:`effects` of removing one vote of each cell.

    A plain fit's score of a cell is one number (:func:`plain_cell_scores`), so an effect costs one pass
    over the cells instead of a product with a cells-by-models matrix that is zero but for two columns
    per row (a quarter of a 100-model certificate's time); other fits keep the matrix."""

    def __init__(self, fit: BTFit, counts: PairCounts) -> None:
        self.n_cells = counts.n_cells
        self.plain: FloatArray | None = None
        if fit.spec.is_plain and fit.coef_map is None:
            self.plain = plain_cell_scores(fit, counts)
            self.a = counts.model_a.astype(np.int64)
            self.b = counts.model_b.astype(np.int64)
            return
        self.matrix, columns = vote_scores(fit, counts)
        self.columns = columns.astype(np.int64)

    def effects(self, h_inv: FloatArray, fit: BTFit, upper: int, lower: int) -> FloatArray:
        """Predicted change of ``rating[upper] - rating[lower]`` from removing one vote of each cell."""
        direction = np.zeros(len(fit.models))
        direction[upper], direction[lower] = 1.0, -1.0
        lever = direction if fit.coef_map is None else direction @ fit.coef_map
        along = h_inv @ lever
        if self.plain is not None:
            out: FloatArray = -(self.plain * (along[self.a] - along[self.b])) * fit.scale
            return out
        per_cell = -(self.matrix @ along) * fit.scale
        full = np.zeros(self.n_cells)
        full[self.columns] = per_cell
        return full


def _gap_effects(fit: BTFit, counts: PairCounts, upper: int, lower: int) -> FloatArray:
    """Predicted change of ``rating[upper] - rating[lower]`` from removing one vote of each cell."""
    h_inv = np.asarray(np.linalg.pinv(fit.hessian, hermitian=True), dtype=np.float64)
    return _Scores(fit, counts).effects(h_inv, fit, upper, lower)


def _ratings_after(counts: PairCounts, fit: BTFit, board: _Board | None = None) -> FloatArray | None:
    """Log-strengths refit on ``counts`` warm-started at ``fit`` (None when the refit fails)."""
    if fit.spec.is_plain:
        stats = collapse_pairs(counts) if board is None else board.collapse(counts)
        system = None if board is None or board.slots is None else board.system
        theta, ok, _ = solve_bt_batch(
            stats.lo,
            stats.hi,
            stats.n[None, :],
            stats.score_lo[None, :],
            n_models=len(fit.models),
            theta0=fit.theta,
            system=system,
            # the board's Hessian is the refit's start's own only when the refit starts at the board
            fixed_inverse=board.fixed_inverse
            if system is not None and board is not None and fit is board.fit
            else None,
        )
        if ok[0]:
            out: FloatArray = theta[0]
            return out
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnboundedRatingWarning)
            try:
                return fit_bt(counts, spec=fit.spec).theta  # the board would show the ridge fit
            except (ValueError, RuntimeError):
                return None
    cells = make_cells(counts, fit.spec)
    try:
        objective = Objective(
            cells, fit.spec, Layout.of(fit.spec, cells.n_models), nat_per_point=math.log(fit.base) / fit.scale
        )
    except ValueError:
        return None
    x, _, message = maximise(objective, fit.x, tol=1e-8, max_iter=200)
    if message:
        return None
    coef: FloatArray = fit.coef_of(x)
    return coef


def _swapped(counts: PairCounts, fit: BTFit, upper: int, lower: int, board: _Board | None = None) -> bool:
    strength = _ratings_after(counts, fit, board)
    return strength is not None and bool(strength[lower] > strength[upper] + _TIE_NATS)


def _refit(counts: PairCounts, spec: BTSpec) -> BTFit | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnboundedRatingWarning)
        try:
            return fit_bt(counts, spec=spec)
        except (ValueError, RuntimeError):
            return None


#: Cells ranked at first by :func:`_greedy` (a partial sort); all of them when these do not close the gap.
_FIRST_CELLS = 64


def _greedy(effects: FloatArray, available: FloatArray, need: float) -> FloatArray:
    """Votes to remove per cell, most gap-closing first, until the predicted change reaches ``-need``.

    The order is the stable sort of ``effects`` (ties by cell number). Usually a few cells close the gap,
    so only the ``_FIRST_CELLS`` smallest are sorted first: every cell at or below the partition value,
    in cell order, sorted stably, is exactly the head of the full stable sort.
    """
    if len(effects) > _FIRST_CELLS:
        bound = np.partition(effects, _FIRST_CELLS - 1)[_FIRST_CELLS - 1]
        head = np.flatnonzero(effects <= bound)
        removed = _take(effects, available, need, head[np.argsort(effects[head], kind="stable")])
        if removed is not None:
            return removed
    full = _take(effects, available, need, np.argsort(effects, kind="stable"), complete=True)
    if full is None:
        raise RuntimeError("the full order always ends the greedy walk")
    return full


def _take(
    effects: FloatArray,
    available: FloatArray,
    need: float,
    order: npt.NDArray[np.intp],
    *,
    complete: bool = False,
) -> FloatArray | None:
    """The greedy walk along ``order``; None when ``order`` (a head of the full order, not ``complete``)
    ran out before the walk stopped."""
    removed = np.zeros_like(available)
    closed = 0.0
    for c in order:
        if effects[c] >= 0 or closed <= -need:
            return removed
        take = min(available[c], np.ceil((-need - closed) / effects[c]))
        removed[c] = max(take, 0.0)
        closed += removed[c] * effects[c]
    return removed if complete else None


def swap_votes(
    counts: PairCounts,
    fit: BTFit,
    upper: int,
    lower: int,
    *,
    max_votes: int,
    board: _Board | None = None,
) -> int | None:
    """Fewest votes found whose removal puts ``lower`` above ``upper`` (verified by a refit), or None.

    ``board`` (made once by :func:`fragility` for all its pairs) only saves work: the answer is the same.
    """
    spec = fit.spec
    if board is None or board.fit is not fit or board.counts is not counts:
        board = _Board(counts, fit)
    total = np.zeros(counts.n_cells)
    current, current_fit = counts, fit
    base_effects = board.gap_effects(fit, counts, upper, lower)
    for _ in range(_MAX_REFITS):
        gap = float(current_fit.rating[upper] - current_fit.rating[lower])
        effects = (
            base_effects if current_fit is fit else board.gap_effects(current_fit, current, upper, lower)
        )
        step = _greedy(effects, current.vote_counts, gap * 1.0000001 + 1e-9)
        if step.sum() == 0:
            return None
        total = total + step
        if total.sum() > max_votes:
            return None
        current = remove_votes(counts, total)
        if _swapped(current, fit, upper, lower, board):
            return _shorten(board, base_effects, total, upper, lower)
        refit = _refit(current, spec)
        if refit is None:
            return None
        current_fit = refit
    return None


def _shorten(board: _Board, effects: FloatArray, removed: FloatArray, upper: int, lower: int) -> int:
    """Put the removed votes back, least helpful first, as many as the refit allows (binary search on
    how many; the count returned is one whose removal a refit showed to swap the pair).

    ``effects`` are the board fit's (:meth:`_Board.gap_effects`). The cells with votes removed, in cell
    order and sorted stably, are in the order the stable sort of every cell gives them."""
    counts, fit = board.counts, board.fit
    taken = removed.astype(np.int64)
    cells = np.flatnonzero(taken)
    cells = cells[np.argsort(-effects[cells], kind="stable")]
    queue = np.repeat(cells, taken[cells])  # least helpful vote first
    lo, hi = 0, len(queue) - 1  # putting back ``lo`` votes is known to keep the swap
    while lo < hi:
        mid = (lo + hi + 1) // 2
        trial = removed - np.bincount(queue[:mid], minlength=len(removed))
        if _swapped(remove_votes(counts, trial), fit, upper, lower, board):
            lo = mid
        else:
            hi = mid - 1
    return int(round(removed.sum())) - lo


def fragility(
    counts: PairCounts,
    *,
    fit: BTFit | None = None,
    spec: BTSpec | None = None,
    max_share: float = 0.05,
    challengers: int = 3,
) -> Fragility:
    """The fragility certificate of a board.

    Parameters
    ----------
    counts : PairCounts
        The votes of the board (whole vote numbers per cell).
    fit : BTFit, optional
        The board's point fit (made with ``spec`` when not given).
    spec : BTSpec, optional
    max_share : float
        Search no further than this share of the votes (the answer is then None: robust beyond it).
    challengers : int
        For #1, the models tried as the new #1 (the nearest ``challengers`` below it).

    Returns
    -------
    Fragility
    """
    if fit is None:
        fit = _refit(counts, spec or BTSpec())
        if fit is None:
            raise ValueError("the board cannot be fitted")
    if not np.allclose(counts.vote_counts, np.round(counts.vote_counts)):
        raise ValueError("fragility needs whole vote numbers per cell")
    max_votes = max(10, int(max_share * float(counts.vote_counts.sum())))
    with threadpool_limits(limits=1, user_api="blas"):
        return _certify(counts, fit, max_votes, challengers)


def _certify(counts: PairCounts, fit: BTFit, max_votes: int, challengers: int) -> Fragility:
    board = _Board(counts, fit)
    order = np.argsort(-fit.rating, kind="stable")
    pairs: list[tuple[str, str, int | None]] = []
    found: dict[tuple[int, int], int | None] = {}
    for a, b in zip(order[:-1], order[1:], strict=True):
        k = swap_votes(counts, fit, int(a), int(b), max_votes=max_votes, board=board)
        found[(int(a), int(b))] = k
        pairs.append((fit.models[a], fit.models[b], k))
    best: tuple[int | None, str | None] = (None, None)
    top = int(order[0])
    for challenger in order[1 : 1 + challengers]:
        key = (top, int(challenger))
        if key not in found:
            found[key] = swap_votes(counts, fit, top, int(challenger), max_votes=max_votes, board=board)
        k = found[key]
        if k is not None and (best[0] is None or k < best[0]):
            best = (k, fit.models[challenger])
    return Fragility(top=best, pairs=tuple(pairs), max_votes=max_votes)
