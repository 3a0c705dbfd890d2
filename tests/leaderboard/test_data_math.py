"""Aggregation (with time buckets and weights), pair statistics, matrices, performance ratings."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from leaderboard import (
    aggregate_battles,
    aggregate_codes,
    battle_count_matrix,
    collapse_pairs,
    expected_score_table,
    model_totals,
    observed_win_rates,
    performance_rating,
    predicted_win_rates,
)


def test_aggregate_strings_match_codes() -> None:
    a = ["m1", "m2", "m1", "m3", "m1"]
    b = ["m2", "m1", "m2", "m1", "m2"]
    w = ["model_a", "tie", "model_a", "tie (bothbad)", "model_b"]
    c = aggregate_battles(a, b, w)
    assert c.models == ("m1", "m2", "m3")
    got = {
        (int(x), int(y), int(o)): v
        for x, y, o, v in zip(c.model_a, c.model_b, c.outcome, c.count, strict=True)
    }
    assert got == {(0, 1, 0): 2.0, (1, 0, 2): 1.0, (2, 0, 3): 1.0, (0, 1, 1): 1.0}
    assert c.n_votes == 5
    with pytest.raises(ValueError):
        aggregate_battles(["a"], ["a"], ["tie"])
    with pytest.raises(ValueError):
        aggregate_battles(["a"], ["b"], ["win"])


def test_time_buckets_and_weights() -> None:
    rng = np.random.default_rng(3)
    n = 2000
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(1, 4, n)) % 4
    o = rng.integers(0, 4, n)
    t = rng.uniform(0, 10 * 86400, n)
    w = rng.uniform(0.1, 1.0, n)
    c = aggregate_codes(a, b, o, models=list("abcd"), time=t, bucket_seconds=86400, weight=w)
    assert c.time is not None and c.votes is not None
    assert c.votes.sum() == n and c.count.sum() == pytest.approx(w.sum())
    # brute force for one cell
    mask = (
        (a == c.model_a[0])
        & (b == c.model_b[0])
        & (o == c.outcome[0])
        & (np.floor(t / 86400) * 86400 == c.time[0])
    )
    assert c.votes[0] == mask.sum() and c.count[0] == pytest.approx(w[mask].sum())
    with pytest.raises(ValueError):
        aggregate_codes(a, b, o, models=list("abcd"), time=t)


def test_collapse_and_matrices() -> None:
    c = aggregate_battles(
        ["x", "y", "y", "x"], ["y", "x", "x", "y"], ["model_a", "model_a", "tie", "model_b"]
    )
    st = collapse_pairs(c)
    assert (st.wins_lo.tolist(), st.wins_hi.tolist(), st.ties.tolist()) == ([1.0], [2.0], [1.0])
    assert battle_count_matrix(c).loc["x", "y"] == 4
    assert observed_win_rates(c).loc["x", "y"] == pytest.approx(1.5 / 4)
    assert observed_win_rates(c).loc["y", "x"] == pytest.approx(2.5 / 4)
    battles, rate = model_totals(c)
    assert battles.tolist() == [4, 4] and rate.tolist() == [pytest.approx(0.375), pytest.approx(0.625)]
    pred = predicted_win_rates([1400, 1000], ["x", "y"])
    assert pred.loc["x", "y"] == pytest.approx(10 / 11)


def test_performance_rating() -> None:
    opp = np.array([1000.0, 1200.0, 1400.0])
    s = np.array([1.0, 0.5, 0.0])
    assert performance_rating(opp, s, method="400") == pytest.approx(1200.0)
    r = performance_rating(opp, s)
    e = 1 / (1 + 10 ** ((opp - r) / 400))
    assert e.sum() == pytest.approx(1.5, abs=1e-8)
    assert performance_rating(opp, np.ones(3)) == np.inf
    table = expected_score_table([0, 400])
    assert table["expected_higher"].tolist() == [pytest.approx(0.5), pytest.approx(10 / 11)]


def test_same_counts_only_for_the_same_cells() -> None:
    codes = np.array([0, 1, 0, 2]), np.array([1, 0, 1, 0]), np.array([0, 2, 0, 1], dtype=np.int8)
    counts = aggregate_codes(*codes, models=("a", "b", "c"))
    again = aggregate_codes(*(c.copy() for c in codes), models=("a", "b", "c"))
    assert counts.same_as(again) and again.same_as(counts)
    weighted = aggregate_codes(*codes, models=("a", "b", "c"), weight=np.array([1.0, 1.0, 0.5, 1.0]))
    assert not counts.same_as(weighted)  # other counts, and votes only on one side
    assert not counts.same_as(replace(counts, models=("a", "b", "d")))
    assert not counts.same_as(replace(counts, count=counts.count.astype(np.float32)))
    assert not counts.same_as(replace(counts, sided=np.ones(counts.n_cells, dtype=bool)))
    assert not counts.same_as(replace(counts, count=counts.count + 1))
