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
(:func:`votes.reads.scans.load_battles`), so the arrays are always those of the row-by-row read.
"""

from __future__ import annotations

import threading
import warnings
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from sqlalchemy import Integer, Select, and_, bindparam, case, func, literal, select, type_coerce
from sqlalchemy.engine import Connection

from leaderboard.data import OUTCOME_STRINGS
from votes.tables import vote_t

__all__ = [
    "OUTCOME_WORDS",
    "FetchedTexts",
    "TIME_FORM",
    "TIME_SPAN",
    "TIME_WIDTH",
    "PackedCells",
    "PackedChunk",
    "PackedTexts",
    "RowsNeeded",
    "canonical_times",
    "packed_cells",
    "packed_chunks",
    "packed_texts",
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


def _outcome_digit(winner: Any) -> Any:
    """The outcome word's code as one digit (:data:`OUTCOME_WORDS`); NULL for any other word, so
    ``group_concat`` leaves it out and the text comes up short."""
    return case({word: literal(str(code)) for code, word in enumerate(OUTCOME_WORDS)}, value=winner)


class PackedTexts(NamedTuple):
    """What the database sends for one chunk of votes with ids in ``(after, last]``: their number, how
    many weigh exactly 1 on both weights, and the aggregated texts (see :func:`packed_texts`)."""

    after: int
    last: int
    n: int
    weighed_one: int
    texts: list[Any]

    def size(self) -> int:
        """About the bytes its texts hold (what a read fetched ahead counts against its budget)."""
        return sum(len(text) for text in self.texts if isinstance(text, str))


def packed_texts(conn: Connection, selected: Select[Any], *, who: bool, size: int) -> Iterator[PackedTexts]:
    """The database's part of :func:`packed_chunks`: each chunk's statement run and its texts returned
    as sent, not parsed. SQLite lets the interpreter lock go while it works, so a thread can fetch these
    while another imports or computes (:mod:`arena.publish.early_read`); an empty chunk is not yielded.

    ``selected`` has the filter's joins and conditions and, labelled, ``id``, ``model_a``, ``model_b``,
    ``winner``, ``time`` (the stored text), ``weight`` (the board's), ``own_weight`` (the vote's),
    ``sided`` and with ``who`` ``annotator`` and ``prompt`` (never NULL). A chunk is the votes with ids
    in ``(after, last]``, ``last`` the ``size``-th stored id after ``after`` (read off the primary key),
    aggregated by one statement over the same scan (no sorted subquery in between).

    The statement checks only the weights (a float's text would round it); every other column is
    checked where it is parsed, which costs the database nothing: a NULL is left out by
    ``group_concat`` and an unknown outcome word has no digit, so either shortens its text."""
    c = {column.name: getattr(column, "element", column) for column in selected.selected_columns}
    ids = [c["id"], c["model_a"], c["model_b"], *((c["annotator"], c["prompt"]) if who else ())]
    digit = _outcome_digit(c["winner"])
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
            yield PackedTexts(after, last, int(n), int(weighed_one or 0), texts)
        after = last


class FetchedTexts:
    """A packed scan's texts fetched ahead of their parsing: the first chunks by a thread while the
    process did something else (:meth:`fetch`, within a budget of bytes, so memory never holds a large
    store's texts), the rest of the same scan fetched as they are needed. ``key`` names the scan (its
    filter and columns), for the reader to check that the texts are those of the scan it would run.
    Read once: iterating gives the fetched texts (each let go as it is handed over), then the rest."""

    def __init__(self, key: object, texts: Iterator[PackedTexts]) -> None:
        self.key = key
        self._rest = texts
        self._fetched: deque[PackedTexts] = deque()
        self._used = False
        self.bytes = 0

    def fetch(self, stop: threading.Event, budget: int) -> None:
        """Fetch chunks until the scan ends, ``stop`` is set or ``budget`` bytes are held (each chunk
        ends before the next is looked at)."""
        while not stop.is_set() and self.bytes < budget:
            chunk = next(self._rest, None)
            if chunk is None:
                return
            self._fetched.append(chunk)
            self.bytes += chunk.size()

    @property
    def used(self) -> bool:
        """Whether the texts were handed over already (they are read once)."""
        return self._used

    def __iter__(self) -> Iterator[PackedTexts]:
        if self._used:
            raise RuntimeError("a scan fetched ahead is read once")
        self._used = True
        while self._fetched:
            yield self._fetched.popleft()
        yield from self._rest


def packed_chunks(
    conn: Connection,
    selected: Select[Any],
    *,
    who: bool,
    size: int,
    fetched: Iterable[PackedTexts] | None = None,
) -> Iterator[PackedChunk | RowsNeeded]:
    """The votes ``selected`` selects, chunk by chunk in vote-id order, about ``size`` votes a chunk
    (the statement and its chunks: :func:`packed_texts`). A chunk that does not qualify (see the
    module) comes back as its id range, to read row by row.

    ``fetched`` is that statement's texts fetched already (by a thread, while the process did something
    else: :mod:`arena.publish.early_read`), used instead of running it here; its caller answers for it being
    the texts of this very statement."""
    for chunk in packed_texts(conn, selected, who=who, size=size) if fetched is None else fetched:
        whole = chunk.weighed_one == chunk.n  # every weight 1, or the chunk is read row by row
        parsed = _parse(chunk.n, chunk.after, chunk.last, chunk.texts, who) if whole else None
        yield parsed if parsed is not None else RowsNeeded(chunk.after, chunk.last)


class PackedCells(NamedTuple):
    """The cells of a ``GROUP BY model_a, model_b, winner`` as arrays: the model ids, the outcome codes,
    each cell's vote number and the number of its votes without a known side (every weight was 1)."""

    model_a: npt.NDArray[np.int64]
    model_b: npt.NDArray[np.int64]
    outcome: npt.NDArray[np.int8]
    votes: npt.NDArray[np.int64]
    unsided: npt.NDArray[np.int64]


