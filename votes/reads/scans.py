"""Every selected vote read as arrays, in vote-id order, chunk by chunk: for the fits that need each vote
(Elo replays, time weights, clustered intervals, held-out splits) and the style covariates beside them.

:func:`load_battles` streams the votes straight into arrays, so memory follows the arrays, not one
Python row per vote; SQLite hands each chunk packed in a few texts (:mod:`votes.reads.packed`), which a
thread may fetch ahead (:func:`packed_scan`). Each chunk can be seen as stored (:class:`StoredChunk`) by
what else needs the same votes (the ledger's digest), so they are read once. Stored times are parsed by
numpy at once (:func:`seconds_array`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from sqlalchemy import Select, func, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from leaderboard.battles import Battles
from leaderboard.data import parse_outcome
from votes.bulk import column_chunks
from votes.dialects import dialect_of
from votes.reads.cells import index_models
from votes.reads.filters import (
    VoteFilter,
    check_propensities,
    filter_from,
    filter_votes,
    unit_mean_scale,
    weighted_votes,
)
from votes.reads.packed import (
    OUTCOME_WORDS,
    FetchedTexts,
    RowsNeeded,
    packed_chunks,
    packed_texts,
    time_micro,
)
from votes.tables import battle_t, generation_t, output_t, vote_t

__all__ = [
    "SCAN_CHUNK",
    "StoredChunk",
    "iter_vote_texts",
    "load_battles",
    "packed_scan",
    "seconds_array",
    "vote_seconds",
    "vote_time",
    "votes_name_annotators",
]


class StoredChunk(NamedTuple):
    """What :func:`load_battles` hands its ``each_chunk``: a chunk of votes, in vote-id order, as stored.

    The model and annotator ids as arrays (annotator -1 for none); the outcome, time, weight (the vote's
    own, whatever weighting the filter asks) and side as the driver gave them; ``micro`` the times in
    microseconds since the epoch as :func:`seconds_array` read them (None where it read them one by one).
    A chunk SQLite handed packed (:mod:`votes.reads.packed`) has its stored time texts as rows of bytes,
    its weights (all 1) as floats and its sides as booleans, in arrays.
    """

    model_a: npt.NDArray[np.int64]
    model_b: npt.NDArray[np.int64]
    annotator: npt.NDArray[np.int64]
    winner: Sequence[Any] | npt.NDArray[np.object_]
    time: Sequence[Any] | npt.NDArray[np.uint8]
    micro: npt.NDArray[np.int64] | None
    weight: Sequence[Any] | npt.NDArray[np.float64]
    sided: Sequence[Any] | npt.NDArray[np.bool_]


#: Rows per fetch of a streamed row-by-row read.
_STREAM = 2000
#: Votes per chunk of a scan (the arrays of one chunk, or one packed read of SQLite's).
SCAN_CHUNK = 100_000
#: Each outcome code's stored word, to hand a packed chunk's outcomes over as stored.
_OUTCOME_WORDS = np.array(OUTCOME_WORDS, dtype=object)


def _connection(db: Session | Connection) -> Connection:
    return db.connection() if isinstance(db, Session) else db


class _Scan(NamedTuple):
    """The columns :func:`load_battles` reads, and the votes (joined as the filter needs) they come from."""

    columns: list[ColumnElement[Any]]
    votes: Any  # the FROM clause: the votes, joined
    own_weight: int  # the position of the vote's own weight among the columns (the board's when equal)


def _scan(conn: Connection, f: VoteFilter, who: bool) -> _Scan:
    weight, votes = weighted_votes(f)
    columns: list[ColumnElement[Any]] = [
        vote_t.c.id.label("id"),
        vote_t.c.model_a_id.label("model_a"),
        vote_t.c.model_b_id.label("model_b"),
        vote_t.c.winner.label("winner"),
        vote_time(conn).label("time"),
        weight.label("weight"),
        vote_t.c.sided.label("sided"),
    ]
    if who:
        columns += [
            func.coalesce(vote_t.c.annotator_id, -1).label("annotator"),
            func.coalesce(battle_t.c.prompt_id, -1).label("prompt"),
        ]
        # the battle is joined only for who: the plain read stays on the vote rows
        votes = votes.join(battle_t, vote_t.c.battle_id == battle_t.c.id)
    # the vote's own weight, what the ledger holds, when the filter weighs votes otherwise
    own_weight = len(columns) if weight is not vote_t.c.weight else 5
    if own_weight != 5:
        columns.append(vote_t.c.weight.label("own_weight"))
    return _Scan(columns, votes, own_weight)


def _packed_statement(f: VoteFilter, scan: _Scan, who: bool) -> Select[Any]:
    """The statement of SQLite's packed read (:func:`votes.reads.packed.packed_chunks`) of ``scan``."""
    columns = scan.columns
    if scan.own_weight == 5:
        columns = [*columns, vote_t.c.weight.label("own_weight")]
    return filter_votes(select(*columns).select_from(scan.votes), f, battle_joined=who)


