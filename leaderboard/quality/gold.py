"""Annotator accuracy on gold battles (votes whose right answer is known) and the rule that flags guessers.

A gold battle's right vote is the better side (an *objective* pair, or an answer against a *degraded* copy
of itself) or a tie (the *identical* text on both sides). Per annotator we report the share of golds voted
right with a 95% Wilson score interval (``statsmodels.stats.proportion.proportion_confint``), and flag by
a one-sided sequential probability ratio test in CUSUM form (Page 1954): each gold adds
``log(p_guess / p_honest)`` when right and ``log((1 - p_guess) / (1 - p_honest))`` when wrong to a score
kept at or above zero; the annotator is flagged once the score reaches ``threshold``. Wald's bound
``log((1 - beta) / alpha)`` sets the threshold from the tolerated false-flag and miss rates. A guesser's
accuracy is at most one half on golds with a side to pick (coin flips, always-left) and one third when
ties are clicked at random, well below an honest annotator's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "GoldAccuracy",
    "GoldRule",
    "gold_accuracy",
    "honest_posterior",
    "sequential_flags",
    "wilson_shares",
]


@dataclass(frozen=True)
class GoldRule:
    """The sequential flag rule: accuracies under "honest" and "guessing", and the error rates that set
    the threshold (``alpha``: honest annotators flagged, ``beta``: guessers missed, per Wald)."""

    p_honest: float = 0.85
    p_guess: float = 0.45
    alpha: float = 0.001
    beta: float = 0.05

    def __post_init__(self) -> None:
        if not 0 < self.p_guess < self.p_honest < 1:
            raise ValueError("need 0 < p_guess < p_honest < 1")
        if not (0 < self.alpha < 1 and 0 < self.beta < 1):
            raise ValueError("alpha and beta must be in (0, 1)")

    @property
    def threshold(self) -> float:
        return math.log((1 - self.beta) / self.alpha)

    @property
    def steps(self) -> tuple[float, float]:
        """The score added by a right and by a wrong gold vote."""
        right = math.log(self.p_guess / self.p_honest)
        wrong = math.log((1 - self.p_guess) / (1 - self.p_honest))
        return right, wrong


def sequential_flags(
    annotator: npt.ArrayLike, correct: npt.ArrayLike, n_annotators: int, rule: GoldRule | None = None
) -> npt.NDArray[np.bool_]:
    """Which annotators the rule flags, from their gold votes in time order (``correct`` per vote)."""
    rule = rule or GoldRule()
    who = np.asarray(annotator, dtype=np.int64)
    ok = np.asarray(correct, dtype=bool)
    right, wrong = rule.steps
    step = np.where(ok, right, wrong)
    order = np.argsort(who, kind="stable")  # keep each annotator's time order
    who, step = who[order], step[order]
    flagged = np.zeros(n_annotators, dtype=bool)
    # CUSUM per annotator: S_t = max(0, S_{t-1} + step_t) = C_t - min(0, min over s <= t of C_s)
    starts = np.flatnonzero(np.r_[True, who[1:] != who[:-1]]) if who.size else np.zeros(0, dtype=np.int64)
    for begin, end in zip(starts, np.r_[starts[1:], who.size], strict=True):
        c = np.cumsum(step[begin:end])
        s = c - np.minimum(0.0, np.minimum.accumulate(c))
        flagged[who[begin]] = bool((s >= rule.threshold).any())
    return flagged


@dataclass(frozen=True)
class GoldAccuracy:
    """Per annotator: golds voted, voted right, the accuracy and its 95% Wilson interval, and the flag."""

    n_gold: npt.NDArray[np.int64]
    n_right: npt.NDArray[np.int64]
    accuracy: npt.NDArray[np.float64]
    low: npt.NDArray[np.float64]
    high: npt.NDArray[np.float64]
    flagged: npt.NDArray[np.bool_]


def gold_accuracy(
    annotator: npt.ArrayLike, correct: npt.ArrayLike, n_annotators: int, rule: GoldRule | None = None
) -> GoldAccuracy:
    """:class:`GoldAccuracy` of every annotator ``0 .. n_annotators - 1`` (NaN where no gold was voted)."""
    who = np.asarray(annotator, dtype=np.int64)
    ok = np.asarray(correct, dtype=bool)
    n, k, accuracy, low, high = wilson_shares(who, ok, n_annotators)
    return GoldAccuracy(n, k, accuracy, low, high, sequential_flags(who, ok, n_annotators, rule))


def wilson_shares(
    annotator: npt.ArrayLike, success: npt.ArrayLike, n_annotators: int
) -> tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
]:
    """Per annotator ``0 .. n_annotators - 1``: trials, successes, their share and its 95% Wilson score
    interval (Wilson 1927, ``statsmodels``' ``proportion_confint``); NaN where there is no trial.

    The one per-annotator proportion of the project: gold accuracy (right votes among golds) and
    self-agreement (repeats voted as the first time, :mod:`votes.voting.repeat_votes`) both use it.
    """
    from statsmodels.stats.proportion import proportion_confint  # statsmodels (0.7 s): the site imports us

    who = np.asarray(annotator, dtype=np.int64)
    ok = np.asarray(success, dtype=bool)
    n = np.bincount(who, minlength=n_annotators).astype(np.int64)
    k = np.bincount(who, weights=ok, minlength=n_annotators).astype(np.int64)
    has = n > 0
    low, high = np.full(n_annotators, np.nan), np.full(n_annotators, np.nan)
    if has.any():
        lo, hi = proportion_confint(k[has], n[has], alpha=0.05, method="wilson")
        low[has], high[has] = lo, hi
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(has, k / np.maximum(n, 1), np.nan)
    return n, k, share, low, high


def honest_posterior(
    n_gold: npt.ArrayLike, n_right: npt.ArrayLike, rule: GoldRule | None = None, prior: float = 0.85
) -> npt.NDArray[np.float64]:
    """Each annotator's posterior probability of being honest given their gold record.

    Two hypotheses, as in the flag rule: right with probability ``p_honest`` (honest) or ``p_guess``
    (guessing), a priori honest with probability ``prior``; by Bayes' rule on the binomial likelihoods,
    ``P(honest | k of n) = 1 / (1 + (1 - prior) / prior * (p_guess / p_honest)^k
    * ((1 - p_guess) / (1 - p_honest))^(n - k))``. Without golds it is the prior. A vote weighted by it
    counts in proportion to the evidence the annotator is honest: an unflagged guesser whose luck kept
    them under the flag threshold still weighs little.

    Raises
    ------
    ValueError
        If ``prior`` is not in (0, 1) or ``n_right`` exceeds ``n_gold``.
    """
    rule = rule or GoldRule()
    if not 0 < prior < 1:
        raise ValueError("prior must be in (0, 1)")
    n = np.asarray(n_gold, dtype=np.float64)
    k = np.asarray(n_right, dtype=np.float64)
    if np.any(k > n) or np.any(k < 0):
        raise ValueError("n_right must be between 0 and n_gold")
    right, wrong = rule.steps  # log likelihood ratios guess : honest of a right and a wrong vote
    log_odds_guess = math.log((1 - prior) / prior) + k * right + (n - k) * wrong
    return 1.0 / (1.0 + np.exp(np.clip(log_odds_guess, -700.0, 700.0)))
