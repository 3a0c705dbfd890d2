"""Builders for snapshot and plot tests: seeded battles and a hand-made Leaderboard (no fit needed)."""

from __future__ import annotations

import numpy as np

from leaderboard.data import PairCounts, aggregate_battles
from leaderboard.result import Leaderboard


def simulated_counts(n_models: int = 6, n_votes: int = 3000, seed: int = 7) -> PairCounts:
    """Battles among ``n_models`` models of spread-out strength, with some ties."""
    rng = np.random.default_rng(seed)
    strength = np.linspace(1300.0, 900.0, n_models)
    names = [f"model-{i:03d}" for i in range(n_models)]
    a = rng.integers(0, n_models, n_votes)
    b = (a + rng.integers(1, n_models, n_votes)) % n_models
    p = 1.0 / (1.0 + 10.0 ** ((strength[b] - strength[a]) / 400.0))
    u = rng.random(n_votes)
    winner = np.where(u < 0.1, "tie", np.where(u < 0.1 + 0.9 * p, "model_a", "model_b"))
    return aggregate_battles([names[i] for i in a], [names[i] for i in b], winner.tolist())


def handmade_leaderboard(counts: PairCounts, *, spread: float = 20.0) -> Leaderboard:
    """Ratings from win rates (monotone, deterministic): enough for exercising files and plots."""
    n = counts.n_models
    battles = np.zeros(n)
    points = np.zeros(n)
    score = np.where(counts.outcome == 0, 1.0, np.where(counts.outcome == 1, 0.0, 0.5))
    np.add.at(battles, counts.model_a, counts.count)
    np.add.at(battles, counts.model_b, counts.count)
    np.add.at(points, counts.model_a, counts.count * score)
    np.add.at(points, counts.model_b, counts.count * (1.0 - score))
    win_rate = points / battles
    shrunk = (points + 1.0) / (battles + 2.0)
    rating = 1000.0 + 400.0 * np.log10(shrunk / (1.0 - shrunk))
    low, high = rating - spread, rating + spread
    rank = np.array([1 + int(np.sum(rating > r)) for r in rating], dtype=np.int64)
    rank_ub = np.array([1 + int(np.sum(low > h)) for h in high], dtype=np.int64)
    rank_low = np.array([1 + int(np.sum(low > h)) for h in high], dtype=np.int64)
    rank_high = np.array([int(np.sum(high >= lo)) for lo in low], dtype=np.int64)
    return Leaderboard(
        models=counts.models,
        rating=rating,
        ci_low=low,
        ci_high=high,
        rank=rank,
        rank_low=rank_low,
        rank_high=rank_high,
        rank_ub=rank_ub,
        battles=battles,
        win_rate=win_rate,
        method="bt",
        parameters={"level": 0.95, "n_rounds": 100, "random_state": 1},
        parameters_fitted={"position_advantage": {"value": 12.5, "ci_low": 8.0, "ci_high": 17.0}},
        n_votes=counts.n_votes,
    )
