"""Import runs: a battles file written in short transactions under an import id, all or nothing.

One long transaction would hold the SQLite writer lock for the whole import, and live votes would wait
for it (tens of seconds at a few hundred thousand rows). Here an import is a run (``importrun``):

1. *staging*: each batch of validated rows is written aside (``importrow``, through the driver's bulk
   path) in its own short transaction, with the models, judges, prompts and outputs it needs (each
   recorded in ``importcreated``); fits and live ratings never read the staging table;
2. *merging*: once the whole file is read and valid, staged rows move into ``battle`` and ``vote`` in
   steps, each one transaction: :data:`MERGE_ROWS` rows while other connections write, growing while
   the run has the store to itself (:mod:`votes.imports.merge_steps`);
3. *done*: the run is marked done and the live ratings are replayed; the staging rows are then dropped.

A failure before *done* (a bad row late in the file, a crash, Ctrl-C) removes every row the run wrote,
again in short steps (:func:`rollback_run`). A process that dies cannot roll back: its run stops beating
(``heartbeat_at``), and the next import or publish removes it (:func:`clean_dead_runs`).

On PostgreSQL readers never wait for writers, and nothing needs the merge to be in short steps: there it
runs beside the staging (from :data:`BESIDE_AFTER_ROWS` staged rows on, or after the staging for fewer)
as one transaction of its own that commits with *done* (:mod:`votes.imports.merge_alongside`): no reader sees
part of an import, and a failure or a crash rolls its battles and votes back whole.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from functools import cache, partial
from pathlib import Path
from typing import NamedTuple

from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import TextClause

from votes.bulk import ImportCounts, bulk_insert, bulk_insert_columns, chunks, gc_paused, member
from votes.dialects import Dialect, dialect_of
from votes.files.battle_rows import BattleRecord
from votes.imports.aside_indexes import (
    ASIDE_MIN_ROWS,
    SLOT_INDEX,
    Aside,
    present_indexes,
    restore_indexes,
    set_indexes_aside,
)
from votes.imports.clean_columns import CleanBatch, clean_digests, iso_times
from votes.imports.digest_counts import DigestCounts
from votes.imports.keys import BATTLE_OF_ROW, MARK_FRESH, ROW_KEY, UNSLOT, any_imported, place_keys
from votes.imports.merge_alongside import Alongside
from votes.imports.merge_checks import MergeChecks, merge_checks_for
from votes.imports.merge_steps import step_ranges
from votes.imports.read_ahead import read_ahead
from votes.imports.staging import row_digest, stage_battle_batch, stage_clean_batch
from votes.models import utcnow
from votes.tables import battle_t, import_created_t, import_row_t, import_run_t
from votes.voting.live import LiveConfig
from votes.voting.ratings import rebuild_live_ratings, rebuild_live_ratings_aside, replay_aside

__all__ = [
    "MERGE_ROWS",
    "MERGE_ROWS_ALONE",
    "CLEAN_STAGE_ROWS",
    "STAGE_ROWS",
    "STALE_AFTER",
    "BetweenBatches",
    "clean_dead_runs",
    "dead_runs",
    "import_battle_batches",
    "import_battle_records",
    "rollback_run",
]

log = logging.getLogger(__name__)

#: Validated rows written to the staging table per short transaction.
STAGE_ROWS = 5_000
#: The same for battles checked as columns (:mod:`votes.imports.clean_columns`): their staging is a few
#: statements and one bulk insert whatever the size, so the per-transaction costs are spread wider.
CLEAN_STAGE_ROWS = 20_000
#: Staged rows moved into ``battle`` and ``vote`` per short transaction while other connections write
#: (a run alone grows its steps up to :data:`MERGE_ROWS_ALONE`: :mod:`votes.imports.merge_steps`).
#: Larger than a staging batch: each merge step writes every page of ``battle``'s and ``vote``'s
#: hash- or pair-ordered indexes it touches, so halving the steps nearly halves the bytes written
#: (100,000 rows: 515 MB at 5,000 rows per step, 363 MB at 10,000, 286 MB at 20,000), while the longest
#: wait of a live vote for the writer lock grew from 0.14 s to 0.23 s (0.3-0.8 s at 20,000).
MERGE_ROWS = 10_000
#: The longest merge step of a run that has the store to itself (on PostgreSQL the server holds a
#: step's rows: the staged ones read once, spilled to a temporary file past ``work_mem``, and the queue
#: of their foreign-key checks, some tens of bytes per row and key, in memory to the step's end).
MERGE_ROWS_ALONE = 320_000
#: A run whose heartbeat is older than this belongs to a dead process (a batch takes seconds).
STALE_AFTER = timedelta(minutes=10)
_ANALYZE_AFTER = 10_000

#: PostgreSQL: the merge starts beside the staging once this many rows are staged (at the end for fewer);
#: the indexes a run sets aside are decided then, on the rows staged so far (as many as a run that dwarfs
#: the store must bring at least, :data:`votes.imports.aside_indexes.ASIDE_MIN_ROWS`).
BESIDE_AFTER_ROWS = ASIDE_MIN_ROWS
#: Seconds between two looks of a run waiting for another to build the unique import-slot index again.
SLOT_WAIT_SECONDS = 0.5

#: Called between two short transactions of a run (after each staged batch and each merge step; on
#: PostgreSQL a merge step is a savepoint of the merge's transaction, and the call is in its thread).
BetweenBatches = Callable[[], None]

_MERGE_BATTLES = text(
    "INSERT INTO battle"  # nosec B608  # constant fragments of this module
    " (prompt_id, output_a_id, output_b_id, model_a_id, model_b_id, annotator_id,"
    " issued_at, source, import_key, import_digest, import_copy, language, extra)"
    " SELECT prompt_id, output_a_id, output_b_id, model_a_id, model_b_id, annotator_id, issued_at,"
    f" 'import', {ROW_KEY.format(row='importrow')}, import_digest, import_copy, language, extra"
    " FROM importrow"
    " WHERE import_id = :run AND seq >= :lo AND seq < :hi AND fresh ORDER BY seq"
)
_MERGE_VOTES = text(
    "INSERT INTO vote"  # nosec B608  # constant fragments of this module
    " (battle_id, model_a_id, model_b_id, annotator_id, winner, created_at, weight, sided)"
    f" SELECT {BATTLE_OF_ROW}, r.model_a_id, r.model_b_id, r.annotator_id, r.winner, r.issued_at, r.weight,"
    " r.sided FROM importrow r"
    " WHERE r.import_id = :run AND r.seq >= :lo AND r.seq < :hi AND r.fresh ORDER BY r.seq"
)
# SQLite gives the battles of one INSERT consecutive ids (one writer; each new id is the largest plus
# one: Dialect.numbers_inserts_in_order), so the votes of a step can be numbered from the id before it
# instead of finding each battle again by its key (checked per step; otherwise the join above).
_MERGE_VOTES_NUMBERED = text(
    "INSERT INTO vote (battle_id, model_a_id, model_b_id, annotator_id, winner, created_at, weight, sided)"
    " SELECT :base + row_number() OVER (ORDER BY seq), model_a_id, model_b_id, annotator_id, winner,"
    " issued_at, weight, sided FROM importrow"
    " WHERE import_id = :run AND seq >= :lo AND seq < :hi AND fresh ORDER BY seq"
)
# PostgreSQL (Dialect.merges_in_one_statement): one statement per step, nothing through the client. Each
# staged row draws its battle's id from the column's own sequence, in file order (a volatile output is
# computed after the sort), and the battle and its vote are both written
# from those rows, so no key is looked up again: a join on the keys over all battles may scan a table
# bulk-loaded since its last ANALYZE whole for every step, and an insert RETURNING the ids followed by a
# COPY of the votes spent a second of client CPU per 200,000 battles. The foreign key checks of the votes
# run at the end of the statement and see its battles.
_MERGE_IN_ONE = (
    "WITH r AS MATERIALIZED"  # nosec B608  # constant fragments of this module and the dialect's
    " (SELECT {next_battle_id}"
    " AS battle_id, prompt_id, output_a_id, output_b_id, model_a_id, model_b_id, annotator_id, issued_at,"
    f" {ROW_KEY.format(row='importrow')} AS import_key, import_digest, import_copy, language, extra, winner,"
    " weight, sided FROM importrow"
    " WHERE import_id = :run AND seq >= :lo AND seq < :hi AND fresh ORDER BY seq),"
    " b AS (INSERT INTO battle (id, prompt_id, output_a_id, output_b_id, model_a_id, model_b_id,"
    " annotator_id, issued_at, source, import_key, import_digest, import_copy, language, extra)"
    " SELECT battle_id, prompt_id, output_a_id, output_b_id, model_a_id, model_b_id, annotator_id,"
    " issued_at, 'import', import_key, import_digest, import_copy, language, extra FROM r)"
    " INSERT INTO vote (battle_id, model_a_id, model_b_id, annotator_id, winner, created_at, weight, sided)"
    " SELECT battle_id, model_a_id, model_b_id, annotator_id, winner, issued_at, weight, sided FROM r"
)


@cache
def _merge_in_one(dialect: Dialect) -> TextClause:
    """The one statement of a merge step where the dialect :attr:`~Dialect.merges_in_one_statement`."""
    return text(_MERGE_IN_ONE.format(next_battle_id=dialect.next_id_sql("battle", "id")))


_REMOVE_VOTES = text(
    "DELETE FROM vote"  # nosec B608  # constant fragments of this module
    f" WHERE battle_id IN (SELECT {BATTLE_OF_ROW} FROM importrow r"
    " WHERE r.import_id = :run AND r.seq >= :lo AND r.seq < :hi AND r.fresh)"
)
_REMOVE_BATTLES = text(
    "DELETE FROM battle"  # nosec B608  # constant fragments of this module
    f" WHERE id IN (SELECT {BATTLE_OF_ROW} FROM importrow r"
    " WHERE r.import_id = :run AND r.seq >= :lo AND r.seq < :hi AND r.fresh)"
)
#: ``importcreated`` kind of a run's merge progress: ``row_id`` is the sequence number its merged rows
#: reach (exclusive), written in each merge step's own transaction.
_MERGED = "merged"
# What a run created outside battle and vote, undone newest first (outputs refer to prompts and models).
_UNDO = (
    ("filled", "UPDATE output SET conversation = NULL WHERE id IN ({ids})"),
    ("output", "DELETE FROM output WHERE id IN ({ids})"),
    ("prompt", "DELETE FROM prompt WHERE id IN ({ids})"),
    ("annotator", "DELETE FROM annotator WHERE id IN ({ids})"),
    ("model", "DELETE FROM model WHERE id IN ({ids})"),
)


@contextmanager
def _step(engine: Engine) -> Iterator[Connection]:
    """One short transaction of a run, whose commit does not wait for the disk: on SQLite
    ``synchronous=NORMAL`` in WAL mode, on PostgreSQL ``synchronous_commit = off`` (both still atomic and
    consistent; only the newest commits can be lost to a power cut: :meth:`Dialect.quick_step`). A run
    commits a thousand times at a million rows, and a sync per commit cost a quarter of the import. The
    run's last commit (state *done*) is an ordinary, synced one, and the log is written in order, so it
    syncs every step before it too: a finished import is as durable as any other write, and a run cut
    short by a power loss is a run that did not finish, removed by :func:`clean_dead_runs`. On SQLite the
    step also gets a larger page cache and leaves a longer log (:mod:`votes.dialects.sqlite`)."""
    with engine.connect() as conn, _step_on(conn):
        yield conn


def _step_on(
    conn: Connection, *, foreign_keys: bool = True, synced: bool = False
) -> AbstractContextManager[Connection]:
    """:func:`_step` on a connection the caller holds across steps
    (:func:`votes.imports.merge_steps.step_ranges` watches it for other connections' commits).
    ``foreign_keys=False``: SQLite checks no foreign key in this step (one that can break none, as
    emptying the staging tables whole). ``synced``: the commit waits for the disk, as an ordinary one
    (the run's *done*), and still leaves the log long."""
    return dialect_of(conn).quick_step(conn, synced=synced, foreign_keys=foreign_keys)


def _new_run(conn: Connection, path: str, state: str) -> int:
    now = utcnow()
    values = {"path": path[:1000], "state": state, "started_at": now, "heartbeat_at": now}
    key = conn.execute(insert(import_run_t).values(**values)).inserted_primary_key
    if key is None:
        raise RuntimeError("the database returned no id for the new import run")
    return int(key[0])


def _set_state(conn: Connection, run_id: int, state: str) -> bool:
    """Set the run's state and heartbeat; whether the run is still recorded."""
    result = conn.execute(
        update(import_run_t).where(import_run_t.c.id == run_id).values(state=state, heartbeat_at=utcnow())
    )
    return bool(result.rowcount)


def _stage(
    conn: Connection,
    run_id: int,
    records: Sequence[BattleRecord] | CleanBatch,
    first_seq: int,
    file: str,
    counts: DigestCounts,
    digests: Sequence[str] | None = None,
    *,
    probe: bool = True,
    times: Sequence[str] | None = None,
) -> ImportCounts:
    """Stage a batch: its rows with their import keys, where the store keeps each, and whether each key
    is new (``probe``: see :func:`votes.imports.keys.place_keys`). ``times``: a clean batch's times as
    stored, when computed already."""
    fetch = _staged_digests(conn, run_id)
    if digests is None:
        digests = _digests(records)
    numbered = counts.numbered(digests, first_seq, fetch)
    placed = place_keys(conn, numbered, counts.apart(digests), probe=probe)
    if isinstance(records, CleanBatch):
        columns = stage_clean_batch(conn, run_id, records, first_seq=first_seq, digests=digests, times=times)
        columns.columns["import_digest"] = placed.digests
        columns.columns["import_copy"] = placed.copies
        columns.columns["fresh"] = placed.fresh
        bulk_insert_columns(conn, import_row_t, columns.columns, stored=columns.stored)
        return columns.counts
    staged = stage_battle_batch(conn, run_id, records, first_seq=first_seq, file=file, digests=digests)
    for row, digest, copy, new in zip(staged.rows, placed.digests, placed.copies, placed.fresh, strict=True):
        row.update(import_digest=digest, import_copy=copy, fresh=new)
    bulk_insert(conn, import_row_t, staged.rows)
    return staged.counts


def _digests(records: Sequence[BattleRecord] | CleanBatch) -> list[str]:
    """Each battle's :func:`votes.imports.staging.row_digest`, however the batch was checked."""
    if isinstance(records, CleanBatch):
        return clean_digests(records)
    return [row_digest(r) for r in records]


def _staged_digests(conn: Connection, run_id: int) -> Callable[[Sequence[int]], dict[int, str]]:
    """Look-up of the staged digests of some rows of a run by sequence number (its primary key), for
    :class:`DigestCounts` to tell a repeated row from another row sharing its digest's first 64 bits."""

    def fetch(seqs: Sequence[int]) -> dict[int, str]:
        found: dict[int, str] = {}
        for chunk in chunks(list(seqs)):
            stmt = select(import_row_t.c.seq, import_row_t.c.digest).where(
                import_row_t.c.import_id == run_id, member(conn, import_row_t.c.seq, chunk)
            )
            found.update((int(seq), str(digest)) for seq, digest in conn.execute(stmt))
        return found

    return fetch


def _merge_step(
    conn: Connection, run_id: int, lo: int, hi: int, *, marked: bool = True, checks: MergeChecks | None = None
) -> int:
    """Move staged rows ``lo`` to ``hi`` into ``battle`` and ``vote``; returns the battles added.

    ``marked``: the rows' places and ``fresh`` flags were set when they were staged
    (:func:`votes.imports.keys.place_keys`); a run that merged the same keys (or keys in the same slots)
    since makes the battle insert fail, and the step is then done again with them set anew
    (``marked=False``). ``checks``: PostgreSQL's foreign keys checked set-wise
    (:mod:`votes.imports.merge_checks`)."""
    bounds = {"run": run_id, "lo": lo, "hi": hi}
    if not marked:
        conn.execute(text(UNSLOT), bounds)
        conn.execute(text(MARK_FRESH), bounds)
    dialect = dialect_of(conn)
    if dialect.merges_in_one_statement:
        if checks is not None:
            return checks.run(conn, bounds, _merge_in_one(dialect))
        return int(conn.execute(_merge_in_one(dialect), bounds).rowcount)
    numbered = dialect.numbers_inserts_in_order
    base = int(conn.scalar(select(func.max(battle_t.c.id))) or 0) if numbered else 0
    added = int(conn.execute(_MERGE_BATTLES, bounds).rowcount)
    if numbered and added and _numbered_from(conn, base, added):
        conn.execute(_MERGE_VOTES_NUMBERED, {**bounds, "base": base})
    elif added:
        conn.execute(_MERGE_VOTES, bounds)
    return added


def _merged_to(conn: Connection, run_id: int, hi: int) -> None:
    """Record (in the step's transaction) that the run's rows before ``hi`` are merged; the heartbeat.
    The run's own row is checked here, as its foreign key would (a merge step may run without them)."""
    if not _set_state(conn, run_id, "merging"):
        raise IntegrityError(
            "record a merge step", {"run": run_id}, ValueError(f"import run {run_id} is no longer recorded")
        )
    conn.execute(insert(import_created_t).values(import_id=run_id, kind=_MERGED, row_id=hi))


def _numbered_from(conn: Connection, base: int, added: int) -> bool:
    """Whether the battles just added are exactly ids ``base + 1`` to ``base + added``."""
    count, top = conn.execute(select(func.count(), func.max(battle_t.c.id)).where(battle_t.c.id > base)).one()
    return bool(count == added and top == base + added)


def _drop_staging(conn: Connection, run_id: int) -> None:
    conn.execute(delete(import_row_t).where(import_row_t.c.import_id == run_id))
    conn.execute(delete(import_created_t).where(import_created_t.c.import_id == run_id))
    conn.execute(delete(import_run_t).where(import_run_t.c.id == run_id))


def _add(total: ImportCounts, part: ImportCounts) -> None:
    total.models += part.models
    total.prompts += part.prompts
    total.outputs += part.outputs
    total.rows += part.rows
    total.name_collisions.extend(part.name_collisions)


def import_battle_batches(
    engine: Engine,
    batches: Iterable[Sequence[BattleRecord] | CleanBatch],
    *,
    file: str | Path,
    elo_config: LiveConfig | None = None,
    between: BetweenBatches | None = None,
) -> ImportCounts:
    """Import validated battle batches as one run: staged batch by batch, merged in short steps (on
    PostgreSQL in one transaction beside the staging), live ratings replayed at the end. Live votes keep
    being written throughout.

    ``batches`` may validate lazily and raise :class:`votes.files.records.InputError` for a bad row in any
    batch; that (or any other failure, Ctrl-C included) removes every row the run wrote and re-raises.
    Rows whose import key is already stored are skipped.
    """
    clean_dead_runs(engine)
    with engine.begin() as conn:
        run_id = _new_run(conn, str(file), "staging")
        probe = any_imported(conn)
    total = ImportCounts()
    counts = DigestCounts()
    merges_beside = dialect_of(engine).merges_beside
    seq = 0
    aside = Aside()  # the indexes the merge set aside (votes.imports.aside_indexes)
    beside: Alongside | None = None  # PostgreSQL: the merge's own transaction (votes.imports.merge_alongside)
    try:
        _wait_for_slots(engine, run_id)
        # the next part is read, checked and hashed in a worker thread while this one is staged
        for part, digests, times, batch_ends in read_ahead(_parts(batches)):
            with gc_paused(), _step(engine) as conn:  # rows of plain values: no cycles to collect
                staged = _stage(
                    conn,
                    run_id,
                    part,
                    seq,
                    str(file),
                    counts,
                    digests,
                    probe=probe,
                    times=times,
                )
                _add(total, staged)
                _set_state(conn, run_id, "staging")
            seq += len(part)
            if merges_beside and (beside is not None or seq >= BESIDE_AFTER_ROWS):
                if beside is None:
                    aside, beside = _merge_beside(engine, run_id, seq, between)
                beside.staged(seq)
            if batch_ends and between is not None:
                between()
        # Every row is staged: the occurrence counts (12 bytes a distinct row) are let go before the merge,
        # whose index builds are the run's peak of memory.
        counts.clear()
        if merges_beside:
            if beside is None:
                aside, beside = _merge_beside(engine, run_id, seq, between)
            beside.staged(seq)
            total.rows = beside.finish(
                partial(_done_beside, run_id=run_id, slots=aside.slots), wait=partial(_beat, engine, run_id)
            )
            beside = None
        else:
            total.rows, aside = _merge_in_steps(engine, run_id, seq, between)
    except BaseException:
        if beside is not None:
            beside.abort()  # the merge's transaction rolled back: nothing of it was ever seen
        _roll_back_after_failure(engine, run_id)
        if aside:  # whatever could not be built before the rollback
            _restore_indexes_quietly(engine)
        raise
    try:
        _after_merge(engine, total.rows, elo_config, aside=bool(aside))
    finally:
        _finish(engine, run_id, total.rows)
    return total


def _merge_in_steps(
    engine: Engine, run_id: int, seq: int, between: BetweenBatches | None
) -> tuple[int, Aside]:
    """Merge a staged run in short transactions (SQLite: live votes write between them) and call it
    done; the battles added and the indexes set aside meanwhile (built again here if a step fails)."""
    added = 0
    with _step(engine) as conn:
        _merged_to(conn, run_id, 0)  # state "merging", nothing merged yet
    with engine.connect() as merger:
        with _step_on(merger) as conn:
            aside = set_indexes_aside(conn, seq, run_id)  # a run that dwarfs the store builds them after
            checks = merge_checks_for(conn)  # PostgreSQL: foreign keys checked once per row referred to
        try:
            for lo, hi in step_ranges(merger, seq, shortest=MERGE_ROWS, longest=MERGE_ROWS_ALONE):
                try:
                    with _step_on(merger) as conn:
                        added += _merge_step(conn, run_id, lo, hi, checks=checks)
                        _merged_to(conn, run_id, hi)
                except IntegrityError:  # another run merged some of these keys since they were staged
                    with _step_on(merger) as conn:
                        added += _merge_step(conn, run_id, lo, hi, marked=False, checks=checks)
                        _merged_to(conn, run_id, hi)
                if between is not None:
                    between()
            if aside.slots:  # unique: built while the run can still be rolled back if it fails
                with _step_on(merger) as conn:
                    restore_indexes(conn, (SLOT_INDEX,))
        except BaseException:
            if aside:  # before the caller's rollback finds the run's battles by their slots
                _restore_indexes_quietly(engine)
            raise
    with engine.connect() as last, _step_on(last, synced=True) as conn:  # the log copied at the run's end
        _set_state(conn, run_id, "done")
    return added, aside


def _merge_beside(
    engine: Engine, run_id: int, staged: int, between: BetweenBatches | None
) -> tuple[Aside, Alongside]:
    """PostgreSQL: set the indexes aside that ``staged`` rows warrant (in a short transaction of its own:
    a drop waits for readers, the merge's transaction would hold it to the end) and start the merge in
    its own transaction (:mod:`votes.imports.merge_alongside`)."""
    with _step(engine) as conn:
        aside = set_indexes_aside(conn, staged, run_id)
    checks: list[MergeChecks | None] = []

    def step(conn: Connection, lo: int, hi: int) -> int:
        if not checks:  # PostgreSQL's foreign keys checked once per row referred to
            checks.append(merge_checks_for(conn))
        try:
            with conn.begin_nested():
                return _merge_step(conn, run_id, lo, hi, checks=checks[0])
        except IntegrityError:  # another run merged some of these keys since they were staged
            with conn.begin_nested():
                return _merge_step(conn, run_id, lo, hi, marked=False, checks=checks[0])

    return aside, Alongside(engine, step, longest=MERGE_ROWS_ALONE, after_step=between)


def _done_beside(conn: Connection, *, run_id: int, slots: bool) -> None:
    """The end of a merge beside the staging, in its transaction: the import slots built again if they
    were set aside (a failure rolls the whole merge back), and the run done, seen with its rows."""
    if slots:
        restore_indexes(conn, (SLOT_INDEX,))
    _set_state(conn, run_id, "done")


def _beat(engine: Engine, run_id: int) -> None:
    """The run's heartbeat alone (its state stays what its last committed transaction said)."""
    with engine.begin() as conn:
        conn.execute(update(import_run_t).where(import_run_t.c.id == run_id).values(heartbeat_at=utcnow()))


def _wait_for_slots(engine: Engine, run_id: int) -> None:
    """Make sure the unique import-slot index is there before this run places a key.

    A run alone may have set it aside since this one looked for missing indexes (it checks for other
    runs under a lock, so only before this run was recorded). While that run lives it builds the index
    itself at its end, and building it here would take a lock behind its writes (on PostgreSQL behind its
    one long transaction, and every live vote would queue behind this one): so this run waits, beating,
    for the index to be back or for the other runs to end or die."""
    said = False
    while True:
        with engine.connect() as conn:
            if SLOT_INDEX in present_indexes(conn):
                return
            waiting = _live_run(conn, utcnow() - STALE_AFTER, own=run_id)
        if not waiting:  # the run that set it aside died: removed, and the index built again
            clean_dead_runs(engine, own=run_id)
            return
        if not said:
            log.info("import run %d waits for another import to build its unique index again", run_id)
            said = True
        _beat(engine, run_id)
        time.sleep(SLOT_WAIT_SECONDS)


def _after_merge(engine: Engine, added: int, config: LiveConfig | None, *, aside: bool) -> None:
    """Replay the live ratings of a done run, and build the indexes it set aside meanwhile.

    The two share no table and each runs mostly inside SQLite (or the server), so the replay's read
    runs in a worker thread while this one builds the indexes; the replay is stored once they are
    built (and only if no vote came in meanwhile, :func:`votes.voting.ratings.store_replay`). 1M votes on two
    cores: 1.4 s and 1.2 s side by side instead of one after the other."""
    if not aside:
        if added:
            rebuild_live_ratings_aside(engine, config=config)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="live-replay") as pool:
        replay = pool.submit(replay_aside, engine, config=config) if added else None
        try:
            _restore_indexes_quietly(engine)  # the run is done: a failure here leaves it to the next run
        finally:
            first = replay.result() if replay is not None else None
    if first is not None:
        rebuild_live_ratings_aside(engine, config=config, first=first)


class _Part(NamedTuple):
    """A staging part with what the reading thread computes for it before the writer lock is taken: its
    rows' digests and, for battles checked as columns, their times as the store keeps them."""

    records: Sequence[BattleRecord] | CleanBatch
    digests: list[str]
    times: list[str] | None
    batch_ends: bool


def _parts(batches: Iterable[Sequence[BattleRecord] | CleanBatch]) -> Iterator[_Part]:
    """The batches cut into staging parts (:class:`_Part`), each noting whether it ends its batch."""
    for records in batches:
        size = CLEAN_STAGE_ROWS if isinstance(records, CleanBatch) else STAGE_ROWS
        for start in range(0, len(records), size):
            part = records[start : start + size]
            with gc_paused():
                digests = _digests(part)
                times = iso_times(part.tstamp, utcnow()) if isinstance(part, CleanBatch) else None
            yield _Part(part, digests, times, start + size >= len(records))


def _roll_back_after_failure(engine: Engine, run_id: int) -> None:
    """Roll a failed run back; if that fails too (a full disk, the database gone) the failure that
    stopped the import is what the caller sees, and the run is left for :func:`clean_dead_runs`."""
    try:
        rollback_run(engine, run_id)
    except Exception as exc:  # noqa: BLE001 - the import's own failure is re-raised by the caller
        log.warning(
            "import run %d not rolled back now (%s); the next import or publish removes it", run_id, exc
        )


def _restore_indexes_quietly(engine: Engine) -> None:
    """Build the indexes a run set aside; if that fails, the run's own failure (or its result) is what the
    caller sees, and the next import or publish builds them (:func:`clean_dead_runs`)."""
    try:
        with engine.connect() as held, _step_on(held, synced=True) as conn:
            restore_indexes(conn)
    except Exception as exc:  # noqa: BLE001 - the import's own failure is re-raised by the caller
        log.warning("indexes set aside are not built again now (%s); the next import or publish does", exc)


def _finish(engine: Engine, run_id: int, added: int) -> None:
    """Drop a done run's staging rows, in short steps, refresh PostgreSQL's statistics, and copy SQLite's
    log into the database (the steps left it long, see :data:`votes.dialects.sqlite.STEP_CHECKPOINT_PAGES`).
    A reader still on an old snapshot leaves the rest of the log to a later checkpoint: the import is done
    either way, so that is logged, not raised."""
    if not _empty_staging_if_alone(engine, run_id):
        _delete_staged(engine, run_id, remove_merged=False)
    dialect = dialect_of(engine)
    with _step(engine) as conn:
        _drop_staging(conn, run_id)
        if added >= _ANALYZE_AFTER:
            # Fresh statistics for the planner: without them the next import's key lookups on the
            # bulk-loaded table can take seconds each (measured: 2 minutes for 100,000 keys instead of 1 s).
            dialect.analyze(conn, ("battle", "vote", "prompt", "output"))
    later = dialect.truncate_log(engine)
    if later is not None:
        log.info("log checkpoint after the import left for later (%s)", later)


def _empty_staging_if_alone(engine: Engine, run_id: int) -> bool:
    """Empty the staging tables at once when no other run has rows in them; whether it did.

    A ``DELETE`` without ``WHERE`` frees the tables' pages whole instead of removing a million rows one
    by one (about a second at 1M). SQLite does so only while it enforces no foreign key, so the step runs
    with enforcement off on its connection: otherwise it removes the rows one by one after listing them
    all in memory (about 23 MB per million staged rows, 230 MB at ten million). Removing these rows can
    break no key (they refer to their run; no row refers to them). The run's own row is written first,
    so the step holds the writer lock before it looks: no run can start in between.

    On PostgreSQL the tables are truncated (their files replaced, not a million rows deleted and left
    for vacuum), under an exclusive lock taken before looking: another run's staging waits for the
    step's end, and a run with rows in them is seen (its transaction ends before the lock is given)."""
    staging = (import_row_t.name, import_created_t.name)
    dialect = dialect_of(engine)
    with engine.connect() as held, _step_on(held, foreign_keys=False) as conn:
        dialect.lock_tables(conn, staging, "ACCESS EXCLUSIVE")
        conn.execute(update(import_run_t).where(import_run_t.c.id == run_id).values(heartbeat_at=utcnow()))
        if _another_run(conn, run_id):
            return False
        dialect.empty_tables(conn, staging)
    return True


def _another_run(conn: Connection, run_id: int) -> bool:
    """Whether any run but ``run_id`` is recorded (staging, merging, or dead and not yet removed)."""
    return conn.scalar(select(import_run_t.c.id).where(import_run_t.c.id != run_id).limit(1)) is not None


def _delete_staged(engine: Engine, run_id: int, *, remove_merged: bool) -> None:
    """Drop a run's staging rows in short steps; ``remove_merged``: with the battles and votes its merge
    steps wrote (rows up to the last step recorded as merged: later rows' ``fresh`` flags are only the
    guess made when they were staged; a run records 0 when it starts merging)."""
    with engine.connect() as conn:
        last = conn.scalar(select(func.max(import_row_t.c.seq)).where(import_row_t.c.import_id == run_id))
        merged = conn.scalar(
            select(func.max(import_created_t.c.row_id)).where(
                import_created_t.c.import_id == run_id, import_created_t.c.kind == _MERGED
            )
        )
    if last is None:
        return
    # A run written before merge progress was recorded set its flags only as it merged: all count.
    reach = int(last) + 1 if merged is None else int(merged)
    with engine.connect() as remover:
        for lo, hi in step_ranges(remover, int(last) + 1, shortest=MERGE_ROWS, longest=MERGE_ROWS_ALONE):
            bounds = {"run": run_id, "lo": lo, "hi": min(hi, reach)}
            with _step_on(remover) as conn:
                if remove_merged and bounds["hi"] > lo:
                    conn.execute(_REMOVE_VOTES, bounds)
                    conn.execute(_REMOVE_BATTLES, bounds)
                conn.execute(
                    delete(import_row_t).where(
                        import_row_t.c.import_id == run_id,
                        import_row_t.c.seq >= lo,
                        import_row_t.c.seq < hi,
                    )
                )


def rollback_run(engine: Engine, run_id: int) -> None:
    """Remove every row a run that is not done wrote (battles, votes, what it created), in short steps.

    A done run only loses its staging rows."""
    with engine.connect() as conn:
        state = conn.scalar(select(import_run_t.c.state).where(import_run_t.c.id == run_id))
    if state is None:
        return
    if state == "done":
        _finish(engine, run_id, 0)
        return
    _delete_staged(engine, run_id, remove_merged=state == "merging")
    with engine.begin() as conn:
        for kind, statement in _UNDO:
            ids = [
                int(i)
                for i in conn.scalars(
                    select(import_created_t.c.row_id).where(
                        import_created_t.c.import_id == run_id, import_created_t.c.kind == kind
                    )
                )
            ]
            for start in range(0, len(ids), 1000):
                _undo(conn, statement, ids[start : start + 1000])
        _drop_staging(conn, run_id)
    log.info("import run %d rolled back", run_id)


def _undo(conn: Connection, statement: str, ids: list[int]) -> None:
    """Remove (or empty) rows a run created. A row another run's battles have come to use since (a model
    or judge both files name) stays: it is that run's now, and refusing to roll back for it would leave
    this run's rows behind for good."""
    try:
        with conn.begin_nested():
            conn.execute(text(statement.format(ids=", ".join(str(i) for i in ids))))
    except IntegrityError:
        for i in ids:
            try:
                with conn.begin_nested():
                    conn.execute(text(statement.format(ids=str(i))))
            except IntegrityError:
                log.info("import rollback keeps row %d, which other rows use now", i)


def clean_dead_runs(
    engine: Engine, *, stale_after: timedelta = STALE_AFTER, own: int | None = None
) -> list[int]:
    """Roll back the runs whose process died (no heartbeat for ``stale_after``); returns their ids.

    Called when any import or publish starts, so a crashed import's rows never reach a board. Also
    builds the indexes a run set aside and died before building again (:mod:`votes.imports.aside_indexes`):
    first, as a dead run's battles are found through the import-slot index; should its unique build
    fail, after the dead runs' rows are gone. Not while a run lives: it builds its own at its end, and a
    build here would wait behind its writes (on PostgreSQL its one long transaction) with every live vote
    queued behind the build. ``own``: the caller's own run, alive and not counted as another."""
    cutoff = utcnow() - stale_after
    with engine.connect() as conn:
        dead = dead_runs(conn, cutoff)
        live = _live_run(conn, cutoff, own=own)
    if not live:
        try:
            restore_indexes(engine)
        except IntegrityError:
            if not dead:
                raise
    for run_id in dead:
        rollback_run(engine, run_id)
    if dead and not live:
        restore_indexes(engine)
    return dead


def dead_runs(conn: Connection, cutoff: datetime) -> list[int]:
    """The runs that have not beaten since ``cutoff``: their process died (see :data:`STALE_AFTER`)."""
    stale = select(import_run_t.c.id).where(import_run_t.c.heartbeat_at < cutoff)
    return [int(i) for i in conn.scalars(stale)]


def _live_run(conn: Connection, cutoff: datetime, *, own: int | None) -> bool:
    """Whether a run other than ``own`` has beaten since ``cutoff`` (is alive)."""
    living = select(import_run_t.c.id).where(import_run_t.c.heartbeat_at >= cutoff)
    if own is not None:
        living = living.where(import_run_t.c.id != own)
    return conn.scalar(living.limit(1)) is not None


def import_battle_records(
    conn: Connection,
    records: Sequence[BattleRecord],
    *,
    file: str | Path = "<battles>",
    elo_config: LiveConfig | None = None,
) -> ImportCounts:
    """Write validated battles (and their votes, prompts and outputs) inside the caller's transaction, as
    one run staged, merged and dropped at once (for small imports: the demo, tests).

    Rows whose import key is already stored are skipped. Raises :class:`votes.files.records.InputError` when a
    battle's conversation contradicts an answer already stored for the same prompt and model.
    """
    run_id = _new_run(conn, str(file), "merging")
    restore_indexes(conn, (SLOT_INDEX,))  # set aside by a run alone before this one was recorded
    total = _stage(conn, run_id, records, 0, str(file), DigestCounts()) if records else ImportCounts()
    for lo in range(0, len(records), MERGE_ROWS):
        total.rows += _merge_step(conn, run_id, lo, min(lo + MERGE_ROWS, len(records)))
    _drop_staging(conn, run_id)
    if total.rows:
        rebuild_live_ratings(conn, config=elo_config)
    return total
