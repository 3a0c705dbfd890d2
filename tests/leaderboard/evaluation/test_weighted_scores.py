"""Held-out scores with vote weights: a vote of weight 2 scores exactly as two copies of it."""

from __future__ import annotations

import numpy as np
import pytest

from leaderboard.evaluation.held_out import score_system


def test_weighted_scores_equal_the_scores_of_repeated_votes() -> None:
    rng = np.random.default_rng(4)
    n = 60
    raw = rng.random((n, 3)) + 0.05
    proba = raw / raw.sum(axis=1, keepdims=True)
    outcome = rng.integers(0, 4, size=n).astype(np.int8)
    repeats = rng.integers(1, 4, size=n)
    weighted = score_system(
        "w", proba, outcome, train_loglik=-10.0, n_params=3, n_train=100, weight=repeats.astype(np.float64)
    )
    rows = np.repeat(np.arange(n), repeats)
    repeated = score_system("r", proba[rows], outcome[rows], train_loglik=-10.0, n_params=3, n_train=100)
    plain = score_system("p", proba, outcome, train_loglik=-10.0, n_params=3, n_train=100)
    for key in ("log_loss", "brier", "accuracy"):
        assert getattr(weighted, key) == pytest.approx(getattr(repeated, key), rel=1e-12), key
        assert getattr(weighted, key) != pytest.approx(getattr(plain, key), rel=1e-6), key
    # the paired comparison's per-vote losses average to the weighted log-loss
    assert float(np.mean(weighted.vote_losses)) == pytest.approx(weighted.log_loss, rel=1e-12)
