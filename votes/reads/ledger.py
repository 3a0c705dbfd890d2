"""The vote ledger: the selected votes as one canonical CSV text the database writes, and its sha256.

A published snapshot names the votes it was fitted on by a sha256. Hashing the canonical JSONL export
(:func:`votes.reads.exports.votes_sha256`) meant building a Python dict and a JSON line per vote,
conversations included: 52 s for a million votes. The ledger holds what a vote *is* for a board (the two
models, the outcome, the judge, the time, the weight and whether the sides are known), and the database itself
formats each line (SQL string expressions), so Python only joins lines and hashes them in blocks.

The ledger is a valid Chatbot Arena battles CSV (``model_a,model_b,winner,judge,tstamp,weight,sided``,
text cells quoted, ``\\n`` line ends), so the check needs nothing but standard tools and this package:
``arena export ledger --out votes.csv && sha256sum votes.csv`` prints a snapshot's ``votes_sha256``,
and ``arena recompute --from votes.csv`` with the snapshot's options gives its data files again.
Text a spreadsheet would run gets a leading apostrophe, as in every CSV written here
(:mod:`leaderboard.spreadsheet`); the readers take it off again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from itertools import compress
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, Engine, Select, String, case, cast, func, literal, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from leaderboard.atomic import atomic_file
from votes.bulk import chunks, column_chunks
from votes.dialects import dialect_of
from votes.reads.filters import VoteFilter, filter_votes
from votes.reads.packed import TIME_FORM, canonical_times
from votes.reads.scans import StoredChunk
from votes.tables import annotator_t, model_t, vote_t

__all__ = ["LEDGER_COLUMNS", "LedgerDigest", "iter_ledger_blocks", "ledger_sha256", "write_ledger"]

LEDGER_COLUMNS = ("model_a", "model_b", "winner", "judge", "tstamp", "weight", "sided")
LEDGER_HEADER = ",".join(LEDGER_COLUMNS) + "\n"
# Lines fetched and hashed per block: large enough that the per-block cost vanishes, small enough that a
# block's Python strings stay a few megabytes.
_BLOCK = 50_000
# First characters a spreadsheet would run (leaderboard.spreadsheet's rule, written in SQL).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _connection(db: Session | Connection) -> Connection:
    return db.connection() if isinstance(db, Session) else db


def _text_cell(value: ColumnElement[Any]) -> ColumnElement[str]:
    """A quoted CSV cell: inner quotes doubled, an apostrophe before a formula start; NULL stays NULL."""
    escaped = case(
        (func.substr(value, 1, 1).in_(_FORMULA_STARTS), literal("'").concat(value)),
        else_=value,
    )
    return literal('"').concat(func.replace(escaped, '"', '""')).concat('"')


def _model_cells() -> Select[Any]:
    """Each model's id and its ledger cell."""
    return select(model_t.c.id, _text_cell(model_t.c.name).label("cell"))


def _judge_cells() -> Select[Any]:
    """Each annotator's id and its ledger cell (``annotator-<id>`` when it has no label)."""
    judge = func.coalesce(annotator_t.c.label, literal("annotator-").concat(cast(annotator_t.c.id, String)))
    return select(annotator_t.c.id, _text_cell(judge).label("cell"))


