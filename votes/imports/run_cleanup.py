"""How an import run ends: a done run's staging dropped, a failed or dead run's rows removed.

A run that is *done* only loses its staging rows (:func:`finish_run`): at once when no other run has
rows in them, else in short steps. A run that failed before *done* is rolled back (:func:`rollback_run`):
the battles and votes its merge wrote, then what it created outside them, each in short steps. A run
whose process died cannot roll itself back: the next import or publish finds it by its stale heartbeat
and removes it (:func:`clean_dead_runs`), building again any index it left set aside
(:mod:`votes.imports.aside_indexes`).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from votes.dialects import dialect_of
from votes.imports.aside_indexes import restore_indexes
from votes.imports.merge_steps import step_ranges
from votes.imports.merging import merged_reach, remove_merged
from votes.imports.run_steps import (
    STALE_AFTER,
    another_run,
    dead_runs,
    drop_run,
    other_run_alive,
    run_step,
    run_step_on,
)
from votes.models import utcnow
from votes.tables import import_created_t, import_row_t, import_run_t

__all__ = ["clean_dead_runs", "finish_run", "rollback_run"]

log = logging.getLogger(__name__)

#: A done run that added at least this many battles refreshes the planner's statistics.
_ANALYZE_AFTER = 10_000
# What a run created outside battle and vote, undone newest first (outputs refer to prompts and models).
_UNDO = (
    ("filled", "UPDATE output SET conversation = NULL WHERE id IN ({ids})"),
    ("output", "DELETE FROM output WHERE id IN ({ids})"),
    ("prompt", "DELETE FROM prompt WHERE id IN ({ids})"),
    ("annotator", "DELETE FROM annotator WHERE id IN ({ids})"),
    ("model", "DELETE FROM model WHERE id IN ({ids})"),
)


def finish_run(engine: Engine, run_id: int, added: int) -> None:
    """Drop a done run's staging rows, in short steps, refresh PostgreSQL's statistics, and copy SQLite's
    log into the database (the steps left it long, see :data:`votes.dialects.sqlite.STEP_CHECKPOINT_PAGES`).
    A reader still on an old snapshot leaves the rest of the log to a later checkpoint: the import is done
    either way, so that is logged, not raised."""
    if not _empty_staging_if_alone(engine, run_id):
        _delete_staged(engine, run_id, with_merged=False)
    dialect = dialect_of(engine)
    with run_step(engine) as conn:
        drop_run(conn, run_id)
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
    with engine.connect() as held, run_step_on(held, foreign_keys=False) as conn:
        dialect.lock_tables(conn, staging, "ACCESS EXCLUSIVE")
        conn.execute(update(import_run_t).where(import_run_t.c.id == run_id).values(heartbeat_at=utcnow()))
        if another_run(conn, run_id):
            return False
        dialect.empty_tables(conn, staging)
    return True


def _delete_staged(engine: Engine, run_id: int, *, with_merged: bool) -> None:
    """Drop a run's staging rows in short steps; ``with_merged``: with the battles and votes its merge
    steps wrote (rows up to the last step recorded as merged: later rows' ``fresh`` flags are only the
    guess made when they were staged; a run records 0 when it starts merging)."""
    with engine.connect() as conn:
        last = conn.scalar(select(func.max(import_row_t.c.seq)).where(import_row_t.c.import_id == run_id))
        merged = merged_reach(conn, run_id)
    if last is None:
        return
    # A run written before merge progress was recorded set its flags only as it merged: all count.
    reach = int(last) + 1 if merged is None else merged
    with engine.connect() as remover:
        for lo, hi in step_ranges(remover, int(last) + 1):
            bounds = {"run": run_id, "lo": lo, "hi": min(hi, reach)}
            with run_step_on(remover) as conn:
                if with_merged and bounds["hi"] > lo:
                    remove_merged(conn, bounds)
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
        finish_run(engine, run_id, 0)
        return
    _delete_staged(engine, run_id, with_merged=state == "merging")
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
        drop_run(conn, run_id)
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
        live = other_run_alive(conn, cutoff, own=own)
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
