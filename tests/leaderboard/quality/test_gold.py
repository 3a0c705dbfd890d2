"""Gold accuracy: the Wilson interval against its textbook value, and the sequential flag rule by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from leaderboard.quality.gold import GoldRule, gold_accuracy, honest_posterior, sequential_flags


def test_wilson_interval_textbook_value() -> None:
    # 18 right of 20: Wilson 95% interval (0.6990, 0.9721) (Newcombe 1998, method 3).
    acc = gold_accuracy(np.zeros(20, dtype=int), np.arange(20) < 18, 2)
    assert acc.accuracy[0] == pytest.approx(0.9)
    assert (acc.low[0], acc.high[0]) == pytest.approx((0.6990, 0.9721), abs=1e-3)
    assert acc.n_gold[1] == 0 and math.isnan(acc.accuracy[1]) and not acc.flagged[1]


def test_sequential_rule_by_hand() -> None:
    rule = GoldRule(p_honest=0.85, p_guess=0.45, alpha=0.001, beta=0.05)
    right, wrong = rule.steps
    assert rule.threshold == pytest.approx(math.log(0.95 / 0.001))
    # wrong votes needed from zero: ceil(threshold / wrong) = 6 in a row
    need = math.ceil(rule.threshold / wrong)
    assert need == 6
    five = sequential_flags(np.zeros(need - 1, dtype=int), np.zeros(need - 1, dtype=bool), 1, rule)
    six = sequential_flags(np.zeros(need, dtype=int), np.zeros(need, dtype=bool), 1, rule)
    assert not five[0] and six[0]
    # the score never goes below zero: a long run of right votes does not bank credit
    votes = np.r_[np.ones(50, dtype=bool), np.zeros(need, dtype=bool)]
    assert sequential_flags(np.zeros(votes.size, dtype=int), votes, 1, rule)[0]
    # interleaved annotators keep their own order
    who = np.tile([0, 1], need)
    ok = np.tile([False, True], need)
    assert sequential_flags(who, ok, 2, rule).tolist() == [True, False]


def test_guessers_and_honest_in_a_small_crowd() -> None:
    rng = np.random.default_rng(5)
    n, golds = 400, 20
    honest = np.arange(n) < 360
    who = np.repeat(np.arange(n), golds)
    # a coin-flipper is right on half the golds with a side and on none of the identical ones (a quarter)
    p = np.where(honest, rng.beta(18, 2, size=n), 0.75 * 0.5)
    flagged = gold_accuracy(who, rng.random(who.size) < p[who], n).flagged
    assert flagged[~honest].mean() >= 0.9 and flagged[honest].mean() <= 0.03
    # with no identical golds, a coin-flipper (0.5) is harder to catch in 20 golds, but still more often
    p = np.where(honest, rng.beta(18, 2, size=n), 0.5)
    flagged = gold_accuracy(who, rng.random(who.size) < p[who], n).flagged
    assert flagged[~honest].mean() >= 0.5 > 0.03 >= flagged[honest].mean()
    with pytest.raises(ValueError):
        GoldRule(p_honest=0.4, p_guess=0.5)


def test_honest_posterior_by_hand_and_its_limits() -> None:
    rule = GoldRule(p_honest=0.8, p_guess=0.5)
    # 3 right of 4: likelihood ratio guess : honest = (0.5/0.8)^3 (0.5/0.2) = 0.6104; prior odds 1:1
    (w,) = honest_posterior([4], [3], rule, prior=0.5)
    assert w == pytest.approx(1 / (1 + (0.5 / 0.8) ** 3 * (0.5 / 0.2)), rel=1e-12)
    assert honest_posterior([0], [0], rule, prior=0.7)[0] == pytest.approx(0.7)  # no golds: the prior
    many = honest_posterior([200, 200], [180, 90], rule)
    assert many[0] > 0.999999 and many[1] < 1e-6  # no overflow on long records
    with pytest.raises(ValueError, match="n_right"):
        honest_posterior([2], [3], rule)
    with pytest.raises(ValueError, match="prior"):
        honest_posterior([2], [1], rule, prior=1.0)
