"""Which pair to ask about next, from the model: expected shrinkage of the uncertainty that matters.

A plain Bradley-Terry vote on the pair ``(i, j)`` adds ``w d d^T`` to the Fisher information ``H``, with
``d = e_i - e_j`` and ``w = p (1 - p)`` at the current fit. For a covariance ``C = H^-1`` and a criterion
``trace(A C)`` (``A`` positive semi-definite), the Sherman-Morrison formula gives the criterion's drop after
that vote in closed form::

    gain(i, j) = w (d^T C A C d) / (1 + w d^T C d)

so every pair's gain costs O(1) once ``G = C A C`` is known (one O(M^3) step per refresh). Criteria:

``aopt``       ``A = I``: the A-optimal design, the sum of the rating variances.
``width``      ``A = diag(1 / sd)``: the first-order drop of the sum of standard deviations, i.e. of the
               mean interval width itself (models whose interval is wide count more).
``neighbour``  ``A = L^T L``, ``L`` the differences of neighbours in the current ranking: the variance of
               the gaps that decide the order.
``blend``      the width and neighbour matrices, each divided by its current ``trace(A C)``: the sum of
               the relative drops of both, so a vote is worth most when it narrows the intervals and the
               neighbour gaps together (``width`` alone starves the close neighbours that decide the
               ranking; ``neighbour`` alone neglects the models far from any neighbour).

The policy samples pairs in proportion to ``gain ** power`` mixed with a uniform floor, so every pair keeps
a positive probability and the logged propensity stays valid for inverse-propensity weighting (``--ipw``).
The published fit does not weight: pairs chosen from earlier votes leave the likelihood of the votes
unchanged, so the unweighted fit is unbiased when the model holds and more precise; weighting guards
against a misspecified model at a cost in precision (docs/pairing-weights.md). Numpy only: the web
workers import this at start-up. Strengths are in natural-log units throughout.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "CRITERIA",
    "DEFAULT_FLOOR",
    "Criterion",
    "PairDesign",
    "adjacent_votes_needed",
    "board_votes_needed",
    "fisher_information",
    "design_probabilities",
    "greedy_allocation",
    "optimal_shares",
    "pair_gains",
    "pair_probabilities",
    "rating_covariance",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

Criterion = Literal["aopt", "width", "neighbour", "blend"]
CRITERIA: tuple[Criterion, ...] = ("aopt", "width", "neighbour", "blend")

#: Prior precision on each strength (natural-log units): a standard deviation of about 1700 Elo, enough
#: to keep the information invertible for a model nobody has voted on yet and negligible otherwise.
PRIOR_PRECISION = 0.01
#: The shipped policy's uniform floor: the share of votes drawn uniformly over all pairs, so every pair
#: keeps a known positive probability and every model at least this share of its uniform exposure. Each
#: floor vote on two well-measured models is all but lost when new ones arrive (the best design on
#: arrival gives such pairs nothing), so the floor costs about its own share times the share of such
#: pairs; ``scripts/bench_pairing.py`` (40 seeds): 0.1 saves 49.3% of uniform's votes on arrival, 0.05
#: saves 50.5%, against a bound of 52%. On a board with no newcomers 0.1 is the safer of the two on tau
#: and separation, though not significantly (docs/benchmarks-history.md, section 6).
DEFAULT_FLOOR = 0.05
#: Rating points per natural-log unit on the Elo scale (400 / ln 10).
ELO_PER_NAT = 400.0 / math.log(10.0)


def _expit(x: FloatArray) -> FloatArray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)), dtype=np.float64)


@dataclass(frozen=True)
class PairDesign:
    """All unordered pairs of ``n_models`` models, as index arrays ``lo < hi``."""

    n_models: int
    lo: IntArray
    hi: IntArray

    @classmethod
    def of(cls, n_models: int) -> PairDesign:
        if n_models < 2:
            raise ValueError("a design needs at least two models")
        lo, hi = np.triu_indices(n_models, k=1)
        return cls(n_models, lo.astype(np.int64), hi.astype(np.int64))

    def __len__(self) -> int:
        return int(self.lo.shape[0])

    def vote_information(self, theta: FloatArray) -> FloatArray:
        """Information ``w = p (1 - p)`` one vote on each pair carries at strengths ``theta``."""
        p = _expit(theta[self.lo] - theta[self.hi])
        return np.asarray(p * (1.0 - p), dtype=np.float64)


def fisher_information(design: PairDesign, theta: FloatArray, votes: FloatArray) -> FloatArray:
    """``sum_pairs votes * w * d d^T``: the plain-BT Fisher information of ``votes`` per pair."""
    m = design.n_models
    w = np.asarray(votes, dtype=np.float64) * design.vote_information(theta)
    h = np.zeros((m, m))
    np.add.at(h, (design.lo, design.hi), -w)
    h = h + h.T
    h[np.diag_indices(m)] = -h.sum(axis=1)
    return h


def rating_covariance(information: FloatArray, *, prior: float = PRIOR_PRECISION) -> FloatArray:
    """Covariance of the centred strengths: ``P (H + prior I)^-1 P`` with ``P`` the centring projector."""
    m = information.shape[0]
    cov = np.linalg.inv(information + prior * np.eye(m))
    centred = cov - cov.mean(axis=0, keepdims=True)
    return np.asarray(centred - centred.mean(axis=1, keepdims=True), dtype=np.float64)


def _quadratic(g: FloatArray, design: PairDesign) -> FloatArray:
    """``d^T G d`` for every pair: ``G_ii + G_jj - 2 G_ij``."""
    diag = np.diag(g)
    return np.asarray(diag[design.lo] + diag[design.hi] - 2.0 * g[design.lo, design.hi], dtype=np.float64)


def _positive_trace(a: FloatArray, cov: FloatArray) -> float:
    """``trace(A C)``, floored away from zero so a degenerate board divides safely."""
    return max(float(np.sum(a * cov)), 1e-12)


def _criterion_matrix(criterion: Criterion, theta: FloatArray, cov: FloatArray) -> FloatArray:
    m = cov.shape[0]
    if criterion == "aopt":
        return np.eye(m)
    if criterion == "width":
        return np.diag(1.0 / np.sqrt(np.maximum(np.diag(cov), 1e-12)))
    if criterion == "neighbour":
        order = np.argsort(-theta, kind="stable")
        lmat = np.zeros((m - 1, m))
        lmat[np.arange(m - 1), order[:-1]] = 1.0
        lmat[np.arange(m - 1), order[1:]] = -1.0
        return lmat.T @ lmat
    if criterion == "blend":
        width = _criterion_matrix("width", theta, cov)
        neighbour = _criterion_matrix("neighbour", theta, cov)
        return width / _positive_trace(width, cov) + neighbour / _positive_trace(neighbour, cov)
    raise ValueError(f"unknown criterion {criterion!r}; choose from {', '.join(CRITERIA)}")


def pair_gains(design: PairDesign, theta: FloatArray, cov: FloatArray, *, criterion: Criterion) -> FloatArray:
    """Expected drop of the criterion's ``trace(A C)`` after one more vote on each pair."""
    a = _criterion_matrix(criterion, theta, cov)
    g = cov @ a @ cov
    w = design.vote_information(theta)
    gains = w * _quadratic(g, design) / (1.0 + w * _quadratic(cov, design))
    return np.asarray(np.maximum(gains, 0.0), dtype=np.float64)


