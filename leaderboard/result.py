"""The result type every fit hands on: what a snapshot, a page or a report needs, and nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Leaderboard"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Leaderboard:
    """A fitted leaderboard; arrays are aligned with ``models`` (in the order of the input counts).

    Attributes
    ----------
    models : tuple of str
    rating : ratings on the Elo scale (``400 * log10(strength) + 1000`` unless re-anchored)
    ci_low, ci_high : interval bounds at ``level``
    rank : 1 + number of models with a strictly higher rating
    rank_low, rank_high : best and worst rank within the interval (from bootstrap rounds, or derived)
    rank_ub : Chatbot Arena "rank upper bound": 1 + number of models whose ci_low > this ci_high
    battles : number of votes (summed weights) each model took part in
    win_rate : share of its battles a model won, ties counting half
    method : method name (``bt``, ``bt-position``, ``davidson``, ...)
    parameters : the options the fit was run with (level, rounds, seed, anchor, ...)
    parameters_fitted : fitted extra parameters, each ``{"value": x, "ci_low": l, "ci_high": h}``
    interval : how intervals were made: ``bootstrap``, ``sandwich`` or ``none``
    rounds : the bootstrap rounds' ratings (n_rounds x M), for the distribution plot; None without
    """

    models: tuple[str, ...]
    rating: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    rank: IntArray
    rank_low: IntArray
    rank_high: IntArray
    rank_ub: IntArray
    battles: FloatArray
    win_rate: FloatArray
    method: str
    parameters: dict[str, Any] = field(default_factory=dict)
    parameters_fitted: dict[str, dict[str, float]] = field(default_factory=dict)
    interval: str = "bootstrap"
    n_votes: float = 0.0
    rounds: FloatArray | None = field(default=None, compare=False, repr=False)

    def order(self) -> IntArray:
        """Indices of models from the highest rating down (ties broken by name, for stable output)."""
        names = np.asarray(self.models, dtype=object)
        order: IntArray = np.lexsort((names, -self.rating)).astype(np.int64)
        return order
