"""Seeded synthetic battles from known ratings, for tests, coverage studies and measurements."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from leaderboard.data import Outcome, PairCounts, aggregate_codes

__all__ = ["SimulatedBattles", "simulate_battles"]


@dataclass(frozen=True)
class SimulatedBattles:
    """Integer-coded battles with the ratings that generated them."""

    models: tuple[str, ...]
    true_rating: npt.NDArray[np.float64]
    model_a: npt.NDArray[np.int64]
    model_b: npt.NDArray[np.int64]
    outcome: npt.NDArray[np.int8]

    def counts(self) -> PairCounts:
        return aggregate_codes(self.model_a, self.model_b, self.outcome, models=self.models)


def simulate_battles(
    true_rating: npt.ArrayLike,
    n_votes: int,
    *,
    random_state: int | np.random.Generator = 0,
    tie_rate: float = 0.0,
    bothbad_share: float = 0.3,
    pair_skew: float = 0.0,
    scale: float = 400.0,
    base: float = 10.0,
) -> SimulatedBattles:
    """Draw battles under Bradley-Terry with ratings ``true_rating``.

    Parameters
    ----------
    true_rating : array, shape (M,)
    n_votes : int
    random_state : seed or Generator
    tie_rate : float
        Chance a battle is declared a tie before the BT draw (``bothbad_share`` of them both-bad).
        Ties shrink the expected score towards 1/2, so with ``tie_rate > 0`` the BT fit no longer
        targets ``true_rating`` exactly; coverage studies use 0.
    pair_skew : float
        0 draws pairs uniformly; larger values make pair frequencies log-normal with this sigma.
    """
    rng = np.random.default_rng(random_state)
    r = np.asarray(true_rating, dtype=np.float64)
    m = len(r)
    ii, jj = np.triu_indices(m, k=1)
    weight = np.ones(len(ii)) if pair_skew <= 0 else rng.lognormal(0.0, pair_skew, size=len(ii))
    pair = rng.choice(len(ii), size=n_votes, p=weight / weight.sum())
    flip = rng.random(n_votes) < 0.5
    a = np.where(flip, jj[pair], ii[pair]).astype(np.int64)
    b = np.where(flip, ii[pair], jj[pair]).astype(np.int64)
    p_a = 1.0 / (1.0 + np.exp((r[b] - r[a]) / scale * math.log(base)))
    u = rng.random(n_votes)
    outcome = np.where(u < p_a, Outcome.MODEL_A, Outcome.MODEL_B).astype(np.int8)
    if tie_rate > 0:
        tie = rng.random(n_votes) < tie_rate
        bad = rng.random(n_votes) < bothbad_share
        outcome = np.where(tie, np.where(bad, Outcome.BOTHBAD, Outcome.TIE), outcome).astype(np.int8)
    models = tuple(f"model-{k:03d}" for k in range(m))
    return SimulatedBattles(models=models, true_rating=r, model_a=a, model_b=b, outcome=outcome)
