"""An import run's own row (``importrun``: its state and heartbeat) and its short transactions.

Every write of a run is a short transaction whose commit does not wait for the disk (:func:`run_step`),
and its steps write the run's heartbeat as they go (:func:`set_run_state`, :func:`beat`): a run that has
not beaten for :data:`STALE_AFTER` belongs to a dead process (:func:`dead_runs`), which the next import
or publish removes (:func:`votes.imports.run_cleanup.clean_dead_runs`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection, Engine

from votes.dialects import dialect_of
from votes.models import utcnow
from votes.tables import import_created_t, import_row_t, import_run_t

__all__ = [
    "STALE_AFTER",
    "another_run",
    "beat",
    "dead_runs",
    "drop_run",
    "new_run",
    "other_run_alive",
    "run_step",
    "run_step_on",
    "set_run_state",
]


#: A run whose heartbeat is older than this belongs to a dead process (a batch takes seconds).
STALE_AFTER = timedelta(minutes=10)


@contextmanager
def run_step(engine: Engine) -> Iterator[Connection]:
    """One short transaction of a run, whose commit does not wait for the disk: on SQLite
    ``synchronous=NORMAL`` in WAL mode, on PostgreSQL ``synchronous_commit = off`` (both still atomic and
    consistent; only the newest commits can be lost to a power cut:
    :meth:`votes.dialects.Dialect.quick_step`). A run commits a thousand times at a million rows, and a
    sync per commit cost a quarter of the import. The run's last commit (state *done*) is an ordinary,
    synced one, and the log is written in order, so it syncs every step before it too: a finished import
    is as durable as any other write, and a run cut short by a power loss is a run that did not finish,
    removed by :func:`votes.imports.run_cleanup.clean_dead_runs`. On SQLite the step also gets a larger
    page cache and leaves a longer log (:mod:`votes.dialects.sqlite`)."""
    with engine.connect() as conn, run_step_on(conn):
        yield conn


def run_step_on(
    conn: Connection, *, foreign_keys: bool = True, synced: bool = False
) -> AbstractContextManager[Connection]:
    """:func:`run_step` on a connection the caller holds across steps
    (:func:`votes.imports.merge_steps.step_ranges` watches it for other connections' commits).
    ``foreign_keys=False``: SQLite checks no foreign key in this step (one that can break none, as
    emptying the staging tables whole). ``synced``: the commit waits for the disk, as an ordinary one
    (the run's *done*), and still leaves the log long."""
    return dialect_of(conn).quick_step(conn, synced=synced, foreign_keys=foreign_keys)


def new_run(conn: Connection, path: str, state: str) -> int:
    """Record a new run of the file ``path`` in ``state``; its id."""
    now = utcnow()
    values = {"path": path[:1000], "state": state, "started_at": now, "heartbeat_at": now}
    key = conn.execute(insert(import_run_t).values(**values)).inserted_primary_key
    if key is None:
        raise RuntimeError("the database returned no id for the new import run")
    return int(key[0])


def set_run_state(conn: Connection, run_id: int, state: str) -> bool:
    """Set the run's state and heartbeat; whether the run is still recorded."""
    result = conn.execute(
        update(import_run_t).where(import_run_t.c.id == run_id).values(state=state, heartbeat_at=utcnow())
    )
    return bool(result.rowcount)


def beat(engine: Engine, run_id: int) -> None:
    """The run's heartbeat alone, in a transaction of its own (its state stays what its last committed
    transaction said)."""
    with engine.begin() as conn:
        conn.execute(update(import_run_t).where(import_run_t.c.id == run_id).values(heartbeat_at=utcnow()))


def drop_run(conn: Connection, run_id: int) -> None:
    """Remove the run's staged rows, what it recorded as created, and its own row."""
    conn.execute(delete(import_row_t).where(import_row_t.c.import_id == run_id))
    conn.execute(delete(import_created_t).where(import_created_t.c.import_id == run_id))
    conn.execute(delete(import_run_t).where(import_run_t.c.id == run_id))


def dead_runs(conn: Connection, cutoff: datetime) -> list[int]:
    """The runs that have not beaten since ``cutoff``: their process died (see :data:`STALE_AFTER`)."""
    stale = select(import_run_t.c.id).where(import_run_t.c.heartbeat_at < cutoff)
    return [int(i) for i in conn.scalars(stale)]


def other_run_alive(conn: Connection, cutoff: datetime, *, own: int | None) -> bool:
    """Whether a run other than ``own`` has beaten since ``cutoff`` (is alive)."""
    living = select(import_run_t.c.id).where(import_run_t.c.heartbeat_at >= cutoff)
    if own is not None:
        living = living.where(import_run_t.c.id != own)
    return conn.scalar(living.limit(1)) is not None


def another_run(conn: Connection, run_id: int) -> bool:
    """Whether any run but ``run_id`` is recorded (staging, merging, or dead and not yet removed)."""
    return conn.scalar(select(import_run_t.c.id).where(import_run_t.c.id != run_id).limit(1)) is not None
