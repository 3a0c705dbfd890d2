"""How many staged rows an import run moves per transaction: few while others write, more when alone.

Each merge step of an import run (:mod:`votes.imports.runs`) is one transaction. On SQLite it holds the
database's only writer lock, so a live vote that arrives meanwhile waits for the step to end; short steps
keep that wait short. But each step also rewrites every page of ``battle``'s and ``vote``'s hash- and
pair-ordered indexes that it touches, whatever the number of rows it adds, so the same rows cost far more
in many short steps than in a few long ones (1M battles into an empty SQLite store, load 4: 69 s in steps
of 10,000 rows, 24 s in one step).

So a run starts with short steps and doubles them while nobody else writes: SQLite's ``data_version``
(which changes when *another* connection commits: :meth:`votes.dialects.Dialect.commits_seen`) is read
after each step, and a step grows only if it did not change and the step took under half of the time
budget. The first commit by anyone else brings
the steps back to the shortest. A live vote arriving during an import that had the store to itself waits
once for at most about one budget; the steps after it are short again. A step that took more than the
budget halves the next one. On PostgreSQL writers of different rows do not wait for each other, and the
steps grow by their time alone.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from sqlalchemy.engine import Connection

from votes.dialects import dialect_of

__all__ = ["MERGE_ROWS", "MERGE_ROWS_ALONE", "STEP_SECONDS", "step_ranges"]

#: Staged rows moved into ``battle`` and ``vote`` per short transaction while other connections write
#: (a run alone grows its steps up to :data:`MERGE_ROWS_ALONE`: :func:`step_ranges`).
#: Larger than a staging batch: each merge step writes every page of ``battle``'s and ``vote``'s
#: hash- or pair-ordered indexes it touches, so halving the steps nearly halves the bytes written
#: (100,000 rows: 515 MB at 5,000 rows per step, 363 MB at 10,000, 286 MB at 20,000), while the longest
#: wait of a live vote for the writer lock grew from 0.14 s to 0.23 s (0.3-0.8 s at 20,000).
MERGE_ROWS = 10_000


#: The longest merge step of a run that has the store to itself (on PostgreSQL the server holds a
#: step's rows: the staged ones read once, spilled to a temporary file past ``work_mem``, and the queue
#: of their foreign-key checks, some tens of bytes per row and key, in memory to the step's end).
MERGE_ROWS_ALONE = 320_000
#: The longest a step may grow to take, seconds: a live vote arriving during an import that had the
#: store to itself may wait about this long once.
STEP_SECONDS = 2.0


def step_ranges(
    conn: Connection,
    total: int,
    *,
    shortest: int | None = None,
    longest: int | None = None,
    seconds: float = STEP_SECONDS,
) -> Iterator[tuple[int, int]]:
    """Ranges ``(lo, hi)`` covering ``0`` to ``total``, one per step, sized as the module says: from
    ``shortest`` rows (:data:`MERGE_ROWS`) up to ``longest`` (:data:`MERGE_ROWS_ALONE`).

    ``conn`` is the connection every step runs on (each step is a transaction of it, opened and
    committed between two ranges), so that ``data_version`` tells its own commits from others'.
    """
    shortest = MERGE_ROWS if shortest is None else shortest
    rows = max(1, shortest)
    longest = max(rows, MERGE_ROWS_ALONE if longest is None else longest)
    dialect = dialect_of(conn)
    version = dialect.commits_seen(conn)
    lo = 0
    while lo < total:
        hi = min(lo + rows, total)
        began = time.perf_counter()
        yield lo, hi
        took = time.perf_counter() - began
        now = dialect.commits_seen(conn)
        if now != version:
            rows = max(1, shortest)  # someone else committed since the last step: they may be waiting
        elif took > seconds:
            rows = max(shortest, rows // 2)
        elif took * 2 <= seconds:
            rows = min(longest, rows * 2)
        version = now
        lo = hi
