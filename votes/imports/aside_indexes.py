"""Indexes an import that dwarfs the store sets aside while it merges, and builds once after.

A merge step writes an entry to every index of ``battle`` and ``vote`` for every row it adds. Where
those entries land all over an index (the votes' cell index is in pair order, the import slots in hash
order), each step rewrites pages anywhere in it; building the index from the finished table is one sort.
Measured on 200,000 rows added to 200,000 (SQLite; PostgreSQL likewise): the import-slot index alone
made the battle inserts 2.5 times as long (0.30 to 0.74 s), and building it on a million battles takes
0.6 s. On PostgreSQL every index entry costs about a microsecond even in key order, so there the votes'
time index and the battles' language index are set aside too (1.1 and 1.0 us a row; 0.36 and 0.24 s to
build at 1M); on SQLite an entry at an index's right edge costs next to nothing, and they are kept.

Building costs in proportion to every row stored, updating only to the rows added, so indexes are set
aside only when a run brings at least :data:`ASIDE_FACTOR` times the votes already stored and at least
:data:`ASIDE_MIN_ROWS`. While one is aside every query still gives the same answer, from the table.

The import-slot index is unique: it is what stops two runs from storing the same key. It is set aside
only by a run that is alone (no other run recorded, checked under a lock that keeps new runs from being
recorded meanwhile: SQLite's writer lock, a lock on ``importrun`` on PostgreSQL), whose keys were placed
against the store when they were staged, so its rows can break nothing; and every run builds the
missing indexes right after it is recorded (:func:`restore_indexes`), so a run that comes later merges
with the unique index in place. The setting-aside run builds it again before it calls itself done: a
failure to build it fails the run, which is then rolled back.

A run builds the others once it is done (or failed); a process that died in between leaves them
missing, and the next import or publish builds them (:func:`votes.imports.run_cleanup.clean_dead_runs`). On
PostgreSQL dropping takes the table's strongest lock, so it waits at most :data:`LOCK_WAIT` for readers
already running (a long publish) and otherwise keeps the index: waiting longer would queue every new
reader behind it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Index, Table, func, select, update
from sqlalchemy.engine import Connection, Engine

from votes.dialects import Dialect, dialect_of
from votes.models import utcnow
from votes.tables import battle_t, import_run_t, vote_t

__all__ = [
    "ASIDE_FACTOR",
    "ASIDE_MIN_ROWS",
    "CELLS_INDEX",
    "LOCK_WAIT",
    "SLOT_INDEX",
    "Aside",
    "present_indexes",
    "restore_indexes",
    "set_indexes_aside",
]

CELLS_INDEX = "ix_vote_cells"
SLOT_INDEX = "ix_battle_import_slot"
#: Indexes written all over (set aside by any run that dwarfs the store), and those written at their right
#: edge, set aside too where such entries cost as much (see the module).
_SCATTERED = (CELLS_INDEX,)
_IN_ORDER = ("ix_vote_created_at", "ix_battle_language")
#: Every index this module may set aside, in the order they are built again.
_MANAGED = (SLOT_INDEX, CELLS_INDEX, "ix_vote_created_at", "ix_battle_language")
#: A run sets indexes aside only when it adds at least this many times the votes stored.
ASIDE_FACTOR = 4
#: ... and at least this many rows: below, updating the indexes costs less than a second anyway.
ASIDE_MIN_ROWS = 100_000
#: How long dropping an index may wait for the readers before it, seconds (PostgreSQL's readers hold it).
LOCK_WAIT = 2.0


@dataclass(frozen=True)
class Aside:
    """The indexes a run set aside (their names)."""

    names: tuple[str, ...] = ()

    @property
    def slots(self) -> bool:
        """Whether the unique import-slot index is among them (built again before the run is done)."""
        return SLOT_INDEX in self.names

    def __bool__(self) -> bool:
        return bool(self.names)


def _index(name: str) -> tuple[Table, Index]:
    for table in (battle_t, vote_t):
        for index in table.indexes:
            if index.name == name:
                return table, index
    raise LookupError(f"no table declares an index {name}")


def set_indexes_aside(conn: Connection, rows: int, run_id: int) -> Aside:
    """Drop the indexes the module names, in the caller's transaction, when ``rows`` votes about to be
    added by run ``run_id`` dwarf the store; the unique import-slot index only if that run is alone.
    Returns what was dropped (an index already missing, set aside by another run, is not counted)."""
    if rows < ASIDE_MIN_ROWS:
        return Aside()
    stored = int(conn.scalar(select(func.max(vote_t.c.id))) or 0)  # an upper bound of the votes' number
    if rows < ASIDE_FACTOR * stored:
        return Aside()
    present = present_indexes(conn)
    dialect = dialect_of(conn)
    dropped = [name for name in _secondary(dialect) if _drop(conn, name, present)]
    if _alone(conn, run_id) and _drop(conn, SLOT_INDEX, present):
        dropped.append(SLOT_INDEX)
    return Aside(tuple(dropped))


def _secondary(dialect: Dialect) -> tuple[str, ...]:
    return _SCATTERED if dialect.cheap_index_appends else (*_SCATTERED, *_IN_ORDER)


def _alone(conn: Connection, run_id: int) -> bool:
    """Whether run ``run_id`` is the only one recorded, holding (to the transaction's end) the lock that
    keeps another from being recorded: a lock on ``importrun``, on SQLite the writer lock (the run's
    heartbeat written, as any write takes it)."""
    dialect_of(conn).lock_tables(conn, ("importrun",), "SHARE ROW EXCLUSIVE")
    conn.execute(update(import_run_t).where(import_run_t.c.id == run_id).values(heartbeat_at=utcnow()))
    other = select(import_run_t.c.id).where(import_run_t.c.id != run_id).limit(1)
    return conn.scalar(other) is None


def _drop(conn: Connection, name: str, present: frozenset[str]) -> bool:
    """Drop one index if ``present``; whether it did (on PostgreSQL not if readers hold its table too
    long)."""
    if name not in present:
        return False
    # readers that hold the table longer: merge with the index, as a small run does
    return dialect_of(conn).drop_index(conn, _index(name)[1], wait=LOCK_WAIT)


def present_indexes(conn: Connection) -> frozenset[str]:
    """Those of the indexes this module manages that exist, by name, in one statement (every import and
    publish asks)."""
    names = dialect_of(conn).index_names(conn, (battle_t.name, vote_t.name))
    return frozenset(n for n in _MANAGED if n in names)


def restore_indexes(target: Engine | Connection, names: tuple[str, ...] = _MANAGED) -> tuple[str, ...]:
    """Build those of ``names`` (by default every index a run may set aside) that are missing; returns
    the ones built. Commits when given an engine; in the caller's transaction when given a connection.
    Building the unique import-slot index fails (``IntegrityError``) if two battles hold one slot."""
    if isinstance(target, Engine):
        with target.begin() as conn:
            return restore_indexes(conn, names)
    present = present_indexes(target)
    built: list[str] = []
    for name in names:
        if name not in present:
            _index(name)[1].create(target)
            built.append(name)
    if built:  # the planner learns the new indexes' sizes at once
        dialect_of(target).analyze(target, sorted({_index(name)[0].name for name in built}))
    return tuple(built)
