"""The verdict's paired bootstrap resampling whole clusters of test votes (``arena evaluate --cluster``)."""

from __future__ import annotations

import numpy as np
import pytest

from leaderboard.evaluation.calibration import paired_bootstrap_difference


def _losses(n_groups: int, per_group: int, spread: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Losses of two systems whose difference carries a shared offset per cluster."""
    rng = np.random.default_rng(4)
    groups = np.repeat(np.arange(n_groups), per_group)
    offset = rng.normal(0.0, spread, n_groups)[groups]
    a = rng.uniform(0.5, 1.0, groups.size)
    return a, a + 0.01 + offset + rng.normal(0.0, 0.05, groups.size), groups


def test_clustered_interval_is_wider_when_clusters_share_their_difference() -> None:
    a, b, groups = _losses(30, 100, 0.05)
    diff, low, high = paired_bootstrap_difference(a, b, n_rounds=500)
    c_diff, c_low, c_high = paired_bootstrap_difference(a, b, n_rounds=500, groups=groups)
    assert c_diff == pytest.approx(diff)
    # 30 clusters of 100 votes with a shared offset: about sqrt(1 + 99 * 0.05^2 / (0.05^2 + 0.05^2)) ~ 7x
    assert (c_high - c_low) > 4 * (high - low)
    assert c_low < diff < c_high


def test_votes_without_a_cluster_stand_alone() -> None:
    a, b, _ = _losses(30, 100, 0.0)
    plain = paired_bootstrap_difference(a, b, n_rounds=800)
    alone = paired_bootstrap_difference(a, b, n_rounds=800, groups=np.full(a.size, -1, dtype=np.int64))
    width, alone_width = plain[2] - plain[1], alone[2] - alone[1]
    assert alone_width == pytest.approx(width, rel=0.15)


def test_cluster_ids_must_match_the_votes() -> None:
    a, b, groups = _losses(5, 10, 0.0)
    with pytest.raises(ValueError, match="one cluster id per vote"):
        paired_bootstrap_difference(a, b, groups=groups[:-1])
