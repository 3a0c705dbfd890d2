"""The votes' cell index set aside while an import that dwarfs the store merges, and built once after.

``ix_vote_cells`` (model a, model b, winner, annotator, weight, sided) is the covering index every fit's
``GROUP BY`` reads. Its entries are in pair order, not in the order votes arrive, so each merge step of
an import writes an entry on a page anywhere in it: 1M votes into a new SQLite store spent 2.3 s of a
7.2 s merge on this one index, while building it afterwards from the finished table (one sort) takes
1.4 s. Building costs in proportion to every vote stored, updating only to the votes added, so the index
is set aside only when a run brings at least :data:`ASIDE_FACTOR` times the votes already stored and at
least :data:`ASIDE_MIN_ROWS`.

While it is aside, fits still read the right counts, from the table instead of the index. A run builds
it again when its merge ends, whether the merge succeeded or failed; a process that died in between
leaves it missing, and the next import or publish builds it (:func:`restore_cells_index`, called by
:func:`votes.import_runs.clean_dead_runs`). On PostgreSQL dropping takes the table's strongest lock,
so it waits at most :data:`LOCK_WAIT` for readers already running (a long publish) and otherwise keeps
the index: waiting longer would queue every new reader behind it.
"""

from __future__ import annotations

from sqlalchemy import Index, func, select, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError

from votes.tables import vote_t

__all__ = [
    "ASIDE_FACTOR",
    "ASIDE_MIN_ROWS",
    "CELLS_INDEX",
    "LOCK_WAIT",
    "restore_cells_index",
    "set_cells_aside",
]

CELLS_INDEX = "ix_vote_cells"
#: A run sets the index aside only when it adds at least this many times the votes stored.
ASIDE_FACTOR = 4
#: ... and at least this many rows: below, updating the index costs less than a second anyway.
ASIDE_MIN_ROWS = 100_000
#: PostgreSQL: how long dropping the index may wait for the readers before it, seconds.
LOCK_WAIT = 2.0


def _cells_index() -> Index:
    for index in vote_t.indexes:
        if index.name == CELLS_INDEX:
            return index
    raise LookupError(f"the vote table declares no index {CELLS_INDEX}")


def set_cells_aside(conn: Connection, rows: int) -> bool:
    """Drop the cell index, in the caller's transaction, when ``rows`` votes about to be added dwarf the
    store (see the module); whether it did. Dropped only if present (another run may have set it aside)."""
    if rows < ASIDE_MIN_ROWS:
        return False
    stored = int(conn.scalar(select(func.max(vote_t.c.id))) or 0)  # an upper bound of the votes' number
    if rows < ASIDE_FACTOR * stored:
        return False
    index = _cells_index()
    if conn.dialect.name != "postgresql":
        index.drop(conn, checkfirst=True)
        return True
    conn.execute(text(f"SET LOCAL lock_timeout = '{int(LOCK_WAIT * 1000)}ms'"))
    try:
        with conn.begin_nested():
            index.drop(conn, checkfirst=True)
    except OperationalError:  # readers held the table: merge with the index, as a small run does
        return False
    finally:
        conn.execute(text("SET LOCAL lock_timeout = DEFAULT"))  # the configured value again
    return True


def restore_cells_index(target: Engine | Connection) -> bool:
    """Build the cell index if it is missing (a run set it aside); whether it did. Commits when given an
    engine; in the caller's transaction when given a connection."""
    if isinstance(target, Engine):
        with target.begin() as conn:
            return restore_cells_index(conn)
    if target.dialect.has_index(target, vote_t.name, CELLS_INDEX):
        return False
    _cells_index().create(target)
    if target.dialect.name == "postgresql":
        target.execute(text("ANALYZE vote"))  # the planner learns the new index's size at once
    return True