def _statement(conn: Connection, filters: VoteFilter | None) -> Select[Any]:
    """One text column, a ledger line per selected vote, in vote-id order.

    The model and judge cells are formatted once per model and annotator (materialised common table
    expressions), so the per-vote work is a few index look-ups and concatenations."""
    models = _model_cells().cte("ledger_models").prefix_with("MATERIALIZED")
    judges = _judge_cells().cte("ledger_judges").prefix_with("MATERIALIZED")
    model_a, model_b = models.alias("ledger_model_a"), models.alias("ledger_model_b")
    sided = case((vote_t.c.sided, literal("true")), else_=literal("false"))
    parts: list[ColumnElement[str]] = [
        model_a.c.cell,
        model_b.c.cell,
        # an outcome is one of four fixed words (checked on every write): quoted, never escaped
        literal('"').concat(vote_t.c.winner).concat('"'),
        func.coalesce(judges.c.cell, literal("")),
        dialect_of(conn).seconds_text(vote_t.c.created_at),
        cast(vote_t.c.weight, String),
        sided,
    ]
    line = parts[0]
    for part in parts[1:]:
        line = line.concat(",").concat(part)
    source = (
        vote_t.join(model_a, vote_t.c.model_a_id == model_a.c.id)
        .join(model_b, vote_t.c.model_b_id == model_b.c.id)
        .outerjoin(judges, vote_t.c.annotator_id == judges.c.id)
    )
    stmt = select(line.label("line")).select_from(source).order_by(vote_t.c.id)
    return filter_votes(stmt, filters)


def _blocks(db: Session | Connection, filters: VoteFilter | None) -> Iterator[tuple[bytes, int]]:
    """The header (no votes), then blocks of lines with the number of votes in each."""
    conn = _connection(db)
    yield LEDGER_HEADER.encode("utf-8"), 0
    for (lines,) in column_chunks(conn, _statement(conn, filters), size=_BLOCK):
        yield ("\n".join(lines) + "\n").encode("utf-8"), len(lines)


def iter_ledger_blocks(db: Session | Connection, filters: VoteFilter | None = None) -> Iterator[bytes]:
    """The ledger of the selected votes (vote-id order) as UTF-8 blocks: the header, then lines."""
    for block, _ in _blocks(db, filters):
        yield block


def ledger_sha256(db: Session | Connection, filters: VoteFilter | None = None) -> str:
    """sha256 of the selected votes' ledger, equal to ``sha256sum`` of :func:`write_ledger`'s file."""
    digest = hashlib.sha256()
    for block in iter_ledger_blocks(db, filters):
        digest.update(block)
    return digest.hexdigest()


def write_ledger(engine: Engine, out: str | Path, *, filters: VoteFilter | None = None) -> tuple[int, str]:
    """Write the ledger of the selected votes (aside, then renamed); returns (votes, sha256)."""
    digest = hashlib.sha256()
    votes = 0
    with engine.connect() as conn, atomic_file(Path(out), "wb") as handle:
        for block, n in _blocks(conn, filters):
            handle.write(block)
            digest.update(block)
            votes += n
    return votes, digest.hexdigest()


# The ledger built from the columns of a scan the board reads anyway (SQLite): what the database formats
# per vote in :func:`_statement` (the time as seconds, cells joined by commas) cost more than the scan.

_MICRO = 1_000_000
#: Microseconds at which SQLite's millisecond rounding (see :func:`_time_cells`) could go either way.
_HALF_MS_BEFORE_SECOND = 999_500
#: Ids below this are looked up in a dense table; others (never made by the database) one by one.
_DENSE_IDS = 1 << 22
#: Stored times whose ledger cell (``strftime('%s')`` and the digits after it) the database is asked
#: first: the rounding rule of :func:`_time_cells` is used only when it gives the database's answers.
_TIME_PROBES = (
    "1970-01-01 00:00:00.000000",
    "1970-01-02 00:00:59.999400",
    "1970-01-02 00:00:59.999600",
    "2000-02-29 23:59:59.999999",
    "2023-11-14 22:13:20.500000",
    "2100-03-01 12:34:56.789012",
)

#: Cells of many lines as the rows of one matrix, each cell's bytes followed by NUL bytes up to the
#: matrix's width: the lines are the rows of the pieces side by side with every NUL taken out (a ledger
#: holds none: a text with one is not formatted here).
_Piece = npt.NDArray[np.uint8]


class _NotCanonical(Exception):
    """A chunk the columns path does not format exactly as the database would: the ledger is then read
    with :func:`_statement` instead."""