def packed_cells(conn: Connection, grouped: Select[Any]) -> PackedCells | None:
    """The rows of ``grouped`` (columns: the model ids, the outcome word, the number of votes, their
    summed weight, the number and summed weight of those without a known side, and summed squared
    weights, which equal the vote numbers when the weights do) aggregated once more
    into one row of texts, as :func:`packed_chunks` reads votes: tens of thousands of cells arrive as
    six strings, not as a row each (each row is a step of the database taken and given back the
    interpreter lock, what a thread reading beside busy work pays dearly for:
    :mod:`arena.publish.early_read`).

    None, for the caller to read the rows, unless every cell's summed weights equal its vote numbers
    (the counts are then whole numbers) and every text parses (a NULL id or an unknown outcome word
    shortens its text)."""
    sub = grouped.subquery()
    model_a, model_b, winner, votes, weight, unsided, unsided_weight, *_squares = sub.c
    digit = _outcome_digit(winner)
    plain = and_(weight == votes, unsided_weight == unsided)
    stmt = select(
        func.count(),
        func.sum(case((plain, 1), else_=0)),
        *(func.group_concat(column) for column in (model_a, model_b, votes, unsided)),
        func.group_concat(digit, ""),
    )
    n, plain_n, *texts = conn.execute(stmt).one()
    n = int(n)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return PackedCells(empty, empty, np.zeros(0, dtype=np.int8), empty, empty)
    if plain_n != n:
        return None
    columns = [_integers(text, n) for text in texts[:4]]
    outcome = _digits(texts[4], n, len(OUTCOME_WORDS))
    a, b, counted, side_less = columns
    if a is None or b is None or counted is None or side_less is None or outcome is None:
        return None
    return PackedCells(a, b, outcome.astype(np.int8), counted, side_less)


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
    numpy at once as :func:`votes.reads.scans.seconds_array` parses the same texts; None when numpy does not
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