def packed_scan(conn: Connection, filters: VoteFilter, *, who: bool = False) -> FetchedTexts | None:
    """The texts of the scan :func:`load_battles` runs on SQLite for ``filters`` and ``who``, not
    fetched yet: what a thread fetches ahead (:meth:`~votes.reads.packed.FetchedTexts.fetch`) and
    ``load_battles(..., fetched=...)`` then parses. None on another database (read row by row)."""
    if not dialect_of(conn).packs_scans:
        return None
    selected = _packed_statement(filters, _scan(conn, filters, who), who)
    return FetchedTexts((filters, who), packed_texts(conn, selected, who=who, size=SCAN_CHUNK))


def load_battles(
    db: Session | Connection,
    *,
    category: str | None = None,
    language: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    exclude_flagged: bool = False,
    filters: VoteFilter | None = None,
    who: bool = False,
    each_chunk: Callable[[StoredChunk], None] | None = None,
    fetched: FetchedTexts | None = None,
) -> Battles:
    """Every selected vote as arrays, in vote-id order (for Elo replays, time weights, held-out splits).

    Models are the ones that appear in the selection, sorted by name. With ``who`` each vote also
    carries its annotator id and its battle's prompt id (-1 where there is none), what clustered
    intervals resample; the battle is then joined, so the plain read stays on the vote rows.
    ``each_chunk`` (with ``who``) sees each chunk as stored (:class:`StoredChunk`), so what else needs
    the same votes (the ledger's digest) does not read them again. ``fetched`` is the texts of this
    very read fetched ahead on the same connection (:func:`packed_scan`), used when its key is this
    read's filter and ``who`` and it was not read before; otherwise the read is run here.
    """
    if each_chunk is not None and not who:
        raise ValueError("each_chunk reads the votes' annotators: ask for who")
    conn = _connection(db)
    f = filter_from(filters, category, language, since, until, exclude_flagged)
    check_propensities(conn, f)
    scan = _scan(conn, f, who)
    columns, votes, own_weight = scan
    base = select(*columns).select_from(votes)

    def rows(span: tuple[int, int] | None = None) -> Select[Any]:
        """The votes row by row: all of them, or those with ids in ``(after, last]``."""
        stmt = base if span is None else base.where(vote_t.c.id > span[0], vote_t.c.id <= span[1])
        return filter_votes(stmt.order_by(vote_t.c.id), f, battle_joined=who)

    # Streamed in chunks straight into arrays: memory follows the arrays, not 10M Python row tuples.
    ids: list[npt.NDArray[np.int64]] = []
    a_ids: list[npt.NDArray[np.int64]] = []
    b_ids: list[npt.NDArray[np.int64]] = []
    outcomes: list[npt.NDArray[np.int8]] = []
    times: list[npt.NDArray[np.float64]] = []
    weights: list[npt.NDArray[np.float64]] = []
    sides: list[npt.NDArray[np.bool_]] = []
    annotators: list[npt.NDArray[np.int64]] = []
    prompts: list[npt.NDArray[np.int64]] = []
    codes: dict[str, int] = {}

    def read_rows(stmt: Select[Any]) -> None:
        for columns_read in column_chunks(conn, stmt, size=SCAN_CHUNK):
            winners = columns_read[3]
            for w in set(winners) - codes.keys():
                codes[w] = int(parse_outcome(w))
            ids.append(np.array(columns_read[0], dtype=np.int64))
            a_ids.append(np.array(columns_read[1], dtype=np.int64))
            b_ids.append(np.array(columns_read[2], dtype=np.int64))
            outcomes.append(np.fromiter(map(codes.__getitem__, winners), dtype=np.int8, count=len(winners)))
            micro = _micro_array(columns_read[4])
            times.append(_seconds_one_by_one(columns_read[4]) if micro is None else micro / 1e6)
            weights.append(np.array(columns_read[5], dtype=np.float64))
            sides.append(np.array(columns_read[6], dtype=bool))
            if who:
                annotators.append(np.array(columns_read[7], dtype=np.int64))
                prompts.append(np.array(columns_read[8], dtype=np.int64))
            if each_chunk is not None:
                each_chunk(
                    StoredChunk(
                        a_ids[-1],
                        b_ids[-1],
                        annotators[-1],
                        winners,
                        columns_read[4],
                        micro,
                        columns_read[own_weight],
                        columns_read[6],
                    )
                )

    if not dialect_of(conn).packs_scans:
        read_rows(rows())
    else:  # SQLite hands chunks of votes packed in a few texts (votes.reads.packed)
        selected = _packed_statement(f, scan, who)
        ahead = fetched if fetched is not None and fetched.key == (f, who) and not fetched.used else None
        for packed in packed_chunks(conn, selected, who=who, size=SCAN_CHUNK, fetched=ahead):
            micro = None if isinstance(packed, RowsNeeded) else time_micro(packed.time_chars)
            if isinstance(packed, RowsNeeded):
                read_rows(rows((packed.after, packed.last)))
                continue
            if micro is None:  # a time numpy does not read: the chunk's rows are parsed one by one
                read_rows(rows((int(packed.vote_id[0]) - 1, int(packed.vote_id[-1]))))
                continue
            ids.append(packed.vote_id)
            a_ids.append(packed.model_a)
            b_ids.append(packed.model_b)
            outcomes.append(packed.outcome)
            times.append(micro / 1e6)
            # every weight is 1 (read packed): a read-only view of one 1, made an array only if needed
            weights.append(np.broadcast_to(np.float64(1.0), len(packed.vote_id)))
            sides.append(packed.sided)
            if packed.annotator is not None and packed.prompt is not None:
                annotators.append(packed.annotator)
                prompts.append(packed.prompt)
            if each_chunk is not None:
                each_chunk(
                    StoredChunk(
                        packed.model_a,
                        packed.model_b,
                        annotators[-1],
                        _OUTCOME_WORDS[packed.outcome],
                        packed.time_chars,
                        micro,
                        weights[-1],
                        packed.sided,
                    )
                )
    # Each column's chunks are let go as soon as the column is joined: the votes are held twice one
    # column at a time, not all of them at once (what bounds a 10M-vote read's peak).
    model_a_id = _concat(a_ids, np.int64)
    model_b_id = _concat(b_ids, np.int64)
    present = np.union1d(np.unique(model_a_id), np.unique(model_b_id))
    models, lookup = index_models(conn, set(present.tolist()))
    model_a = lookup[model_a_id]
    del model_a_id
    model_b = lookup[model_b_id]
    del model_b_id
    weighed_one = all(bool(np.all(part == 1.0)) for part in weights)
    vote_weight = None if weighed_one else _concat(weights, np.float64)
    weights.clear()
    if f.ipw and vote_weight is not None:  # inverse propensities scaled to mean 1 (as load_pair_counts)
        vote_weight = vote_weight * unit_mean_scale(float(len(vote_weight)), float(vote_weight.sum()))
    sided = _concat(sides, np.bool_)
    return Battles(
        models=models,
        vote_id=_concat(ids, np.int64),
        model_a=model_a,
        model_b=model_b,
        outcome=_concat(outcomes, np.int8),
        time=_concat(times, np.float64),
        weight=vote_weight,
        sided=None if np.all(sided) else sided,
        annotator=_concat(annotators, np.int64) if who else None,
        prompt=_concat(prompts, np.int64) if who else None,
    )