class _Vocabulary:
    """Byte strings as the rows of one NUL-padded matrix, for cutting many lines out of few values at
    once."""

    def __init__(self) -> None:
        self._items: list[bytes] = []
        self._matrix = np.zeros((0, 1), dtype=np.uint8)

    def add(self, item: bytes) -> int:
        """The code of a new item (the matrix is rebuilt by the next :meth:`take`)."""
        if b"\0" in item:
            raise _NotCanonical("a text with a NUL byte")
        self._items.append(item)
        return len(self._items) - 1

    def take(self, codes: npt.NDArray[np.int64]) -> _Piece:
        if len(self._matrix) != len(self._items):
            width = max([1, *(len(item) for item in self._items)])
            self._matrix = np.zeros((len(self._items), width), dtype=np.uint8)
            for k, item in enumerate(self._items):
                self._matrix[k, : len(item)] = np.frombuffer(item, dtype=np.uint8)
        taken: _Piece = self._matrix[codes]
        return taken


class _Cells:
    """Ledger cells by stored id, each followed by a comma, read from the database as ids first appear;
    ``absent`` is the cell of an id without a row (None: such an id is not formatted here)."""

    def __init__(self, conn: Connection, cells: Select[Any], key: Any, absent: bytes | None) -> None:
        self._conn, self._cells, self._key, self._absent = conn, cells, key, absent
        self._vocabulary = _Vocabulary()
        self._dense = np.full(0, -1, dtype=np.int64)  # code by id + 1 (so -1, no id, has a place)

    def take(self, ids: npt.NDArray[np.int64]) -> _Piece:
        """The cells of ``ids``; -1 (no id) has the ``absent`` cell."""
        if not len(ids):
            return self._vocabulary.take(ids)
        if ids.min() < -1 or ids.max() >= _DENSE_IDS:
            raise _NotCanonical("an id outside the ids the database makes")
        if ids.max() + 2 > len(self._dense):
            grown = np.full(int(ids.max()) + 2, -1, dtype=np.int64)
            grown[: len(self._dense)] = self._dense
            self._dense = grown
        codes = self._dense[ids + 1]
        if np.any(codes < 0):
            self._add(np.unique(ids[codes < 0]).tolist())
            codes = self._dense[ids + 1]
        return self._vocabulary.take(codes)

    def _add(self, new: list[int]) -> None:
        found: dict[int, str] = {}
        for part in chunks(new, 500):
            stmt = self._cells.where(self._key.in_(part))
            found.update({int(i): str(cell) for i, cell in self._conn.execute(stmt)})
        if -1 in found:
            raise _NotCanonical("a row whose id is -1, the id that stands for none")
        for i in new:
            if i in found:
                cell = found[i].encode("utf-8") + b","
            elif self._absent is not None:
                cell = self._absent
            else:
                raise _NotCanonical(f"id {i} has no row")
            self._dense[i + 1] = self._vocabulary.add(cell)


