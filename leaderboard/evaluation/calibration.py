"""Scores of three-outcome forecasts beyond the mean log-loss: per-vote losses, AUC, calibration, the
fitted scale (the "400 or 480" question) and a paired bootstrap of the log-loss difference of two systems.

Forecasts are arrays ``[P(left wins), P(tie), P(right wins)]`` per vote, whatever made them (a batch fit,
an online rater), so every system is scored by the same code. A forecast's *rating difference* is the
logistic one it implies, ``scale / ln(base) * ln(P(left) / P(right))``: exactly the rating difference
(plus any left-side advantage) for Bradley-Terry, Davidson and Elo, the effective one for the others.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.metrics import roc_auc_score

from leaderboard.data import Outcome

__all__ = [
    "CALIBRATION_EDGES",
    "auc_of",
    "calibration_table",
    "fitted_scale",
    "implied_difference",
    "outcome_columns",
    "paired_bootstrap_difference",
    "vote_log_losses",
]

FloatArray = npt.NDArray[np.float64]
CodeArray = npt.NDArray[np.integer[Any]]

#: Column of each outcome code in a forecast: left wins, tie (and both bad), right wins.
_COLUMN = np.zeros(4, dtype=np.int64)
_COLUMN[int(Outcome.MODEL_A)] = 0
_COLUMN[int(Outcome.MODEL_B)] = 2
_COLUMN[int(Outcome.TIE)] = 1
_COLUMN[int(Outcome.BOTHBAD)] = 1
#: The left model's score for each outcome code.
_SCORE = np.array([1.0, 0.0, 0.5, 0.5])
#: Bin edges of the calibration table, in rating points of implied difference (left minus right).
CALIBRATION_EDGES: tuple[float, ...] = (-math.inf, -300, -200, -100, -50, 0, 50, 100, 200, 300, math.inf)
_FLOOR = 1e-15


def outcome_columns(outcome: CodeArray) -> npt.NDArray[np.int64]:
    """Forecast column of each vote's outcome (both-bad counts as a tie)."""
    out: npt.NDArray[np.int64] = _COLUMN[np.asarray(outcome, dtype=np.int64)]
    return out


def vote_log_losses(proba: FloatArray, outcome: CodeArray, *, floor: float = _FLOOR) -> FloatArray:
    """``-log P(observed outcome)`` of each vote (probabilities floored at ``floor``)."""
    column = outcome_columns(outcome)
    p = np.clip(proba[np.arange(column.shape[0]), column], floor, 1.0)
    out: FloatArray = -np.log(p)
    return out


def implied_difference(proba: FloatArray, *, scale: float = 400.0, base: float = 10.0) -> FloatArray:
    """Rating difference (left minus right) a forecast implies on the logistic scale:
    ``scale / ln(base) * ln(P(left) / P(right))``."""
    left = np.clip(proba[:, 0], _FLOOR, 1.0)
    right = np.clip(proba[:, 2], _FLOOR, 1.0)
    out: FloatArray = scale / math.log(base) * (np.log(left) - np.log(right))
    return out


def auc_of(proba: FloatArray, outcome: CodeArray) -> float:
    """Area under the ROC curve on decisive votes: how well ``P(left) / (P(left) + P(right))`` ranks
    left wins above right wins (0.5 is chance; NaN when one class is missing)."""
    column = outcome_columns(outcome)
    decisive = column != 1
    label = column[decisive] == 0
    if label.all() or not label.any():
        return math.nan
    p = proba[decisive]
    return float(roc_auc_score(label, p[:, 0] / np.maximum(p[:, 0] + p[:, 2], _FLOOR)))


def calibration_table(
    proba: FloatArray,
    outcome: CodeArray,
    *,
    edges: tuple[float, ...] = CALIBRATION_EDGES,
    scale: float = 400.0,
    base: float = 10.0,
) -> list[dict[str, float]]:
    """Expected against observed score of the left model, by bin of implied rating difference.

    Parameters
    ----------
    proba : array, shape (n, 3)
    outcome : int array, shape (n,)
    edges : increasing bin edges in rating points
    scale, base : the rating scale of the implied difference

    Returns
    -------
    list of dict
        One per non-empty bin: ``low``, ``high``, ``n``, ``difference`` (mean implied difference),
        ``expected`` (mean of ``P(left) + P(tie) / 2``) and ``observed`` (mean score: 1, 1/2 or 0).
    """
    diff = implied_difference(proba, scale=scale, base=base)
    expected = proba[:, 0] + 0.5 * proba[:, 1]
    observed = _SCORE[np.asarray(outcome, dtype=np.int64)]
    which = np.searchsorted(np.asarray(edges[1:-1]), diff, side="right")
    rows = []
    for k in range(len(edges) - 1):
        inside = which == k
        if inside.any():
            rows.append(
                {
                    "low": float(edges[k]),
                    "high": float(edges[k + 1]),
                    "n": float(inside.sum()),
                    "difference": float(diff[inside].mean()),
                    "expected": float(expected[inside].mean()),
                    "observed": float(observed[inside].mean()),
                }
            )
    return rows


