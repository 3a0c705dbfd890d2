"""Tail tests of a voter's summed scores when honest voters differ from the crowd by a personal effect.

An honest voter is not the crowd: they have their own taste for each model and their own pull towards one
side of the screen. A test whose null hypothesis is "votes like the crowd's fitted model" therefore flags
every honest voter with enough votes, since with a few hundred votes any real taste is significant. The
null used here is "the crowd plus a personal effect drawn from the population": each cell (an annotator,
or an annotator and a model) counts yes/no events ``y_i`` with

    P(y_i = 1 | b) = c_i * sigmoid(u_i + b),   b ~ Normal(0, sd**2),

where ``u_i`` is the crowd's logit, ``c_i`` a cap (1, or the chance the vote is decisive when ``y_i`` is a
win: a taste moves wins and losses, not ties) and ``b`` the cell's personal effect, shared by its votes.

The tail probability of the observed sum integrates the personal effect out:
``P(S >= s) = E_b[P(S >= s | b)]``, with ``S | b`` approximated by a normal (with a continuity correction
for plain counts; a sum may also weigh its events) and ``b`` integrated on a fixed grid. An honest voter
with a strong but ordinary taste has a large ``S`` and a likely ``b`` to explain it; a voter whose sum
needs a personal effect of ten population standard deviations (every vote for one model, every vote on
the left) has none.

This is the marginal-likelihood comparison of "crowd + taste shrunk towards 0 by the population's sd"
with "crowd + a free effect", done as a tail probability of the summed score rather than through a
chi-squared approximation of the likelihood ratio, which does not hold when the null itself has a random
effect.

The population sd is estimated from the cells: at ``b = 0`` a cell's squared excess has expectation
``V + D^2 sd^2`` (``V`` the binomial variance, ``D`` the slope of the mean in ``b``), so the squared excess
over ``V + D^2 sd^2`` is about chi-squared(1); the estimate is the sd at which the median cell's ratio is
chi-squared(1)'s median. A mean of squares would be dragged up by every manipulator (and then hide them);
the median moves little while they are a minority.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import special, stats

__all__ = ["population_sd", "random_effect_tails", "robust_offset"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Grid of the personal effect in population standard deviations; +-9 sd reaches tail weights ~1e-19.
_GRID = np.linspace(-9.0, 9.0, 73)
_GRID_WEIGHT = np.exp(-0.5 * _GRID**2)
_GRID_WEIGHT /= _GRID_WEIGHT.sum()
#: Smallest p-value reported (keeps logs finite).
_MIN_P = 1e-300


def _moments(
    u: FloatArray, cap: FloatArray, shift: float, w: FloatArray | None = None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per vote: mean, variance of ``w y`` and the derivative of the mean in the effect, at ``b = shift``."""
    s = special.expit(u + shift)
    p = cap * s
    if w is None:
        return p, p * (1.0 - p), cap * s * (1.0 - s)
    return w * p, w**2 * p * (1.0 - p), w * cap * s * (1.0 - s)


def population_sd(
    cell: IntArray,
    n_cells: int,
    u: FloatArray,
    cap: FloatArray,
    y: FloatArray,
    *,
    min_votes: int = 10,
    weight: FloatArray | None = None,
) -> float:
    """Estimate (logits) of the sd of the personal effect, from the cells with ``min_votes`` votes."""
    mean, var, slope = _moments(u, cap, 0.0, weight)
    count = np.bincount(cell, minlength=n_cells)
    wy = y if weight is None else weight * y
    excess = np.bincount(cell, weights=wy - mean, minlength=n_cells).astype(np.float64)
    v = np.bincount(cell, weights=var, minlength=n_cells).astype(np.float64)
    d = np.bincount(cell, weights=slope, minlength=n_cells).astype(np.float64)
    use = (count >= min_votes) & (v > 0)
    if not use.any():
        return 0.0
    return float(np.sqrt(_median_sd2(excess[use] ** 2, v[use], d[use])))


