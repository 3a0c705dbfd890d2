"""SQLite votes read a chunk at a time as a few long texts numpy parses, not as one Python row per vote.

The driver builds a tuple and a Python object per value for every row it hands over: for a million
votes of nine columns that was most of publishing's store scan (about 2 s of it, the database's own
work a tenth of that). Aggregated with ``group_concat`` over a chunk of votes in vote-id order, the same
columns arrive as a dozen strings per hundred thousand votes: the integers comma-separated, the outcome
and the side one digit per vote, the stored times back to back (26 characters each); numpy parses them
in milliseconds.

Only what such texts carry exactly is read this way: every id an integer, the outcome one of the
four words, the stored time in SQLite's canonical form, the side 0 or 1, the weights exactly 1 (a
weight's text would round it). Anything else, or texts that do not give back the chunk's own number of
votes in increasing id order, yields :class:`RowsNeeded` and the caller reads those votes row by row
(:func:`votes.queries.load_battles`), so the arrays are always those of the row-by-row read.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from sqlalchemy import Integer, Select, and_, bindparam, case, func, literal, select, type_coerce
from sqlalchemy.engine import Connection

from leaderboard.data import OUTCOME_STRINGS
from votes.tables import vote_t

__all__ = [
    "OUTCOME_WORDS",
    "TIME_FORM",
    "TIME_SPAN",
    "TIME_WIDTH",
    "PackedChunk",
    "RowsNeeded",
    "canonical_times",
    "packed_chunks",
    "time_micro",
]

#: The stored outcome words by their code (the digit each vote's outcome is sent as).
OUTCOME_WORDS: tuple[str, ...] = tuple(OUTCOME_STRINGS[code] for code in sorted(OUTCOME_STRINGS))
#: A time as SQLAlchemy stores it in SQLite, ``YYYY-MM-DD HH:MM:SS.ffffff``: ``0`` where any digit may
#: stand.
TIME_FORM = np.frombuffer(b"0000-00-00 00:00:00.000000", dtype=np.uint8)
#: How far above :data:`TIME_FORM` each character may be (9 over a digit, 0 over the marks).
TIME_SPAN = np.where(TIME_FORM == ord("0"), 9, 0).astype(np.uint8)
TIME_WIDTH = len(TIME_FORM)
#: Below every id: the first chunk starts after it.
_BEFORE_ALL = -(2**63)


class PackedChunk(NamedTuple):
    """A chunk of votes in vote-id order, parsed from the statement's texts.

    ``time_chars`` is each vote's stored time text as a row of ``TIME_WIDTH`` bytes; ``outcome`` the
    code of each vote's outcome word (:data:`OUTCOME_WORDS`); ``annotator`` and ``prompt`` (-1 for none)
    are None unless the statement selected them. Every weight of the chunk is 1."""

    vote_id: npt.NDArray[np.int64]
    model_a: npt.NDArray[np.int64]
    model_b: npt.NDArray[np.int64]
    outcome: npt.NDArray[np.int8]
    time_chars: npt.NDArray[np.uint8]
    sided: npt.NDArray[np.bool_]
    annotator: npt.NDArray[np.int64] | None
    prompt: npt.NDArray[np.int64] | None


class RowsNeeded(NamedTuple):
    """The votes with ids in ``(after, last]`` (under the same filter) were not read packed."""

    after: int
    last: int


def packed_chunks(
    conn: Connection, selected: Select[Any], *, who: bool, size: int
) -> Iterator[PackedChunk | RowsNeeded]:
    """The votes ``selected`` selects, chunk by chunk in vote-id order, about ``size`` votes a chunk.

    ``selected`` has the filter's joins and conditions and, labelled, ``id``, ``model_a``, ``model_b``,
    ``winner``, ``time`` (the stored text), ``weight`` (the board's), ``own_weight`` (the vote's),
    ``sided`` and with ``who`` ``annotator`` and ``prompt`` (never NULL). A chunk is the votes with ids
    in ``(after, last]``, ``last`` the ``size``-th stored id after ``after`` (read off the primary key),
    aggregated by one statement over the same scan (no sorted subquery in between); one that does not
    qualify (see the module) comes back as its id range, to read row by row.

    The statement checks only the weights (a float's text would round it); every other column is
    checked where it is parsed, which costs the database nothing: a NULL is left out by
    ``group_concat`` and an unknown outcome word has no digit, so either shortens its text."""
    c = {column.name: getattr(column, "element", column) for column in selected.selected_columns}
    ids = [c["id"], c["model_a"], c["model_b"], *((c["annotator"], c["prompt"]) if who else ())]
    digit = case({word: literal(str(code)) for code, word in enumerate(OUTCOME_WORDS)}, value=c["winner"])
    stmt = selected.where(vote_t.c.id > bindparam("after"), vote_t.c.id <= bindparam("last"))
    stmt = stmt.with_only_columns(
        func.count(),
        func.sum(case((and_(c["weight"] == 1.0, c["own_weight"] == 1.0), 1), else_=0)),
        *(func.group_concat(column) for column in ids),
        func.group_concat(digit, ""),
        func.group_concat(c["time"], ","),
        func.group_concat(type_coerce(c["sided"], Integer), ""),
    )
    bound = select(vote_t.c.id).where(vote_t.c.id > bindparam("after")).order_by(vote_t.c.id)
    bound = bound.offset(size - 1).limit(1)
    top = conn.execute(select(func.max(vote_t.c.id))).scalar()
    after = _BEFORE_ALL
    while top is not None and after < top:
        found = conn.execute(bound, {"after": after}).scalar()
        last = int(top if found is None else found)
        n, weighed_one, *texts = conn.execute(stmt, {"after": after, "last": last}).one()
        if n:
            parsed = _parse(int(n), after, last, texts, who) if weighed_one == n else None
            yield parsed if parsed is not None else RowsNeeded(after, last)
        after = last


def _bytes(text: Any) -> npt.NDArray[np.uint8] | None:
    if not isinstance(text, str) or not text.isascii():
        return None
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8)


def _integers(text: Any, n: int) -> npt.NDArray[np.int64] | None:
    """``n`` comma-separated integers, or None unless the text is exactly that: each field an optional
    minus and 1 to 18 digits (numpy's own reader would take blanks as 0 and saturate on overflow)."""
    raw = _bytes(text)
    if raw is None:
        return None
    commas = np.flatnonzero(raw == ord(","))
    if len(commas) != n - 1:
        return None
    starts = np.concatenate([[0], commas + 1])
    lengths = np.diff(np.concatenate([starts, [len(raw) + 1]])) - 1
    minus = raw == ord("-")
    signed = minus[np.minimum(starts, len(raw) - 1)] if len(raw) else np.zeros(n, dtype=np.bool_)
    digits = (raw >= ord("0")) & (raw <= ord("9"))
    if (
        np.count_nonzero(digits) + np.count_nonzero(minus) + len(commas) != len(raw)
        or np.count_nonzero(minus) != np.count_nonzero(signed)  # a minus only where a field starts
        or np.any(lengths - signed < 1)
        or np.any(lengths - signed > 18)
    ):
        return None
    return np.fromstring(text, dtype=np.int64, sep=",")


def _digits(text: Any, n: int, below: int) -> npt.NDArray[np.uint8] | None:
    """``n`` one-digit values, each less than ``below``."""
    raw = _bytes(text)
    if raw is None or len(raw) != n:
        return None
    values = raw - np.uint8(ord("0"))  # unsigned: a character below "0" wraps above every digit
    return None if np.any(values >= below) else values


def canonical_times(chars: npt.NDArray[np.uint8]) -> bool:
    """Every row of ``chars`` is a time in SQLite's canonical form (digits and marks where
    :data:`TIME_FORM` has them)."""
    return chars.ndim == 2 and chars.shape[1] == TIME_WIDTH and not np.any(chars - TIME_FORM > TIME_SPAN)


def _times(text: Any, n: int) -> npt.NDArray[np.uint8] | None:
    """``n`` comma-separated times in canonical form as an ``(n, TIME_WIDTH)`` byte matrix: a comma
    after every time and none inside one (the form has none), so each time is exactly that long."""
    raw = _bytes(text)
    if raw is None or len(raw) != n * (TIME_WIDTH + 1) - 1:
        return None
    rows = np.append(raw, np.uint8(ord(","))).reshape(n, TIME_WIDTH + 1)
    if np.any(rows[:, TIME_WIDTH] != ord(",")) or not canonical_times(rows[:, :TIME_WIDTH]):
        return None
    return np.ascontiguousarray(rows[:, :TIME_WIDTH])


def _parse(n: int, after: int, last: int, texts: list[Any], who: bool) -> PackedChunk | None:
    n_ids = 5 if who else 3
    columns = [_integers(text, n) for text in texts[:n_ids]]
    outcome = _digits(texts[n_ids], n, len(OUTCOME_WORDS))
    times = _times(texts[n_ids + 1], n)
    sides = _digits(texts[n_ids + 2], n, 2)
    if outcome is None or times is None or sides is None or any(x is None for x in columns):
        return None
    vote_id, model_a, model_b, *who_ids = (column for column in columns if column is not None)
    # the texts follow the chunk's order only if the ids come back increasing, within the chunk's range
    if vote_id[0] <= after or vote_id[-1] > last or np.any(np.diff(vote_id) <= 0):
        return None
    return PackedChunk(
        vote_id,
        model_a,
        model_b,
        outcome.astype(np.int8),
        times,
        sides.astype(np.bool_),
        who_ids[0] if who else None,
        who_ids[1] if who else None,
    )


def time_micro(chars: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64] | None:
    """Stored time texts (rows of :data:`TIME_WIDTH` bytes) in microseconds since the epoch, parsed by
    numpy at once as :func:`votes.queries.seconds_array` parses the same texts; None when numpy does not
    read one of them exactly."""
    if chars.ndim != 2 or chars.shape[1] != TIME_WIDTH:
        return None
    texts = np.ascontiguousarray(chars).view(f"S{TIME_WIDTH}").reshape(-1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            micro: npt.NDArray[np.int64] = texts.astype("datetime64[us]").astype(np.int64)
        return micro
    except (ValueError, Warning):
        return None
