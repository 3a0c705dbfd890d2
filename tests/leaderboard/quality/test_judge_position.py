"""Per-judge position terms: separate fits, shrinkage, and a pooled interval that admits their spread."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from leaderboard import BTSpec, fit_bt, sandwich_intervals, simulate_battles
from leaderboard.quality.judge_position import judge_positions

TRUTH = np.linspace(850, 1150, 6)


def test_spread_between_judges_widens_the_pooled_interval() -> None:
    sim = simulate_battles(
        TRUTH, 12_000, random_state=4, position=40, nu=0.4, n_annotators=12, annotator_position_sd=120
    )
    result = judge_positions(sim, tuple(f"judge-{k}" for k in range(12)))
    assert len(result.judges) == 12 and not result.skipped
    assert 60 < result.tau < 240  # the simulated between-judge sd is 120
    naive = sandwich_intervals(fit=fit_bt(sim.counts(), spec=BTSpec(position="common", ties="davidson")))
    _, low, high = naive.extra["position_advantage_elo"]
    pooled_width = result.pooled[2] - result.pooled[1]
    assert pooled_width > 4 * (high - low)
    assert result.pooled[1] < 40 < result.pooled[2]
    for _, _, estimate, _, shrunk, lo, hi in result.judges:  # shrunk towards the pooled mean, never past it
        assert abs(shrunk - result.pooled[0]) <= abs(estimate - result.pooled[0]) + 1e-9
        assert lo < shrunk < hi


def test_judges_that_agree_are_pooled_tightly() -> None:
    sim = simulate_battles(TRUTH, 8000, random_state=5, position=40, nu=0.4, n_annotators=8)
    result = judge_positions(sim)
    assert result.tau < 15
    assert result.pooled[2] - result.pooled[1] < 40


def test_refuses_without_judges_and_skips_small_ones() -> None:
    sim = simulate_battles(TRUTH, 2000, random_state=6, position=40, nu=0.4)
    with pytest.raises(ValueError, match="annotator ids"):
        judge_positions(sim)
    ids = np.where(np.arange(2000) < 20, 2, np.arange(2000) % 2)
    result = judge_positions(replace(sim, annotator=ids), min_votes=50)
    assert [s[0] for s in result.skipped] == ["annotator-2"]