def robust_offset(
    cell: IntArray, n_cells: int, u: FloatArray, y: FloatArray, *, min_votes: int = 10
) -> float:
    """The shift ``c`` of the logits ``u`` of yes/no scores at which the median cell has no excess.

    The crowd-wide rate a test measures against (the left side's advantage, the tie rate) must come from
    the typical annotator: a pooled rate moves with every always-left bot, and then every honest voter
    looks biased the other way. Cells with fewer than ``min_votes`` scores do not vote on the median
    (all cells do when none has that many). Bisection on ``c``; the median excess falls as ``c`` rises.
    """
    count = np.bincount(cell, minlength=n_cells)
    use = count >= min_votes
    if not use.any():
        use = count > 0
    if not use.any():
        return 0.0
    total = np.bincount(cell, weights=y, minlength=n_cells)[use]

    def median_excess(c: float) -> float:
        p = special.expit(u + c)
        mean = np.bincount(cell, weights=p, minlength=n_cells)[use]
        var = np.bincount(cell, weights=p * (1.0 - p), minlength=n_cells)[use]
        return float(np.median((total - mean) / np.sqrt(np.maximum(var, 1e-12))))

    lo, hi = -12.0, 12.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if median_excess(mid) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _median_sd2(e2: FloatArray, v: FloatArray, d: FloatArray) -> float:
    """The variance at which the median squared standardised excess is that of a chi-squared(1).

    The ratio falls as the variance rises, so bisection finds it; 0 when the cells vary no more than
    the binomial alone.
    """
    target = float(stats.chi2.ppf(0.5, 1))

    def median_ratio(sd2: float) -> float:
        return float(np.median(e2 / (v + d**2 * sd2)))

    if median_ratio(0.0) <= target:
        return 0.0
    lo, hi = 0.0, 1.0
    while median_ratio(hi) > target and hi < 1e6:
        hi *= 4.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if median_ratio(mid) > target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def random_effect_tails(
    cell: IntArray,
    n_cells: int,
    u: FloatArray,
    cap: FloatArray,
    y: FloatArray,
    *,
    sd: float,
    weight: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Upper and lower tail probabilities of each cell's summed score, and its standardised excess.

    Parameters
    ----------
    cell : int array, shape (n,)
        Cell of each scored vote, in ``[0, n_cells)``.
    u : float array
        The crowd's logit of ``y = 1`` for each vote (before the cap).
    cap : float array
        Largest possible ``P(y = 1)`` of each vote (1, or the chance of a decisive vote).
    y : float array
        Observed events in {0, 1}.
    weight : float array, optional
        Each vote counts ``weight * y`` in the sum (the score of a likelihood-ratio test weighs votes
        unequally); no continuity correction then.
    sd : float
        Population sd of the personal effect (logits); 0 tests against the crowd alone.

    Returns
    -------
    upper, lower : float arrays, shape (n_cells,)
        ``P(S >= s)`` and ``P(S <= s)`` under the null (1 for empty cells).
    z : float array
        ``(s - E S) / sqrt(V + D^2 sd^2)`` at ``b = 0``, the direction and size of the excess (0 if empty).
    """
    count = np.bincount(cell, minlength=n_cells)
    total = np.bincount(cell, weights=y if weight is None else weight * y, minlength=n_cells)
    half_step = 0.5 if weight is None else 0.0  # continuity correction of a count
    nodes = [(0.0, 1.0)] if sd <= 0 else list(zip(_GRID * sd, _GRID_WEIGHT, strict=True))
    upper = np.zeros(n_cells)
    lower = np.zeros(n_cells)
    for shift, node_weight in nodes:
        mean, var, _ = _moments(u, cap, shift, weight)
        m = np.bincount(cell, weights=mean, minlength=n_cells)
        v = np.maximum(np.bincount(cell, weights=var, minlength=n_cells), 1e-12)
        upper += node_weight * special.ndtr((m - (total - half_step)) / np.sqrt(v))
        lower += node_weight * special.ndtr((total + half_step - m) / np.sqrt(v))
    mean0, var0, slope0 = _moments(u, cap, 0.0, weight)
    m0 = np.bincount(cell, weights=mean0, minlength=n_cells)
    v0 = np.bincount(cell, weights=var0, minlength=n_cells)
    d0 = np.bincount(cell, weights=slope0, minlength=n_cells)
    scale = np.sqrt(v0 + d0**2 * sd**2)
    z = np.divide(total - m0, scale, out=np.zeros(n_cells), where=scale > 0)
    empty = count == 0
    upper = np.where(empty, 1.0, np.clip(upper, _MIN_P, 1.0))
    lower = np.where(empty, 1.0, np.clip(lower, _MIN_P, 1.0))
    return upper, lower, z
