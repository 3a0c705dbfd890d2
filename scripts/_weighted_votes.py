"""Votes whose weights differ within a cell, for the weighted scenarios of ``coverage_sim.py``: inverse
propensities of the shipped pairing policy, AlpacaEval's soft labels, honest weights of noisy annotators."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from leaderboard import simulate_battles
from leaderboard.battles import Battles
from leaderboard.data import Outcome
from leaderboard.design.pairing import DEFAULT_FLOOR, ELO_PER_NAT
from leaderboard.evaluation.simulate import simulate_adaptive_battles

POSITION = 50.0
NU = 0.5
DAY = 86_400.0
#: The honest weights of ``honest`` and ``time``: three quarters of the annotators plain, a quarter noisy.
HONESTY = np.concatenate([np.ones(150), np.linspace(0.1, 0.6, 50)])


def shipped_policy_battles(
    truth: np.ndarray,
    n_votes: int,
    rng: np.random.Generator,
    *,
    nu: float,
    position: float,
    n_annotators: int,
) -> Battles:
    """Votes whose pairs the shipped policy chose from the votes before them, weighted by inverse propensity
    (:func:`~leaderboard.evaluation.simulate.simulate_adaptive_battles` with ``shipped``: every 200 votes
    the plain fit of the votes so far gives the policy's pair probabilities for the next 200, with the
    site's floor ``DEFAULT_FLOOR``), each vote by one of ``n_annotators`` annotators drawn at random."""
    sim = simulate_adaptive_battles(
        truth,
        n_votes,
        random_state=rng,
        floor=DEFAULT_FLOOR,
        batch=200,
        nu=nu,
        position=position,
        shipped=True,
    )
    return replace(sim, annotator=rng.integers(0, n_annotators, n_votes).astype(np.int64))


def soft_label_battles(
    truth: np.ndarray, n_votes: int, rng: np.random.Generator, options: dict[str, Any]
) -> Battles:
    """Davidson votes of which half the decisive ones become soft labels, split into two weighted rows."""
    sim = simulate_battles(truth, n_votes, random_state=rng, position=POSITION, nu=NU, **options)
    u = (truth[sim.model_a] - truth[sim.model_b] + POSITION) / ELO_PER_NAT
    q = 1.0 / (1.0 + np.exp(-u))  # the model's chance that the left side wins, given no tie
    soft = (sim.outcome != Outcome.TIE) & (rng.random(n_votes) < 0.5)
    y = rng.beta(4.0 * q[soft], 4.0 * (1.0 - q[soft]))
    idx = np.concatenate([np.arange(n_votes), np.flatnonzero(soft)])
    outcome = sim.outcome.copy()
    outcome[soft] = Outcome.MODEL_A
    extra = np.full(int(soft.sum()), Outcome.MODEL_B, dtype=np.int8)
    weight = np.ones(n_votes)
    weight[soft] = y
    assert sim.annotator is not None and sim.prompt is not None
    return Battles(
        models=sim.models,
        model_a=sim.model_a[idx],
        model_b=sim.model_b[idx],
        outcome=np.concatenate([outcome, extra]),
        time=sim.times()[idx],
        annotator=sim.annotator[idx],
        prompt=sim.prompt[idx],
        weight=np.concatenate([weight, 1.0 - y]),
    )


def honest_battles(truth: np.ndarray, n_votes: int, rng: np.random.Generator, copies: int = 1) -> Battles:
    """Votes of :data:`HONESTY`'s annotators (``copies`` times as many), noisy ones down-weighted, over
    ten days."""
    honesty = np.tile(HONESTY, copies)
    sim = simulate_battles(
        truth, n_votes, random_state=rng, n_annotators=len(honesty), annotator_discrimination=honesty
    )
    assert sim.annotator is not None
    return Battles(
        models=sim.models,
        model_a=sim.model_a,
        model_b=sim.model_b,
        outcome=sim.outcome,
        time=sim.times() * 10 * DAY,
        annotator=sim.annotator,
        weight=honesty[sim.annotator],
    )