def iter_vote_texts(
    db: Session | Connection,
    *,
    category: str | None = None,
    language: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    exclude_flagged: bool = False,
    filters: VoteFilter | None = None,
) -> Iterator[tuple[int, str | None, str | None, int | None, int | None]]:
    """``(vote_id, text_a, text_b, tokens_a, tokens_b)`` of the selected votes, row for row with
    :func:`load_battles`.

    For style covariates from the store: one streamed query, the answers' texts joined on the battle's
    outputs; a text is None when the battle has no such output (imported votes without conversations).
    ``tokens_*`` is the answer's completion-token count as its generating server reported it (generation
    provenance), None for answers generated elsewhere or by a server that did not say.
    """
    conn = _connection(db)
    f = filter_from(filters, category, language, since, until, exclude_flagged)
    output_a, output_b = output_t.alias("output_a"), output_t.alias("output_b")
    made_a, made_b = generation_t.alias("generation_a"), generation_t.alias("generation_b")
    stmt = filter_votes(
        select(
            vote_t.c.id,
            output_a.c.text,
            output_b.c.text,
            made_a.c.completion_tokens,
            made_b.c.completion_tokens,
        )
        .select_from(vote_t)
        .join(battle_t, vote_t.c.battle_id == battle_t.c.id)
        .outerjoin(output_a, battle_t.c.output_a_id == output_a.c.id)
        .outerjoin(output_b, battle_t.c.output_b_id == output_b.c.id)
        .outerjoin(made_a, made_a.c.output_id == battle_t.c.output_a_id)
        .outerjoin(made_b, made_b.c.output_id == battle_t.c.output_b_id)
        .order_by(vote_t.c.id),
        f,
        battle_joined=True,
    )
    rows = conn.execute(stmt, execution_options={"yield_per": _STREAM})
    for vote_id, text_a, text_b, tokens_a, tokens_b in rows:
        yield (
            int(vote_id),
            text_a,
            text_b,
            None if tokens_a is None else int(tokens_a),
            None if tokens_b is None else int(tokens_b),
        )