def pair_probabilities(gains: FloatArray, *, floor: float = 0.1, power: float = 1.0) -> FloatArray:
    """Sampling probability of each pair: ``(1 - floor) gain^power / sum + floor / n_pairs``.

    ``floor`` is the uniform exploration share (``0 < floor <= 1``), so every pair has at least
    ``floor / n_pairs``; with no positive gain the draw is uniform.
    """
    if not 0.0 < floor <= 1.0:
        raise ValueError("floor must be in (0, 1]")
    n = gains.shape[0]
    uniform = np.full(n, 1.0 / n)
    scores = np.maximum(np.asarray(gains, dtype=np.float64), 0.0) ** power
    total = scores.sum()
    if not np.isfinite(total) or total <= 0.0:
        return uniform
    return np.asarray((1.0 - floor) * scores / total + floor * uniform, dtype=np.float64)


def greedy_allocation(
    design: PairDesign, theta: FloatArray, cov: FloatArray, n_votes: int, *, criterion: Criterion
) -> FloatArray:
    """Votes per pair of a batch of ``n_votes`` chosen one at a time, each on the pair of largest gain,
    the covariance updated after each by Sherman-Morrison (the criterion's weights held for the batch).

    Sampling a batch from these shares (with a floor) approximates the optimal design of the batch while
    keeping a known probability per pair; sampling in proportion to the one-vote gains alone stays close
    to uniform on a board where every pair is informative.
    """
    a = _criterion_matrix(criterion, theta, cov)
    c = cov.copy()
    g = c @ a @ c
    w = design.vote_information(theta)
    lo, hi = design.lo, design.hi
    counts = np.zeros(len(design))
    for _ in range(n_votes):
        q = np.diag(c)[lo] + np.diag(c)[hi] - 2.0 * c[lo, hi]
        gains = w * (np.diag(g)[lo] + np.diag(g)[hi] - 2.0 * g[lo, hi]) / (1.0 + w * q)
        k = int(np.argmax(gains))
        counts[k] += 1.0
        i, j = lo[k], hi[k]
        u = c[:, i] - c[:, j]
        v = g[:, i] - g[:, j]
        factor = w[k] / (1.0 + w[k] * q[k])
        uau = float(u @ a @ u)
        c -= factor * np.outer(u, u)
        g -= factor * (np.outer(u, v) + np.outer(v, u)) - factor**2 * uau * np.outer(u, u)
    return counts