def _time_cells(
    times: Sequence[Any] | npt.NDArray[np.uint8], micro: npt.NDArray[np.int64] | None
) -> tuple[_Piece, _Piece]:
    """The ``tstamp`` cell of stored SQLite times as SQLite writes it, ``strftime('%s') || '.' ||
    substr(time, 21, 6)``, and the comma after it, as two pieces (the seconds; ``.ffffff,``); ``micro``
    is the same times in microseconds since the epoch (as numpy read them).

    SQLite rounds a time to the millisecond before ``%s``, so ``.999500`` or more (strictly: more; at
    exactly ``.999500`` its floating point decides) counts as the next second. Only stored times in
    SQLite's canonical form (what SQLAlchemy writes) from 1970 on are formatted here."""
    n = len(times)
    if micro is None or len(micro) != n:  # numpy read them: every one is text
        raise _NotCanonical("a stored time is not text numpy read")
    if isinstance(times, np.ndarray):  # read packed: the texts as rows of bytes already
        if times.shape != (n, len(TIME_FORM)) or times.dtype != np.uint8:
            raise _NotCanonical("a stored time is not in SQLite's canonical form")
        chars = times
    else:
        if set(map(len, times)) != {len(TIME_FORM)}:
            raise _NotCanonical("a stored time is not in SQLite's canonical form")
        try:
            text = "".join(times).encode("ascii")
        except UnicodeEncodeError:
            raise _NotCanonical("a stored time is not in SQLite's canonical form") from None
        chars = np.frombuffer(text, dtype=np.uint8).reshape(n, len(TIME_FORM))
    if not canonical_times(chars):
        raise _NotCanonical("a stored time is not in SQLite's canonical form")
    part = micro % _MICRO
    if np.any(micro < 0) or np.any(part == _HALF_MS_BEFORE_SECOND):
        raise _NotCanonical("a time before 1970, or one SQLite's rounding may put either side")
    seconds = micro // _MICRO + (part > _HALF_MS_BEFORE_SECOND)
    width = len(str(int(seconds.max())))
    # numpy writes each whole number in decimal as str() does, NUL-padded to the width
    whole = seconds.astype(f"S{width}").view(np.uint8).reshape(n, width)
    fraction = np.empty((n, 8), dtype=np.uint8)
    fraction[:, 0], fraction[:, 7] = ord("."), ord(",")
    fraction[:, 1:7] = chars[:, 20:26]
    return whole, fraction


def _kept(chunk: StoredChunk, keep: npt.NDArray[np.bool_]) -> StoredChunk:
    """The votes of ``chunk`` that ``keep`` marks, each column in the form it came in."""

    def taken(values: Any) -> Any:
        return values[keep] if isinstance(values, np.ndarray) else list(compress(values, keep))

    return StoredChunk(
        chunk.model_a[keep],
        chunk.model_b[keep],
        chunk.annotator[keep],
        taken(chunk.winner),
        taken(chunk.time),
        None if chunk.micro is None else chunk.micro[keep],
        taken(chunk.weight),
        taken(chunk.sided),
    )