def fitted_scale(
    difference: FloatArray,
    outcome: CodeArray,
    *,
    scale: float = 400.0,
    base: float = 10.0,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> dict[str, float]:
    """The calibration slope of observed scores on rating differences, and the scale it implies.

    Fits ``P(left scores) = 1 / (1 + base ** (-b d / scale))`` by maximum likelihood (a tie counts as
    half a win and half a loss, as in the Elo update). ``b = 1`` says the rating scale is right;
    ``b < 1`` that the curve overstates the favourite, the spread of outcomes calls for the scale
    ``scale / b`` (practitioners' 480 instead of 400 is ``b = 0.83``).

    Parameters
    ----------
    difference : array
        Rating differences, left minus right (for example :func:`implied_difference` on held-out votes).
    outcome : int array
    scale, base : the scale the differences are in
    tol, max_iter : Newton's method's tolerance on the step and its iteration limit

    Returns
    -------
    dict
        ``slope`` (``b``) and ``scale`` (``scale / b``); both NaN when the differences carry no
        information or separate the outcomes (no finite slope).

    Raises
    ------
    RuntimeError
        If Newton's method does not converge.
    """
    x = np.asarray(difference, dtype=np.float64) * math.log(base) / scale
    s = _SCORE[np.asarray(outcome, dtype=np.int64)]
    none = {"slope": math.nan, "scale": math.nan}
    # a finite maximum needs votes against every sign of the slope (else the outcomes are separated)
    against_up = np.any((x > 0) & (s < 1)) or np.any((x < 0) & (s > 0))
    against_down = np.any((x > 0) & (s > 0)) or np.any((x < 0) & (s < 1))
    if not (against_up and against_down):
        return none

    def loglik(b: float) -> float:
        return float(np.sum(s * _log_sigmoid(b * x) + (1.0 - s) * _log_sigmoid(-b * x)))

    b = 1.0
    current = loglik(b)
    for _ in range(max_iter):
        p = 1.0 / (1.0 + np.exp(-b * x))
        grad = float(np.sum((s - p) * x))
        info = float(np.sum(p * (1.0 - p) * x * x))
        if info <= 0:
            return none
        step = grad / info
        # the log-likelihood is concave in b: halve a Newton step that overshoots
        while loglik(b + step) < current - 1e-12 and abs(step) > tol:
            step /= 2.0
        b += step
        current = loglik(b)
        if abs(step) < tol:
            return {"slope": b, "scale": scale / b if b else math.inf}
    raise RuntimeError("the calibration slope did not converge")


def _log_sigmoid(v: FloatArray) -> FloatArray:
    out: FloatArray = -np.logaddexp(0.0, -v)
    return out


def paired_bootstrap_difference(
    loss_a: FloatArray,
    loss_b: FloatArray,
    *,
    n_rounds: int = 2000,
    level: float = 0.95,
    random_state: int | np.random.Generator | None = 0,
    groups: npt.NDArray[np.int64] | None = None,
) -> tuple[float, float, float]:
    """Mean of ``loss_b - loss_a`` over the same votes, with a percentile interval from resampling the
    votes (pairs kept together) ``n_rounds`` times.

    With ``groups`` (each vote's cluster, e.g. its annotator; negative: a cluster of its own) whole
    clusters are resampled instead: a round draws how often each cluster appears (multinomial over
    the clusters) and takes the ratio of the drawn clusters' loss sums to their vote numbers, so votes
    that share an annotator or prompt count as the one piece of evidence they are.

    Returns
    -------
    (difference, ci_low, ci_high)
    """
    a = np.asarray(loss_a, dtype=np.float64)
    b = np.asarray(loss_b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError("need two non-empty loss arrays over the same votes")
    diff = b - a
    rng = np.random.default_rng(random_state)
    means = np.empty(n_rounds)
    if groups is not None:
        ids = np.asarray(groups, dtype=np.int64).copy()
        if ids.shape != diff.shape:
            raise ValueError("need one cluster id per vote")
        alone = ids < 0
        ids[alone] = int(ids.max(initial=0)) + 1 + np.arange(int(alone.sum()))
        _, code = np.unique(ids, return_inverse=True)
        sums, sizes = np.bincount(code, weights=diff), np.bincount(code).astype(np.float64)
        n_groups = sums.size
        for r in range(n_rounds):
            drawn = rng.multinomial(n_groups, np.full(n_groups, 1.0 / n_groups))
            means[r] = (drawn @ sums) / (drawn @ sizes)
    else:
        for r in range(n_rounds):
            means[r] = diff[rng.integers(0, diff.size, diff.size)].mean()
    tail = 50.0 * (1.0 - level)
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return float(diff.mean()), float(low), float(high)
