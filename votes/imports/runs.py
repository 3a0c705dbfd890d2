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
from functools import partial
from pathlib import Path
from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from votes.bulk import ImportCounts, bulk_insert, bulk_insert_columns, chunks, gc_paused, member
from votes.dialects import dialect_of
from votes.files.battle_rows import BattleRecord
from votes.imports import merge_steps
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
from votes.imports.keys import any_imported, place_keys
from votes.imports.merge_alongside import Alongside
from votes.imports.merge_checks import MergeChecks, merge_checks_for
from votes.imports.merge_steps import step_ranges
from votes.imports.merging import merge_step, record_merged
from votes.imports.read_ahead import read_ahead
from votes.imports.run_cleanup import clean_dead_runs, finish_run, rollback_run
from votes.imports.run_steps import (
    STALE_AFTER,
    beat,
    drop_run,
    new_run,
    other_run_alive,
    run_step,
    run_step_on,
    set_run_state,
)
from votes.imports.staging import row_digest, stage_battle_batch, stage_clean_batch
from votes.models import utcnow
from votes.tables import import_row_t
from votes.voting.live import LiveConfig
from votes.voting.ratings import rebuild_live_ratings, rebuild_live_ratings_aside, replay_aside

__all__ = [
    "BESIDE_AFTER_ROWS",
    "CLEAN_STAGE_ROWS",
    "SLOT_WAIT_SECONDS",
    "STAGE_ROWS",
    "BetweenBatches",
    "import_battle_batches",
    "import_battle_records",
]

log = logging.getLogger(__name__)

#: Validated rows written to the staging table per short transaction.
STAGE_ROWS = 5_000


#: The same for battles checked as columns (:mod:`votes.imports.clean_columns`): their staging is a few
#: statements and one bulk insert whatever the size, so the per-transaction costs are spread wider.
CLEAN_STAGE_ROWS = 20_000


#: PostgreSQL: the merge starts beside the staging once this many rows are staged (at the end for fewer);
#: the indexes a run sets aside are decided then, on the rows staged so far (as many as a run that dwarfs
#: the store must bring at least, :data:`votes.imports.aside_indexes.ASIDE_MIN_ROWS`).
BESIDE_AFTER_ROWS = ASIDE_MIN_ROWS


#: Seconds between two looks of a run waiting for another to build the unique import-slot index again.
SLOT_WAIT_SECONDS = 0.5


#: Called between two short transactions of a run (after each staged batch and each merge step; on
#: PostgreSQL a merge step is a savepoint of the merge's transaction, and the call is in its thread).
BetweenBatches = Callable[[], None]


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
        run_id = new_run(conn, str(file), "staging")
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
            with gc_paused(), run_step(engine) as conn:  # rows of plain values: no cycles to collect
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
                set_run_state(conn, run_id, "staging")
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
                partial(_done_beside, run_id=run_id, slots=aside.slots), wait=partial(beat, engine, run_id)
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
        finish_run(engine, run_id, total.rows)
    return total


def _merge_in_steps(
    engine: Engine, run_id: int, seq: int, between: BetweenBatches | None
) -> tuple[int, Aside]:
    """Merge a staged run in short transactions (SQLite: live votes write between them) and call it
    done; the battles added and the indexes set aside meanwhile (built again here if a step fails)."""
    added = 0
    with run_step(engine) as conn:
        record_merged(conn, run_id, 0)  # state "merging", nothing merged yet
    with engine.connect() as merger:
        with run_step_on(merger) as conn:
            aside = set_indexes_aside(conn, seq, run_id)  # a run that dwarfs the store builds them after
            checks = merge_checks_for(conn)  # PostgreSQL: foreign keys checked once per row referred to
        try:
            for lo, hi in step_ranges(merger, seq):
                try:
                    with run_step_on(merger) as conn:
                        added += merge_step(conn, run_id, lo, hi, checks=checks)
                        record_merged(conn, run_id, hi)
                except IntegrityError:  # another run merged some of these keys since they were staged
                    with run_step_on(merger) as conn:
                        added += merge_step(conn, run_id, lo, hi, marked=False, checks=checks)
                        record_merged(conn, run_id, hi)
                if between is not None:
                    between()
            if aside.slots:  # unique: built while the run can still be rolled back if it fails
                with run_step_on(merger) as conn:
                    restore_indexes(conn, (SLOT_INDEX,))
        except BaseException:
            if aside:  # before the caller's rollback finds the run's battles by their slots
                _restore_indexes_quietly(engine)
            raise
    with engine.connect() as last, run_step_on(last, synced=True) as conn:  # the log copied at the run's end
        set_run_state(conn, run_id, "done")
    return added, aside


def _merge_beside(
    engine: Engine, run_id: int, staged: int, between: BetweenBatches | None
) -> tuple[Aside, Alongside]:
    """PostgreSQL: set the indexes aside that ``staged`` rows warrant (in a short transaction of its own:
    a drop waits for readers, the merge's transaction would hold it to the end) and start the merge in
    its own transaction (:mod:`votes.imports.merge_alongside`)."""
    with run_step(engine) as conn:
        aside = set_indexes_aside(conn, staged, run_id)
    checks: list[MergeChecks | None] = []

    def step(conn: Connection, lo: int, hi: int) -> int:
        if not checks:  # PostgreSQL's foreign keys checked once per row referred to
            checks.append(merge_checks_for(conn))
        try:
            with conn.begin_nested():
                return merge_step(conn, run_id, lo, hi, checks=checks[0])
        except IntegrityError:  # another run merged some of these keys since they were staged
            with conn.begin_nested():
                return merge_step(conn, run_id, lo, hi, marked=False, checks=checks[0])

    return aside, Alongside(engine, step, longest=merge_steps.MERGE_ROWS_ALONE, after_step=between)


def _done_beside(conn: Connection, *, run_id: int, slots: bool) -> None:
    """The end of a merge beside the staging, in its transaction: the import slots built again if they
    were set aside (a failure rolls the whole merge back), and the run done, seen with its rows."""
    if slots:
        restore_indexes(conn, (SLOT_INDEX,))
    set_run_state(conn, run_id, "done")


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
            waiting = other_run_alive(conn, utcnow() - STALE_AFTER, own=run_id)
        if not waiting:  # the run that set it aside died: removed, and the index built again
            clean_dead_runs(engine, own=run_id)
            return
        if not said:
            log.info("import run %d waits for another import to build its unique index again", run_id)
            said = True
        beat(engine, run_id)
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
        with engine.connect() as held, run_step_on(held, synced=True) as conn:
            restore_indexes(conn)
    except Exception as exc:  # noqa: BLE001 - the import's own failure is re-raised by the caller
        log.warning("indexes set aside are not built again now (%s); the next import or publish does", exc)


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
    run_id = new_run(conn, str(file), "merging")
    restore_indexes(conn, (SLOT_INDEX,))  # set aside by a run alone before this one was recorded
    total = _stage(conn, run_id, records, 0, str(file), DigestCounts()) if records else ImportCounts()
    step = merge_steps.MERGE_ROWS
    for lo in range(0, len(records), step):
        total.rows += merge_step(conn, run_id, lo, min(lo + step, len(records)))
    drop_run(conn, run_id)
    if total.rows:
        rebuild_live_ratings(conn, config=elo_config)
    return total
