"""A board's read transaction begun in a thread while the command is still importing its fitting stack.

``arena publish`` spends its first seconds importing scikit-learn, scipy, pandas and matplotlib on one
core, then reads the votes' counts (a ``GROUP BY``) and, after the fit, scans the votes one by one
(:func:`votes.reads.scans.load_battles`, the ledger's digest from the same chunks). Most of that reading is
the database's own work, during which SQLite and the PostgreSQL driver let the interpreter lock go. So
the command starts this read as soon as it knows its filter: a thread opens the store, reads the
counts, then on SQLite fetches the scan's packed texts (:func:`votes.reads.scans.packed_scan`) within a
budget of bytes, while the main thread imports, checks its options and opens the store itself. When
the board's read starts, the main thread stops the thread and takes its connection over, the
transaction still open: everything the board reads is read in that one transaction, as when one thread
reads it all (on SQLite one snapshot of the store; on PostgreSQL the counts are checked against the
votes scanned, as before: :func:`arena.publish.publishing.load_votes_with_texts`).

The read changes nothing and may come to nothing: it only reads a store at the newest schema revision,
on SQLite only a file that exists (the command's own opening creates or migrates a store, after its
options were checked), and it gives up when an import run has died (the command rolls that run back
first, and the board reads what is left). Any failure of the thread is the same: no early read, and
the command reads as it would have without one. The thread is stopped and joined before its
connection is handed over, and before the command forks a child.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import TYPE_CHECKING

from votes.db import is_sqlite, make_engine, read_only, sqlite_file
from votes.imports.run_steps import STALE_AFTER, dead_runs
from votes.models import utcnow
from votes.reads.cells import load_pair_counts
from votes.reads.filters import VoteFilter
from votes.reads.scans import packed_scan

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

    from leaderboard.data import PairCounts
    from votes.reads.packed import FetchedTexts

__all__ = ["EARLY_READ_BYTES", "EarlyRead"]

#: The most bytes of packed texts fetched ahead (about 65 bytes a vote with its annotator and prompt:
#: two million votes), so a large store's scan never sits whole in memory; the rest is read in turn.
EARLY_READ_BYTES = 128 * 1024 * 1024


class EarlyRead:
    """The counts of ``vote_filter``'s votes in the store at ``url`` and, on SQLite, the first texts of
    their scan with annotators and prompts, read in a thread, in one read transaction :meth:`take`
    hands over.

    An import run that has not beaten for ``stale_after`` is dead, as for the command's clean-up
    (:func:`votes.imports.run_cleanup.clean_dead_runs`). Use it as a context manager (or
    call :meth:`close`): the thread is stopped, the transaction ended and the engine disposed of."""

    def __init__(
        self,
        url: str,
        vote_filter: VoteFilter,
        *,
        stale_after: timedelta = STALE_AFTER,
        budget: int = EARLY_READ_BYTES,
    ) -> None:
        self.filter = vote_filter
        self._url = url
        self._stale_after = stale_after
        self._budget = budget
        self._stop = threading.Event()
        self._counted = threading.Event()
        self._engine: Engine | None = None
        self._conn: Connection | None = None
        self._counts: PairCounts | None = None
        self._fetched: FetchedTexts | None = None
        self._taken = False
        self._thread = threading.Thread(target=self._read, name="arena-early-read", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        from votes.schema_head import at_newest_revision

        try:
            if is_sqlite(self._url):
                path = sqlite_file(self._url)
                if path is None or not path.is_file():  # in memory (nothing to read), or opening creates it
                    return
            self._engine = make_engine(self._url)
            if not at_newest_revision(read_only(self._engine)):  # a deferred transaction: no write lock
                return
            self._conn = read_only(self._engine).connect()
            self._conn.begin()
            if dead_runs(self._conn, utcnow() - self._stale_after):
                return
            self._counts = load_pair_counts(self._conn, filters=self.filter)
            self._counted.set()
            self._fetched = packed_scan(self._conn, self.filter, who=True)
            if self._fetched is not None:
                self._fetched.fetch(self._stop, self._budget)
        except Exception:  # noqa: BLE001 - an early read only saves time: the command reads as usual
            self._counts = self._fetched = None
        finally:
            self._counted.set()

    def counts(self) -> PairCounts | None:
        """The counts (the database's ``GROUP BY`` of the filter's votes) once read, None when the
        early read gave up; the thread goes on fetching meanwhile."""
        self._counted.wait()
        return self._counts

    def take(self) -> tuple[Connection, FetchedTexts | None] | None:
        """The connection, its read transaction open, and the texts fetched (for
        ``load_battles(conn, filters=self.filter, who=True, fetched=...)``), or None when the early
        read gave up. The thread is stopped first (the chunk it is reading is finished). Taken once; the
        connection stays this object's, ended by :meth:`close`."""
        if self._taken:
            raise RuntimeError("the early read was taken already")
        self._stop.set()
        self._thread.join()
        self._taken = True
        if self._conn is None or self._counts is None:
            return None
        return self._conn, self._fetched

    def close(self) -> None:
        """Stop the thread, end the transaction and dispose of the engine (once; again does nothing)."""
        self._stop.set()
        self._thread.join()
        self._taken = True
        conn, engine, self._conn, self._engine = self._conn, self._engine, None, None
        self._fetched = None
        if conn is not None:
            conn.close()
        if engine is not None:
            engine.dispose()

    def __enter__(self) -> EarlyRead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
