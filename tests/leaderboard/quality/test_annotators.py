"""The anomalous-annotator test: calibrated on honest voters with tastes, powerful on cheats."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from leaderboard.data import Outcome
from leaderboard.quality.annotators import (
    FlagRule,
    annotator_stats,
    flag_annotators,
    outcome_probabilities,
)
from leaderboard.quality.voter_review import honest_weights

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


def test_honest_crowd_is_not_flagged() -> None:
    """Voters exactly like the crowd: the estimated population sds are near 0 and nobody is flagged."""
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
    with pytest.raises(ValueError, match="within the ratings"):
        annotator_stats([1], [0], [6], [0], RATINGS)
    with pytest.raises(ValueError, match="skipped battles"):
        annotator_stats([1], [0], [1], [0], RATINGS, skipped=([1, 1], [0], [1]))
    with pytest.raises(ValueError, match="within the ratings"):
        annotator_stats([1], [0], [1], [0], RATINGS, skipped=([1], [0], [-1]))


def tasteful_votes(
    rng: np.random.Generator, n_annotators: int, votes_each: int, *, taste_sd: float, side_sd: float
) -> dict[str, Any]:
    """Honest voters who are not the crowd: a personal taste per model and a personal side bias (Elo)."""
    n = n_annotators * votes_each
    who = np.repeat(np.arange(n_annotators), votes_each)
    a = rng.integers(0, RATINGS.size, n)
    b = (a + rng.integers(1, RATINGS.size, n)) % RATINGS.size
    taste = rng.normal(0.0, taste_sd, (n_annotators, RATINGS.size))
    side = rng.normal(0.0, side_sd, n_annotators)
    diff = RATINGS[a] + taste[who, a] - RATINGS[b] - taste[who, b] + side[who]
    p_left = (1 - TIE_RATE) / (1 + 10 ** (-diff / 400))
    draw = rng.random(n)
    outcome = np.where(
        draw < p_left, Outcome.MODEL_A, np.where(draw < 1 - TIE_RATE, Outcome.MODEL_B, Outcome.TIE)
    )
    secs = rng.lognormal(np.log(15.0), 0.5, n)
    return {"annotator": who, "model_a": a, "model_b": b, "outcome": outcome, "seconds": secs}


def test_heavy_honest_voters_with_tastes_are_not_flagged() -> None:
    # 300 votes each: a crowd-only null would flag most of them for their own taste and side bias.
    rng = np.random.default_rng(21)
    votes = tasteful_votes(rng, 300, 300, taste_sd=70.0, side_sd=40.0)
    s = annotator_stats(**votes, ratings=RATINGS, tie_rate=TIE_RATE)
    flagged, reasons = flag_annotators(s)
    assert flagged.mean() <= 0.01, [r for r in reasons if r]
    # The population sds are recovered from the votes (logits; taste relative to the other models).
    assert 0.25 < s.taste_sd < 0.55
    assert 0.12 < s.side_sd < 0.35
    # With the taste ignored the same voters are flagged in numbers: the null matters.
    crowd_only = annotator_stats(
        **votes, ratings=RATINGS, tie_rate=TIE_RATE, population={"taste_sd": 0.0, "side_sd": 0.0}
    )
    assert flag_annotators(crowd_only)[0].mean() > 0.2


def test_recogniser_is_flagged_but_an_honest_fan_is_not() -> None:
    # A de-anonymising voter votes like an honest one except for the target when recognised; an honest
    # fan of the target has a taste three population sds strong. Only the first needs more than taste.
    rng = np.random.default_rng(8)
    target = 3
    honest = tasteful_votes(rng, 200, 200, taste_sd=70.0, side_sd=40.0)
    fans = tasteful_votes(rng, 5, 200, taste_sd=70.0, side_sd=40.0)
    fan_taste = 3 * 70.0
    diff = RATINGS[fans["model_a"]] - RATINGS[fans["model_b"]]
    diff = diff + fan_taste * ((fans["model_a"] == target).astype(float) - (fans["model_b"] == target))
    p_left = (1 - TIE_RATE) / (1 + 10 ** (-diff / 400))
    draw = rng.random(diff.size)
    fans["outcome"] = np.where(draw < p_left, 0, np.where(draw < 1 - TIE_RATE, 1, 2))
    fans["annotator"] = fans["annotator"] + 10_000
    cheats = tasteful_votes(rng, 5, 200, taste_sd=70.0, side_sd=40.0)
    seen = (cheats["model_a"] == target) | (cheats["model_b"] == target)
    recognised = seen & (rng.random(seen.size) < 0.9)
    forced = np.where(cheats["model_a"] == target, Outcome.MODEL_A, Outcome.MODEL_B)
    cheats["outcome"] = np.where(recognised, forced, cheats["outcome"])
    cheats["annotator"] = cheats["annotator"] + 20_000
    s = annotator_stats(**concat(honest, fans, cheats), ratings=RATINGS, tie_rate=TIE_RATE)
    flagged, reasons = flag_annotators(s)
    cheat = s.annotators >= 20_000
    fan = (s.annotators >= 10_000) & ~cheat
    assert flagged[cheat].all(), [r for r, c in zip(reasons, cheat, strict=True) if c]
    assert np.all(s.favourite[cheat] == target) and np.all(s.favouritism_z[cheat] > 0)
    assert not flagged[fan].any()
    assert flagged[~cheat & ~fan].mean() <= 0.01


def test_voting_only_when_the_target_shows_is_caught_by_the_skips() -> None:
    # Shown 40 battles, votes on the ~7 with the target: too few votes for any vote test, not for the
    # skip pattern. Honest voters skip a fifth of their battles whatever is on screen.
    rng = np.random.default_rng(2)
    target = 4
    honest = tasteful_votes(rng, 300, 40, taste_sd=70.0, side_sd=40.0)
    keep = rng.random(honest["annotator"].size) >= 0.2
    sybil = honest_votes(rng, 10, 40, first_id=50_000)
    with_target = (sybil["model_a"] == target) | (sybil["model_b"] == target)
    skipped = (
        np.concatenate([honest["annotator"][~keep], sybil["annotator"][~with_target]]),
        np.concatenate([honest["model_a"][~keep], sybil["model_a"][~with_target]]),
        np.concatenate([honest["model_b"][~keep], sybil["model_b"][~with_target]]),
    )
    sybil["outcome"] = np.where(sybil["model_a"] == target, Outcome.MODEL_A, Outcome.MODEL_B)
    voted = concat({k: v[keep] for k, v in honest.items()}, {k: v[with_target] for k, v in sybil.items()})
    s = annotator_stats(**voted, ratings=RATINGS, skipped=skipped)
    flagged, reasons = flag_annotators(s)
    bad = s.annotators >= 50_000
    assert flagged[bad].all(), [r for r, b in zip(reasons, bad, strict=True) if b]
    assert all("skips" in (r or "") for r, b in zip(reasons, bad, strict=True) if b)
    assert np.all(s.n_seen[bad] == 40) and np.all(s.n_votes[bad] < 20)
    assert flagged[~bad].mean() <= 0.01
    # Without the skipped battles nothing betrays them.
    assert not flag_annotators(annotator_stats(**voted, ratings=RATINGS))[0][bad].any()


def test_honest_weights_fall_with_the_evidence() -> None:
    rng = np.random.default_rng(4)
    honest = tasteful_votes(rng, 200, 60, taste_sd=70.0, side_sd=40.0)
    bad = manipulators(rng, "left", n=5, votes_each=60, first_id=10_000)
    s = annotator_stats(**concat(honest, bad), ratings=RATINGS)
    w = honest_weights(s)
    is_bad = s.annotators >= 10_000
    assert np.all(w[is_bad] < 0.01)
    assert np.median(w[~is_bad]) > 0.95 and w[~is_bad].min() > 0.5
    with pytest.raises(ValueError, match="prior_honest"):
        honest_weights(s, prior_honest=1.0)