def vote_time(conn: Connection) -> ColumnElement[Any]:
    """The vote time column as read fast: SQLite's stored text as is (parsed by :func:`vote_seconds`)."""
    return dialect_of(conn).stored_time(vote_t.c.created_at)


def vote_seconds(value: datetime | str) -> float:
    """Seconds since the epoch of a stored vote time, exactly ``created_at.timestamp()``.

    SQLite stores UTC as ``YYYY-MM-DD HH:MM:SS.ffffff`` text; ``datetime.fromisoformat`` reads it several
    times faster than the ORM type's regular expression, to the same datetime.
    """
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).timestamp()


def seconds_array(values: Sequence[datetime | str]) -> npt.NDArray[np.float64]:
    """:func:`vote_seconds` of each stored vote time, as one array. SQLite's text is parsed by numpy at once
    (microseconds since the epoch divided by a million: the same float as ``timestamp()``); a value numpy
    does not read exactly (a stored offset, a datetime from PostgreSQL) sends the chunk through
    :func:`vote_seconds` value by value."""
    micro = _micro_array(values)
    return _seconds_one_by_one(values) if micro is None else micro / 1e6


def _micro_array(values: Sequence[datetime | str]) -> npt.NDArray[np.int64] | None:
    """SQLite's stored times in microseconds since the epoch, parsed by numpy at once; None when a value
    is not text numpy reads exactly."""
    if values and all(type(v) is str for v in values):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                micro: npt.NDArray[np.int64] = np.array(values, dtype="datetime64[us]").astype(np.int64)
            return micro
        except (ValueError, Warning):
            pass
    return None


def _seconds_one_by_one(values: Sequence[datetime | str]) -> npt.NDArray[np.float64]:
    return np.fromiter(map(vote_seconds, values), dtype=np.float64, count=len(values))


def _concat(parts: list[Any], dtype: type[Any]) -> Any:
    """The chunks joined into one array; the list is emptied, so the chunks can be freed."""
    joined = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
    parts.clear()
    return joined


def votes_name_annotators(db: Session | Connection) -> bool:
    """Whether any stored vote names an annotator, whatever a filter selects: when none does, no board
    can be clustered by annotator (one index scan, stopped at the first such vote)."""
    conn = _connection(db)
    found = conn.execute(select(vote_t.c.id).where(vote_t.c.annotator_id >= 0).limit(1)).first()
    return found is not None
