"""Battles -> PairCounts: everything downstream works on unique cells with counts.

A leaderboard of a million votes among a hundred models has at most a few tens of thousands of distinct
(model_a, model_b, outcome) cells, so aggregating first makes every fit and bootstrap round cost
O(cells) instead of O(votes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

__all__ = [
    "OUTCOME_STRINGS",
    "Outcome",
    "PairCounts",
    "aggregate_battles",
    "parse_outcome",
]


class Outcome(IntEnum):
    """Vote outcomes, coded as small integers; the strings are the Chatbot Arena battle format."""

    MODEL_A = 0
    MODEL_B = 1
    TIE = 2
    BOTHBAD = 3

    @property
    def label(self) -> str:
        return OUTCOME_STRINGS[self]


OUTCOME_STRINGS: dict[Outcome, str] = {
    Outcome.MODEL_A: "model_a",
    Outcome.MODEL_B: "model_b",
    Outcome.TIE: "tie",
    Outcome.BOTHBAD: "tie (bothbad)",
}
_FROM_STRING = {label: outcome for outcome, label in OUTCOME_STRINGS.items()}


def parse_outcome(value: str) -> Outcome:
    """Map a Chatbot Arena winner string to an :class:`Outcome`.

    Raises
    ------
    ValueError
        If ``value`` is not one of ``model_a``, ``model_b``, ``tie``, ``tie (bothbad)``.
    """
    try:
        return _FROM_STRING[value]
    except (KeyError, TypeError):
        allowed = ", ".join(repr(s) for s in _FROM_STRING)
        raise ValueError(f"unknown winner {value!r}; expected one of {allowed}") from None


@dataclass(frozen=True)
class PairCounts:
    """Aggregated battles: one row per unique (model_a, model_b, outcome[, time bucket]) cell.

    Attributes
    ----------
    models : tuple of str
        Model names; ``model_a`` and ``model_b`` index into it.
    model_a, model_b : int arrays, shape (n_cells,)
        Left and right model of each cell.
    outcome : int8 array, shape (n_cells,)
        :class:`Outcome` codes.
    count : float array, shape (n_cells,)
        Number of votes (or summed vote weights) in each cell.
    time : float array or None, shape (n_cells,)
        Time bucket of each cell (seconds since the epoch), when aggregated by time.
    """

    models: tuple[str, ...]
    model_a: npt.NDArray[np.int64]
    model_b: npt.NDArray[np.int64]
    outcome: npt.NDArray[np.int8]
    count: npt.NDArray[np.float64]
    time: npt.NDArray[np.float64] | None = None

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def n_cells(self) -> int:
        return int(self.count.shape[0])

    @property
    def n_votes(self) -> float:
        return float(self.count.sum())


def aggregate_battles(
    model_a: Sequence[str] | npt.NDArray[np.str_] | npt.NDArray[np.object_],
    model_b: Sequence[str] | npt.NDArray[np.str_] | npt.NDArray[np.object_],
    winner: Sequence[str] | npt.ArrayLike,
    *,
    models: Sequence[str] | None = None,
) -> PairCounts:
    """Aggregate battles given as model names and winner strings (or :class:`Outcome` codes).

    Parameters
    ----------
    model_a, model_b : sequences of str
        Left and right model of each battle.
    winner : sequence of str or int
        Chatbot Arena winner strings, or :class:`Outcome` codes.
    models : sequence of str, optional
        The model order to use; by default the sorted set of names seen.

    Returns
    -------
    PairCounts
    """
    a = np.asarray(model_a, dtype=object)
    b = np.asarray(model_b, dtype=object)
    w = np.asarray(winner)
    if not (a.shape == b.shape == w.shape):
        raise ValueError("model_a, model_b and winner must have the same length")
    if w.dtype.kind in "iu":
        codes = w.astype(np.int8)
        if codes.size and (codes.min() < 0 or codes.max() > 3):
            raise ValueError("outcome codes must be between 0 and 3")
    else:
        codes = np.fromiter((parse_outcome(str(x)) for x in w), dtype=np.int8, count=w.size)
    names = tuple(sorted(set(a.tolist()) | set(b.tolist()))) if models is None else tuple(models)
    index = {name: i for i, name in enumerate(names)}
    try:
        ia = np.fromiter((index[x] for x in a), dtype=np.int64, count=a.size)
        ib = np.fromiter((index[x] for x in b), dtype=np.int64, count=b.size)
    except KeyError as exc:
        raise ValueError(f"model {exc.args[0]!r} is not in the given model list") from None
    if np.any(ia == ib):
        raise ValueError("a model cannot battle itself")
    return aggregate_codes(ia, ib, codes, models=names)


def aggregate_codes(
    model_a: npt.NDArray[np.integer],
    model_b: npt.NDArray[np.integer],
    outcome: npt.NDArray[np.integer],
    *,
    models: Sequence[str],
    weight: npt.NDArray[np.floating] | None = None,
) -> PairCounts:
    """Aggregate integer-coded battles into unique cells (the fast path; no Python loop per vote)."""
    n = len(models)
    key = (np.asarray(model_a, dtype=np.int64) * n + np.asarray(model_b, dtype=np.int64)) * 4 + np.asarray(
        outcome, dtype=np.int64
    )
    size = n * n * 4
    if size <= 50_000_000:
        counts = np.bincount(key, weights=weight, minlength=size)
        cells = np.flatnonzero(counts)
        values = counts[cells].astype(np.float64)
    else:
        cells, inverse = np.unique(key, return_inverse=True)
        values = np.bincount(inverse, weights=weight).astype(np.float64)
    out = cells % 4
    pair = cells // 4
    return PairCounts(
        models=tuple(models),
        model_a=(pair // n).astype(np.int64),
        model_b=(pair % n).astype(np.int64),
        outcome=out.astype(np.int8),
        count=values,
    )