class LedgerDigest:
    """:func:`ledger_sha256` of the votes a scan reads anyway, built from that scan's chunks
    (:func:`votes.reads.scans.load_battles` hands them over), so publishing reads the votes once.

    The lines are cut out of each chunk with numpy: the model, judge, outcome, weight and side cells from
    small tables of bytes (the model and judge cells formatted by the database with the ledger
    statement's own expressions; each weight's text from the database's ``CAST``), the time's digits
    computed. What would not come out exactly as the database writes it (PostgreSQL, a stored time not
    in SQLite's canonical form or before 1970, a value of an unexpected type, a model without its row, a
    SQLite whose ``strftime`` disagrees on the probes) leaves the digest to :func:`ledger_sha256` (the
    ledger statement) on the same connection: the same sha256, one more read."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._digest = hashlib.sha256(LEDGER_HEADER.encode("utf-8"))
        self._dialect = dialect_of(conn)
        self._usable = self._dialect.times_stored_as_text and self._times_agree()
        self._models = _Cells(conn, _model_cells(), model_t.c.id, None)
        self._judges = _Cells(conn, _judge_cells(), annotator_t.c.id, b",")
        self._winners: dict[str, int] = {}
        self._winner_cells = _Vocabulary()
        self._weights: dict[int, int] = {}  # code by the weight's bits
        self._weight_cells = _Vocabulary()
        self._sides = _Vocabulary()
        self._sides.add(b"false\n")
        self._sides.add(b"true\n")

    def _times_agree(self) -> bool:
        probes = (self._dialect.seconds_text(literal(t)) for t in _TIME_PROBES)
        said = self._conn.execute(select(*probes)).one()
        micro = np.array(_TIME_PROBES, dtype="datetime64[us]").astype(np.int64)
        whole, fraction = _time_cells(_TIME_PROBES, micro)
        ours = [
            bytes(w[w != 0]).decode("ascii") + bytes(f[:7]).decode("ascii")
            for w, f in zip(whole, fraction, strict=True)
        ]
        return list(said) == ours

    def update(self, chunk: StoredChunk, keep: npt.NDArray[np.bool_] | None = None) -> None:
        """Add the ledger lines of a chunk of votes (in vote-id order); with ``keep``, of the votes it
        marks alone (so one scan of the votes hashes several boards, each its own votes)."""
        if keep is not None and not keep.all():
            if not keep.any():
                return
            chunk = _kept(chunk, keep)
        if not self._usable or not len(chunk.time):
            return
        try:
            self._digest.update(self._block(chunk))
        except _NotCanonical:
            self._usable = False

    def hexdigest(self, filters: VoteFilter | None) -> str:
        """The digest of every chunk given, or, when one could not be formatted here, the ledger read again
        with ``filters`` (the filter of the scan) on the same connection."""
        if self._usable:
            return self._digest.hexdigest()
        return ledger_sha256(self._conn, filters)

    def _winner_codes(self, winner: Sequence[Any] | npt.NDArray[np.object_]) -> npt.NDArray[np.int64]:
        """Each outcome's code among the outcome cells (written as stored, quoted: see :func:`_statement`)."""
        for value in set(winner) - self._winners.keys():
            if type(value) is not str:
                raise _NotCanonical("a stored outcome is not text")
            self._winners[value] = self._winner_cells.add(b'"' + value.encode("utf-8") + b'",')
        return np.fromiter(map(self._winners.__getitem__, winner), dtype=np.int64, count=len(winner))

    def _weight_codes(self, weight: Sequence[Any] | npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """Each weight's code among the weight cells, each distinct weight's text (by its bits) from the
        database's own ``CAST``. An array holds floats the scan checked were stored as floats."""
        if isinstance(weight, np.ndarray):
            if weight.dtype != np.float64:
                raise _NotCanonical("a stored weight is not a float")
        elif not all(type(w) is float for w in set(weight)):
            raise _NotCanonical("a stored weight is not a float")
        bits = np.asarray(weight, dtype=np.float64).view(np.int64)
        if len(bits) and np.all(bits == bits[0]):  # one weight (1 for every vote, most often)
            distinct, inverse = bits[:1], np.zeros(len(bits), dtype=np.int64)
        else:
            distinct, inverse = np.unique(bits, return_inverse=True)
        for value in set(distinct.tolist()) - self._weights.keys():
            number = float(np.array([value], dtype=np.int64).view(np.float64)[0])
            text = self._conn.execute(select(cast(literal(number), String))).scalar_one()
            self._weights[value] = self._weight_cells.add(str(text).encode("utf-8") + b",")
        codes = np.array([self._weights[v] for v in distinct.tolist()], dtype=np.int64)
        return codes[inverse.reshape(-1)]

    def _side_codes(self, sided: Sequence[Any] | npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """1 for a known side (any integer but 0, as SQL's ``CASE WHEN``), else 0. An array holds
        booleans the scan read from stored 0s and 1s."""
        if isinstance(sided, np.ndarray):
            if sided.dtype != np.bool_:
                raise _NotCanonical("a stored side is not an integer")
            return sided.astype(np.int64)
        if not all(type(v) is int for v in set(sided)):
            raise _NotCanonical("a stored side is not an integer")
        known: npt.NDArray[np.int64] = (np.array(sided, dtype=np.int64) != 0).astype(np.int64)
        return known

    def _block(self, chunk: StoredChunk) -> bytes:
        seconds, fraction = _time_cells(chunk.time, chunk.micro)
        pieces = [
            self._models.take(chunk.model_a),
            self._models.take(chunk.model_b),
            self._winner_cells.take(self._winner_codes(chunk.winner)),
            self._judges.take(chunk.annotator),
            seconds,
            fraction,
            self._weight_cells.take(self._weight_codes(chunk.weight)),
            self._sides.take(self._side_codes(chunk.sided)),
        ]
        lines = np.concatenate(pieces, axis=1)
        block: bytes = lines[lines != 0].tobytes()
        return block
