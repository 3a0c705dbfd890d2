"""The outcome vocabulary (OUTCOMES) and Battles -> PairCounts: everything downstream works on unique cells.

A leaderboard of a million votes among a hundred models has at most a few tens of thousands of distinct
(model_a, model_b, outcome) cells, so aggregating first makes every fit and bootstrap round cost
O(cells) instead of O(votes).

:data:`OUTCOMES` is the one place an outcome is spelled: its Chatbot Arena string, and the words, key and
meaning of its vote button, which the vote pages render from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "FEW_VOTES",
    "OUTCOMES",
    "OUTCOME_STRINGS",
    "Outcome",
    "OutcomeLabel",
    "OutcomeWords",
    "PairCounts",
    "PairStats",
    "aggregate_battles",
    "aggregate_codes",
    "collapse_pairs",
    "outcome_class",
    "parse_outcome",
]


class Outcome(IntEnum):
    """Vote outcomes, coded as small integers; the strings are the Chatbot Arena battle format."""

    MODEL_A = 0
    MODEL_B = 1
    TIE = 2
    BOTHBAD = 3

    @property
    def label(self) -> OutcomeLabel:
        return OUTCOME_STRINGS[self]


#: The four winner strings of the Chatbot Arena battle format, as a type (API schemas use it).
OutcomeLabel = Literal["model_a", "model_b", "tie", "tie (bothbad)"]


@dataclass(frozen=True)
class OutcomeWords:
    """How one outcome is written: in files and the API, and to the people who vote.

    Attributes
    ----------
    string : OutcomeLabel
        The Chatbot Arena battle format's winner string (files, the API, the ``vote.winner`` column).
    words : str
        What its vote button says.
    key : str
        Its single-key shortcut on the vote pages (lower case).
    meaning : str
        When to choose it, as the annotators' guidelines say.
    """

    string: OutcomeLabel
    words: str
    key: str
    meaning: str


#: The outcome vocabulary, one entry per outcome in the order of the vote buttons: everything that writes,
#: reads or shows an outcome takes its spelling from here.
OUTCOMES: dict[Outcome, OutcomeWords] = {
    Outcome.MODEL_A: OutcomeWords("model_a", "A is better", "a", "A is clearly the better answer."),
    Outcome.MODEL_B: OutcomeWords("model_b", "B is better", "b", "B is clearly the better answer."),
    Outcome.TIE: OutcomeWords("tie", "Tie", "t", "Both are good and about equally so."),
    Outcome.BOTHBAD: OutcomeWords("tie (bothbad)", "Both are bad", "x", "Neither answer is acceptable."),
}
OUTCOME_STRINGS: dict[Outcome, OutcomeLabel] = {outcome: words.string for outcome, words in OUTCOMES.items()}
_FROM_STRING: dict[str, Outcome] = {label: outcome for outcome, label in OUTCOME_STRINGS.items()}


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
    votes : float array or None, shape (n_cells,)
        Number of votes in each cell when ``count`` holds summed weights (``None``: ``count`` is the
        number of votes). The bootstrap resamples votes, so it needs both.
    sided : bool array or None, shape (n_cells,)
        Whether the cell's votes know which answer was shown on the left (``None``: all do). Sources
        that randomise the display order without recording it (AlpacaEval's annotators) give battles
        with an unknown side: they inform the ratings, never the left-side advantage.
    weight_sq : float array or None, shape (n_cells,)
        Sum of the squared vote weights in each cell, when ``count`` holds summed weights. The variance
        of a cell's contribution is a sum over its votes, so votes of unequal weight in one cell need it
        (``None``: each vote is taken at its cell's mean weight, see :attr:`squared_weights`).
    """

    models: tuple[str, ...]
    model_a: npt.NDArray[np.int64]
    model_b: npt.NDArray[np.int64]
    outcome: npt.NDArray[np.int8]
    count: npt.NDArray[np.float64]
    time: npt.NDArray[np.float64] | None = None
    votes: npt.NDArray[np.float64] | None = None
    sided: npt.NDArray[np.bool_] | None = None
    weight_sq: npt.NDArray[np.float64] | None = None

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def n_cells(self) -> int:
        return int(self.count.shape[0])

    @property
    def n_votes(self) -> float:
        """Number of votes (the raw number, also when ``count`` holds weights)."""
        return float(self.vote_counts.sum())

    @property
    def vote_counts(self) -> npt.NDArray[np.float64]:
        """Votes per cell: ``votes`` when weighted, else ``count``."""
        return self.count if self.votes is None else self.votes

    @property
    def is_weighted(self) -> bool:
        return self.votes is not None and not np.array_equal(self.votes, self.count)

    def model_votes(self) -> npt.NDArray[np.float64]:
        """Votes each model took part in (its side of every vote, raw numbers, not weights)."""
        votes = self.vote_counts
        m = self.n_models
        out = np.bincount(self.model_a, votes, m) + np.bincount(self.model_b, votes, m)
        return np.asarray(out, dtype=np.float64)

    @property
    def squared_weights(self) -> npt.NDArray[np.float64]:
        """Sum of the squared vote weights per cell: ``weight_sq`` when known, the vote count when
        unweighted, else ``count**2 / votes`` (every vote at its cell's mean weight: a lower bound, by
        Cauchy-Schwarz, so intervals made from it are too narrow when weights differ within a cell)."""
        if self.weight_sq is not None:
            return self.weight_sq
        if not self.is_weighted:
            return self.vote_counts
        votes = self.vote_counts
        out: npt.NDArray[np.float64] = np.divide(
            self.count**2, votes, out=np.zeros_like(votes), where=votes > 0
        )
        return out

    @property
    def weight_spread(self) -> npt.NDArray[np.float64]:
        """Variance of the vote weights within each cell, ``weight_sq / votes - (count / votes)**2``: 0
        where they are equal, or unknown (no ``weight_sq``); what a bootstrap round adds to a cell's
        weight total beyond its number of votes drawn."""
        votes = self.vote_counts
        if self.weight_sq is None:
            return np.zeros_like(votes)
        safe = np.where(votes > 0, votes, 1.0)
        mean = self.count / safe
        spread = self.weight_sq / safe - mean**2
        # Sums of equal weights leave rounding noise of a few ulps; below that it is no spread at all.
        spread[spread <= 1e-12 * mean**2] = 0.0
        return np.asarray(spread, dtype=np.float64)

    def same_as(self, other: PairCounts) -> bool:
        """Whether ``other`` holds the very same cells: same models, and every array present in both
        with the same type and values (what a board fitted on one would give on the other)."""
        if self.models != other.models:
            return False
        for name in ("model_a", "model_b", "outcome", "count", "time", "votes", "sided", "weight_sq"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if (mine is None) != (theirs is None):
                return False
            if mine is not None and (mine.dtype != theirs.dtype or not np.array_equal(mine, theirs)):
                return False
        return True


def aggregate_battles(
    model_a: Sequence[str] | npt.NDArray[np.str_] | npt.NDArray[np.object_],
    model_b: Sequence[str] | npt.NDArray[np.str_] | npt.NDArray[np.object_],
    winner: Sequence[str] | npt.ArrayLike,
    *,
    models: Sequence[str] | None = None,
    time: npt.ArrayLike | None = None,
    bucket_seconds: float | None = None,
    weight: npt.ArrayLike | None = None,
) -> PairCounts:
    """Aggregate battles given as model names and winner strings (or :class:`Outcome` codes).

    Names and winner strings are factorised with pandas (hash tables in C), so ten million battles
    take a few seconds rather than the minutes of a Python loop.

    Parameters
    ----------
    model_a, model_b : sequences of str
        Left and right model of each battle.
    winner : sequence of str or int
        Chatbot Arena winner strings, or :class:`Outcome` codes.
    models : sequence of str, optional
        The model order to use; by default the sorted set of names seen.
    time, bucket_seconds, weight :
        See :func:`aggregate_codes`.

    Returns
    -------
    PairCounts
    """
    import pandas as pd  # here, not at module top: the web app imports this module for parse_outcome

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
        w_codes, w_uniques = pd.factorize(w.astype(object), use_na_sentinel=True)
        if np.any(w_codes < 0):
            raise ValueError("winner contains missing values")
        lookup = np.array([parse_outcome(str(x)) for x in w_uniques], dtype=np.int8)
        codes = lookup[w_codes] if w_codes.size else np.zeros(0, dtype=np.int8)
    both = pd.Index(np.concatenate([a, b]))
    codes_ab, uniques = pd.factorize(both, use_na_sentinel=True)
    if np.any(codes_ab < 0):
        raise ValueError("model names contain missing values")
    seen = [str(x) for x in uniques]
    names = tuple(sorted(seen)) if models is None else tuple(models)
    index = {name: i for i, name in enumerate(names)}
    missing = [x for x in seen if x not in index]
    if missing:
        raise ValueError(f"model {missing[0]!r} is not in the given model list")
    remap = np.array([index[x] for x in seen], dtype=np.int64)
    coded = remap[codes_ab] if codes_ab.size else np.zeros(0, dtype=np.int64)
    ia, ib = coded[: a.size], coded[a.size :]
    return aggregate_codes(
        ia, ib, codes, models=names, time=time, bucket_seconds=bucket_seconds, weight=weight
    )


def aggregate_codes(
    model_a: npt.ArrayLike,
    model_b: npt.ArrayLike,
    outcome: npt.ArrayLike,
    *,
    models: Sequence[str],
    weight: npt.ArrayLike | None = None,
    time: npt.ArrayLike | None = None,
    bucket_seconds: float | None = None,
    sided: npt.ArrayLike | None = None,
) -> PairCounts:
    """Aggregate integer-coded battles into unique cells (the fast path; no Python loop per vote).

    Parameters
    ----------
    model_a, model_b : int arrays
        Indices into ``models``.
    outcome : int array
        :class:`Outcome` codes.
    models : sequence of str
    weight : float array, optional
        Per-vote weights; ``count`` then holds summed weights, ``votes`` the raw vote numbers and
        ``weight_sq`` the summed squared weights.
    time : float array, optional
        Per-vote timestamps (seconds since the epoch); with ``bucket_seconds`` the cells are split by
        time bucket (``floor(time / bucket_seconds) * bucket_seconds``) so time weights can be applied
        to counts later.
    bucket_seconds : float, optional
        Width of a time bucket; required when ``time`` is given.
    sided : bool array, optional
        Per-vote: is the left side known? Battles with and without a known side go to separate cells.

    Returns
    -------
    PairCounts
        Cells in lexicographic order of (model_a, model_b, outcome[, sided][, time bucket]).
    """
    n = len(models)
    ia = np.asarray(model_a, dtype=np.int64)
    ib = np.asarray(model_b, dtype=np.int64)
    oc = np.asarray(outcome)
    if not np.issubdtype(oc.dtype, np.integer):
        oc = oc.astype(np.int64)
    if not (ia.shape == ib.shape == oc.shape):
        raise ValueError("model_a, model_b and outcome must have the same length")
    if ia.size:
        if min(int(ia.min()), int(ib.min())) < 0 or max(int(ia.max()), int(ib.max())) >= n:
            raise ValueError("model index out of range")
        if int(oc.min()) < 0 or int(oc.max()) > 3:
            raise ValueError("outcome codes must be between 0 and 3")
        if np.any(ia == ib):
            raise ValueError("a model cannot battle itself")
    w = None if weight is None else np.asarray(weight, dtype=np.float64)
    if w is not None and w.shape != ia.shape:
        raise ValueError("weight must have one value per battle")
    # the cell of each vote, computed in place: ten million votes make one array of keys, not four
    key = ia * n
    key += ib
    key *= 4
    key += oc
    size = n * n * 4
    side: npt.NDArray[np.bool_] | None = None
    if sided is not None:
        side = np.asarray(sided, dtype=bool)
        if side.shape != ia.shape:
            raise ValueError("sided must have one value per battle")
        key *= 2
        key += side
        size *= 2
    bucket: npt.NDArray[np.float64] | None = None
    if time is not None:
        if bucket_seconds is None or bucket_seconds <= 0:
            raise ValueError("bucket_seconds must be a positive number when time is given")
        t = np.asarray(time, dtype=np.float64)
        if t.shape != ia.shape:
            raise ValueError("time must have one value per battle")
        b_index = np.floor(t / bucket_seconds).astype(np.int64)
        b_values, b_code = np.unique(b_index, return_inverse=True)
        key *= max(len(b_values), 1)
        key += b_code
        size *= max(len(b_values), 1)
        bucket = b_values.astype(np.float64) * bucket_seconds
    if size <= 50_000_000:
        votes_all = np.bincount(key, minlength=size)
        cells = np.flatnonzero(votes_all)
        votes = votes_all[cells].astype(np.float64)
        values = votes if w is None else np.bincount(key, weights=w, minlength=size)[cells]
        squares = None if w is None else np.bincount(key, weights=w * w, minlength=size)[cells]
    else:
        cells, inverse = np.unique(key, return_inverse=True)
        votes = np.bincount(inverse).astype(np.float64)
        values = votes if w is None else np.bincount(inverse, weights=w).astype(np.float64)
        squares = None if w is None else np.bincount(inverse, weights=w * w).astype(np.float64)
    cell_time: npt.NDArray[np.float64] | None = None
    if bucket is not None:
        n_buckets = len(bucket)
        cell_time = bucket[cells % n_buckets]
        cells = cells // n_buckets
    cell_sided: npt.NDArray[np.bool_] | None = None
    if side is not None:
        cell_sided = (cells % 2).astype(bool)
        cells = cells // 2
    out = cells % 4
    pair = cells // 4
    return PairCounts(
        models=tuple(models),
        model_a=(pair // n).astype(np.int64),
        model_b=(pair % n).astype(np.int64),
        outcome=out.astype(np.int8),
        count=np.asarray(values, dtype=np.float64),
        time=cell_time,
        votes=None if w is None else votes,
        sided=cell_sided,
        weight_sq=None if squares is None else np.asarray(squares, dtype=np.float64),
    )


@dataclass(frozen=True)
class PairStats:
    """Sufficient statistics of plain Bradley-Terry: per unordered pair, wins each way and ties.

    With a tie scored as half a win, the likelihood of plain BT depends on the cells only through these
    three numbers per pair ``lo < hi``; the side a model sat on does not enter. Both-bad counts as a tie.

    Attributes
    ----------
    n_models : int
    lo, hi : int arrays, shape (n_pairs,)
    wins_lo, wins_hi, ties : float arrays, shape (n_pairs,)
        Counts (summed weights when weighted).
    """

    n_models: int
    lo: npt.NDArray[np.int64]
    hi: npt.NDArray[np.int64]
    wins_lo: npt.NDArray[np.float64]
    wins_hi: npt.NDArray[np.float64]
    ties: npt.NDArray[np.float64]

    @property
    def n(self) -> npt.NDArray[np.float64]:
        """Battles per pair."""
        return self.wins_lo + self.wins_hi + self.ties

    @property
    def score_lo(self) -> npt.NDArray[np.float64]:
        """Score of the lower-indexed model: wins plus half the ties."""
        return self.wins_lo + 0.5 * self.ties


def outcome_class(
    counts: PairCounts,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Orient every cell as (lo, hi, class) with class 0 = lo wins, 1 = hi wins, 2 = tie or both-bad."""
    a, b, o = counts.model_a, counts.model_b, counts.outcome.astype(np.int64)
    lo = np.minimum(a, b)
    hi = np.maximum(a, b)
    a_won = o == Outcome.MODEL_A
    b_won = o == Outcome.MODEL_B
    lo_won = (a_won & (a == lo)) | (b_won & (b == lo))
    cls = np.where(lo_won, 0, np.where(a_won | b_won, 1, 2)).astype(np.int64)
    return lo, hi, cls


def collapse_pairs(counts: PairCounts, *, weighted: bool = True) -> PairStats:
    """Collapse cells to :class:`PairStats` (pairs with at least one battle, in (lo, hi) order).

    Parameters
    ----------
    weighted : bool
        Use ``count`` (summed weights); with ``False`` use the raw vote numbers.
    """
    n = counts.n_models
    lo, hi, cls = outcome_class(counts)
    values = counts.count if weighted else counts.vote_counts
    pair_key = lo * n + hi
    pairs, inverse = np.unique(pair_key, return_inverse=True)
    n_pairs = len(pairs)
    sums = np.bincount(inverse * 3 + cls, weights=values, minlength=3 * n_pairs).reshape(n_pairs, 3)
    return PairStats(
        n_models=n,
        lo=(pairs // n).astype(np.int64) if n else pairs.astype(np.int64),
        hi=(pairs % n).astype(np.int64) if n else pairs.astype(np.int64),
        wins_lo=sums[:, 0].astype(np.float64),
        wins_hi=sums[:, 1].astype(np.float64),
        ties=sums[:, 2].astype(np.float64),
    )


#: A model in fewer votes than this is not measured by its votes alone: its interval is at least the
#: model-based one (:func:`leaderboard.bt.intervals.few_vote_floor`) and a published board marks it
#: provisional (:mod:`leaderboard.design.precision`), as the live board does by default.
FEW_VOTES = 20