def optimal_shares(
    design: PairDesign,
    theta: FloatArray,
    *,
    iterations: int = 300,
    scale: float = 1e6,
    information: FloatArray | None = None,
) -> FloatArray:
    """Share of ``scale`` votes per pair that minimises the sum of rating standard deviations at strengths
    ``theta`` after those votes are added to ``information`` (none by default): the continuous optimum of
    the ``width`` criterion, by multiplicative updates.

    A benchmark bound, not a policy: it needs the true strengths. Each standard deviation is convex in
    the shares (``1 / e^T H^-1 e`` is concave in ``H`` and ``t -> t^-1/2`` is convex and falling), ``H``
    is affine in them, so the mean is convex and its minimum on the simplex is where every used pair
    has the same derivative ``w d^T C A C d``; ``p <- p * sqrt(derivative / mean)`` moves towards that
    point while the shares stay on the simplex. With no ``information``, ``scale`` votes make the weak
    prior negligible, as it is after the first few thousand.
    """
    prior = np.zeros((design.n_models, design.n_models)) if information is None else information
    w = design.vote_information(theta)
    shares = np.full(len(design), 1.0 / len(design))
    for _ in range(iterations):
        cov = rating_covariance(prior + fisher_information(design, theta, scale * shares))
        a = _criterion_matrix("width", theta, cov)
        slopes = np.maximum(w * _quadratic(cov @ a @ cov, design), 0.0)
        mean = float(shares @ slopes)
        if not np.isfinite(mean) or mean <= 0.0:
            break
        shares = shares * np.sqrt(slopes / mean)
        shares /= shares.sum()
    return shares


def design_probabilities(
    theta: FloatArray,
    votes: FloatArray,
    *,
    criterion: Criterion = "width",
    floor: float = DEFAULT_FLOOR,
    batch: int = 200,
) -> FloatArray:
    """The shipped policy: per pair of ``PairDesign.of(len(theta))``, the probability of the next vote.

    The next ``batch`` votes are allocated greedily (:func:`greedy_allocation`) from the information of
    ``votes`` per pair at strengths ``theta``, and mixed with the uniform ``floor``.
    """
    design = PairDesign.of(len(theta))
    cov = rating_covariance(fisher_information(design, theta, votes))
    counts = greedy_allocation(design, theta, cov, batch, criterion=criterion)
    return pair_probabilities(counts, floor=floor)


def _bisect_votes(check: Callable[[int], float], limit: int) -> int | None:
    """Smallest ``n`` in ``[0, limit]`` with ``check(n) <= 0`` (``check`` falling), or None if beyond."""
    if check(0) <= 0.0:
        return 0
    if check(limit) > 0.0:
        return None
    lo, hi = 0, limit
    while hi - lo > max(1, lo // 100):
        mid = (lo + hi) // 2
        if check(mid) <= 0.0:
            hi = mid
        else:
            lo = mid
    return hi


def board_votes_needed(
    design: PairDesign,
    theta: FloatArray,
    information: FloatArray,
    probabilities: FloatArray,
    *,
    half_width: float,
    z: float = 1.959963984540054,
    limit: int = 10_000_000,
) -> int | None:
    """More votes (drawn with ``probabilities``) until the mean ``z``-interval half-width, in natural-log
    units, is at most ``half_width``; None when more than ``limit`` would be needed."""
    per_vote = fisher_information(design, theta, probabilities)

    def shortfall(n: int) -> float:
        sd = np.sqrt(np.maximum(np.diag(rating_covariance(information + n * per_vote)), 0.0))
        return float(z * sd.mean() - half_width)

    return _bisect_votes(shortfall, limit)


def adjacent_votes_needed(
    design: PairDesign,
    theta: FloatArray,
    information: FloatArray,
    probabilities: FloatArray,
    *,
    z: float = 1.959963984540054,
    limit: int = 10_000_000,
) -> list[int | None]:
    """For each neighbour pair in the ranking (best first), more votes at ``probabilities`` until the
    fitted gap is ``z`` standard errors wide, assuming it stays as fitted; None beyond ``limit`` or for
    a gap of zero."""
    order = np.argsort(-theta, kind="stable")
    per_vote = fisher_information(design, theta, probabilities)
    # The pairs' bisections start alike (0, ``limit``, its half, ...): each vote number's covariance is
    # computed once and shared.
    covariances: dict[int, FloatArray] = {}

    def covariance(n: int) -> FloatArray:
        if n not in covariances:
            covariances[n] = rating_covariance(information + n * per_vote)
        return covariances[n]

    out: list[int | None] = []
    for upper, lower in zip(order[:-1], order[1:], strict=True):
        gap = float(theta[upper] - theta[lower])

        def shortfall(n: int, upper: int = int(upper), lower: int = int(lower), gap: float = gap) -> float:
            cov = covariance(n)
            var = cov[upper, upper] + cov[lower, lower] - 2.0 * cov[upper, lower]
            return float(z * math.sqrt(max(var, 0.0)) - gap)

        out.append(None if gap <= 0.0 else _bisect_votes(shortfall, limit))
    return out
