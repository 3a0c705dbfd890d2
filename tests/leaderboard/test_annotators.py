"""The anomalous-annotator test: exact per-vote p-values, calibration on honest votes, power on cheats."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from leaderboard.annotators import (
    FlagRule,
    annotator_stats,
    flag_annotators,
    outcome_probabilities,
    vote_pvalues,
)
from leaderboard.data import Outcome

RATINGS = np.array([1200.0, 1100.0, 1000.0, 950.0, 900.0, 800.0])
TIE_RATE = 0.15


def honest_votes(
    rng: np.random.Generator, n_annotators: int, votes_each: int, first_id: int = 0
) -> dict[str, Any]:
    """Votes drawn from the model itself: the null hypothesis of the agreement test."""
    n = n_annotators * votes_each
    a = rng.integers(0, RATINGS.size, n)
    b = (a + rng.integers(1, RATINGS.size, n)) % RATINGS.size
    probs = outcome_probabilities(a, b, RATINGS, tie_rate=TIE_RATE)
    u = rng.random(n)[:, None]
    outcome = (u > np.cumsum(probs, axis=1)).sum(axis=1)
    who = np.repeat(np.arange(first_id, first_id + n_annotators), votes_each)
    secs = rng.lognormal(np.log(15.0), 0.5, n)
    return {"annotator": who, "model_a": a, "model_b": b, "outcome": outcome, "seconds": secs}


def concat(*parts: dict[str, Any]) -> dict[str, Any]:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def test_vote_pvalue_matches_brute_force() -> None:
    # Model A (1200) against model F (800): P(a) = 0.85/(1+10**-1)... checked by listing outcomes.
    a, b = np.array([0, 0, 0, 5]), np.array([5, 5, 5, 0])
    outcome = np.array([Outcome.MODEL_A, Outcome.MODEL_B, Outcome.BOTHBAD, Outcome.MODEL_A])
    got = vote_pvalues(a, b, outcome, RATINGS, tie_rate=TIE_RATE)
    for i in range(4):
        probs = outcome_probabilities(a[i : i + 1], b[i : i + 1], RATINGS, tie_rate=TIE_RATE)[0]
        observed = min(int(outcome[i]), 2)
        expected = sum(p for p in probs if p <= probs[observed] + 1e-12)
        assert got[i] == pytest.approx(expected, abs=1e-12)
    # The favourite winning is the most likely outcome: p = 1.
    assert got[0] == pytest.approx(1.0)
    # The underdog winning is the least likely: p = its own probability.
    p_upset = 0.85 / (1.0 + 10.0 ** (400 / 400))
    assert got[1] == pytest.approx(p_upset)
    assert got[3] == pytest.approx(p_upset)


def test_fisher_null_moments_match_simulation() -> None:
    rng = np.random.default_rng(7)
    votes = honest_votes(rng, n_annotators=2000, votes_each=30)
    s = annotator_stats(**votes, ratings=RATINGS, tie_rate=TIE_RATE)
    # Under the null the statistic's sample mean and variance match the computed moments.
    assert s.agreement_statistic.mean() == pytest.approx(s.agreement_expected.mean(), rel=0.03)
    # And the p-values are close to uniform (Kolmogorov distance small; discrete data allows a little).
    p = np.sort(s.agreement_pvalue)
    ks = np.max(np.abs(p - (np.arange(p.size) + 0.5) / p.size))
    assert ks < 0.06


def test_honest_crowd_is_not_flagged() -> None:
    rng = np.random.default_rng(11)
    votes = honest_votes(rng, n_annotators=400, votes_each=40)
    s = annotator_stats(**votes, ratings=RATINGS)
    flagged, reasons = flag_annotators(s)
    assert flagged.sum() <= 4, [r for r in reasons if r]


def manipulators(
    rng: np.random.Generator, kind: str, n: int, votes_each: int, first_id: int
) -> dict[str, Any]:
    v = honest_votes(rng, n, votes_each, first_id)
    out = v["outcome"].copy()
    if kind == "left":
        out[:] = Outcome.MODEL_A
    elif kind == "random":
        out = rng.integers(0, 3, out.size)
    elif kind == "boost":
        target = RATINGS.size - 1
        out = np.where(
            v["model_a"] == target, Outcome.MODEL_A, np.where(v["model_b"] == target, Outcome.MODEL_B, out)
        )
    v["outcome"] = out
    return v


@pytest.mark.parametrize(("kind", "votes_each"), [("left", 40), ("random", 80), ("boost", 60)])
def test_manipulators_are_flagged(kind: str, votes_each: int) -> None:
    rng = np.random.default_rng(3)
    honest = honest_votes(rng, n_annotators=200, votes_each=votes_each)
    bad = manipulators(rng, kind, n=10, votes_each=votes_each, first_id=10_000)
    s = annotator_stats(**concat(honest, bad), ratings=RATINGS)
    flagged, _ = flag_annotators(s)
    is_bad = s.annotators >= 10_000
    assert flagged[is_bad].mean() >= 0.8
    assert flagged[~is_bad].mean() <= 0.02
    if kind == "boost":
        # The favouritism test names the boosted model.
        assert np.all(s.favourite[is_bad & flagged] == RATINGS.size - 1)


def test_side_and_speed_rules_name_their_reason() -> None:
    rng = np.random.default_rng(5)
    honest = honest_votes(rng, n_annotators=50, votes_each=30)
    fast = honest_votes(rng, n_annotators=1, votes_each=30, first_id=900)
    fast["seconds"] = np.full(30, 0.8)
    left = manipulators(rng, "left", n=1, votes_each=60, first_id=901)
    s = annotator_stats(**concat(honest, fast, left), ratings=RATINGS)
    flagged, reasons = flag_annotators(s)
    by_id = dict(zip(s.annotators.tolist(), reasons, strict=True))
    assert by_id[900] is not None and "fast" in by_id[900]
    assert by_id[901] is not None and "side" in by_id[901]
    # Too few votes: never flagged, whatever they are.
    few = flag_annotators(s, FlagRule(min_votes=1000))[0]
    assert not few.any()
    # The timing rule can be turned off.
    off = dict(
        zip(s.annotators.tolist(), flag_annotators(s, FlagRule(min_median_seconds=None))[1], strict=True)
    )
    assert off[900] is None or "fast" not in off[900]


def test_bad_input_raises() -> None:
    with pytest.raises(ValueError, match="same length"):
        annotator_stats([1, 2], [0, 1], [1, 0], [0], RATINGS)
    with pytest.raises(ValueError, match="between 0 and 3"):
        annotator_stats([1], [0], [1], [7], RATINGS)
    with pytest.raises(ValueError, match="tie_rate"):
        outcome_probabilities([0], [1], RATINGS, tie_rate=1.0)
