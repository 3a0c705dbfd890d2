"""How far a board is from being settled: provisional models and the votes still needed.

Published with each snapshot so that a new model (and its makers) can see where it stands: a model whose
interval is still wider than ``provisional_half_width``, or that is in fewer than ``provisional_votes``
votes, is provisional; for each neighbour pair in the
ranking, the votes (drawn as the votes so far were) that would separate the two at the board's level if
the fitted gap holds; and for the whole board, the votes until the mean interval half-width reaches a
target; and a fairness ledger: each model's share of the battles so far and the share the default
pairing policy would give it next. The estimates use the plain Bradley-Terry Fisher information of
:mod:`leaderboard.design.pairing`.

The votes needed are found by bisection, each step inverting a models x models information matrix (a
few hundred inversions for a hundred models); they run with one BLAS thread, since on a busy machine a
multi-threaded inversion of that size waits on its threads twenty times longer than it computes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from leaderboard.data import FEW_VOTES, PairCounts, collapse_pairs
from leaderboard.design.pairing import (
    PairDesign,
    adjacent_votes_needed,
    board_votes_needed,
    design_probabilities,
    fisher_information,
)
from leaderboard.result import Leaderboard

__all__ = ["board_precision"]


def _z(level: float) -> float:
    """Two-sided normal quantile for ``level`` (bisection on erf: no scipy.stats on this path)."""
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if math.erf(mid / math.sqrt(2.0)) < level:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def board_precision(
    leaderboard: Leaderboard,
    counts: PairCounts,
    *,
    provisional_half_width: float = 25.0,
    provisional_votes: int = FEW_VOTES,
    target_half_width: float = 15.0,
    level: float = 0.95,
    scale: float = 400.0,
) -> dict[str, Any]:
    """Provisional models (an interval wider than ``provisional_half_width``, or fewer than
    ``provisional_votes`` votes: one vote is not a measurement, whatever interval it gets) and votes
    needed, as a JSON-ready mapping (rating points on ``scale``)."""
    with threadpool_limits(limits=1, user_api="blas"):
        return _precision(
            leaderboard,
            counts,
            provisional_half_width=provisional_half_width,
            provisional_votes=provisional_votes,
            target_half_width=target_half_width,
            level=level,
            scale=scale,
        )


def _precision(
    leaderboard: Leaderboard,
    counts: PairCounts,
    *,
    provisional_half_width: float,
    provisional_votes: int,
    target_half_width: float,
    level: float,
    scale: float,
) -> dict[str, Any]:
    names = list(leaderboard.models)
    m = len(names)
    half = (np.asarray(leaderboard.ci_high) - np.asarray(leaderboard.ci_low)) / 2.0
    voted = dict(zip(counts.models, counts.model_votes(), strict=True))
    few = [voted.get(n, 0.0) < provisional_votes for n in names]
    out: dict[str, Any] = {
        "provisional_half_width": provisional_half_width,
        "provisional_votes": provisional_votes,
        "provisional": [
            n for n, h, f in zip(names, half, few, strict=True) if f or not h <= provisional_half_width
        ],
        "target_half_width": target_half_width,
        "level": level,
    }
    if m < 2:
        return {**out, "votes_needed_board": None, "votes_needed_adjacent": []}
    per_point = math.log(10.0) / scale
    theta = (
        np.asarray(leaderboard.rating, dtype=np.float64) - float(np.mean(leaderboard.rating))
    ) * per_point
    design = PairDesign.of(m)
    index = {name: k for k, name in enumerate(names)}
    stats = collapse_pairs(counts)
    votes = np.zeros((m, m))
    for lo, hi, n in zip(stats.lo, stats.hi, stats.n, strict=True):
        i, j = index.get(counts.models[lo]), index.get(counts.models[hi])
        if i is not None and j is not None:
            votes[min(i, j), max(i, j)] += n
    per_pair = votes[design.lo, design.hi]
    share = per_pair / per_pair.sum() if per_pair.sum() > 0 else np.full(len(design), 1.0 / len(design))
    info = fisher_information(design, theta, per_pair)
    z = _z(level)
    board = board_votes_needed(design, theta, info, share, half_width=target_half_width * per_point, z=z)
    design_probs = design_probabilities(theta, per_pair)
    sampling = np.zeros(m)
    np.add.at(sampling, design.lo, design_probs / 2.0)
    np.add.at(sampling, design.hi, design_probs / 2.0)
    battles = per_pair.sum()
    taken = np.zeros(m)
    np.add.at(taken, design.lo, per_pair)
    np.add.at(taken, design.hi, per_pair)
    order = np.argsort(-theta, kind="stable")
    adjacent = adjacent_votes_needed(design, theta, info, share, z=z)
    return {
        **out,
        "votes_needed_board": board,
        "votes_needed_adjacent": [
            {"upper": names[int(a)], "lower": names[int(b)], "votes": n}
            for a, b, n in zip(order[:-1], order[1:], adjacent, strict=True)
        ],
        # Fairness: each model's share of the battles so far (a battle counts half for each side) and
        # the share the default pairing policy would give it next.
        "ledger": [
            {
                "model": name,
                "battle_share": round(float(taken[k] / (2.0 * battles)), 6) if battles > 0 else 0.0,
                "sampling_share": round(float(sampling[k]), 6),
            }
            for k, name in enumerate(names)
        ],
    }
