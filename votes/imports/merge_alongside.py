"""PostgreSQL: an import run's merge in one transaction of its own, beside the staging, committed at the end.

On SQLite one connection writes at a time, so a run stages its rows and then merges them in short
transactions, letting live votes in between (:mod:`votes.imports.runs`). PostgreSQL has no such lock:
readers never wait and writers wait only for the rows they share. There the merge runs on a connection
of its own, in a worker thread, as one transaction that follows the staging batch by batch: while the
client reads, checks and hashes the next batch and the server copies it into the staging table, a
second server process moves the rows staged so far into ``battle`` and ``vote``. One million battles:
the staging and the merge took 8 s each, one after the other; side by side they share the two cores.

The transaction commits only when the whole file is staged and merged, together with the run's state
*done*, so no reader ever sees part of an import: a bad row late in the file, a crash or Ctrl-C rolls
back every battle and vote the merge wrote, and what the staging committed (the staged rows, the models
and judges the file named) is removed as before (:func:`votes.imports.run_cleanup.rollback_run`). The merge's
steps are savepoints: a step that meets a key another run stored since the rows were staged is done
again with the rows' places set anew, as a short transaction would be.

The merge statements are the caller's (:class:`Alongside` takes them as functions); this module owns
only the worker, its transaction and the hand-over.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Final

from sqlalchemy.engine import Connection, Engine

__all__ = ["Alongside"]

#: A merge step: move the staged rows ``lo`` to ``hi`` (sequence numbers) in the connection's
#: transaction; returns the battles added.
Step = Callable[[Connection, int, int], int]
#: Run in the merge's transaction once every row is merged, just before it commits.
BeforeCommit = Callable[[Connection], None]

_FINISH: Final = -1


class Alongside:
    """The merge of one run in a worker thread: :meth:`staged` hands it the rows committed so far,
    :meth:`finish` waits for the last of them and commits, :meth:`abort` rolls everything back.

    ``longest`` bounds the rows of one merge statement (the server holds a step's rows to its end);
    ``after_step`` is called in the worker after each step (an import's ``between`` hook)."""

    def __init__(
        self, engine: Engine, step: Step, *, longest: int, after_step: Callable[[], None] | None = None
    ) -> None:
        self._engine = engine
        self._step = step
        self._after_step = after_step
        self._longest = max(1, longest)
        self._orders: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._before_commit: BeforeCommit | None = None
        self._stop = threading.Event()
        self._conn: Connection | None = None
        self._lock = threading.Lock()  # guards _conn for abort()'s cancel
        self._result: Future[int] = Future()
        self._thread = threading.Thread(target=self._work, name="import-merge", daemon=True)
        self._thread.start()

    def staged(self, top: int) -> None:
        """Rows ``0`` to ``top`` are staged and committed: the worker merges them next. Raises the
        worker's failure, if it failed, so the staging stops at once."""
        if self._result.done():
            self._result.result()  # raises the worker's failure; a finished merge takes no more rows
            raise RuntimeError("the merge has finished")
        self._orders.put(top)

    def finish(self, before_commit: BeforeCommit, *, wait: Callable[[], None] | None = None) -> int:
        """Merge what is left, run ``before_commit`` in the transaction, commit; the battles added.
        ``wait`` is called every few seconds while the worker is busy (the run's heartbeat)."""
        self._before_commit = before_commit
        self._orders.put(_FINISH)
        while True:
            try:
                added = self._result.result(timeout=5.0)
            except TimeoutError:
                if wait is not None:
                    wait()
                continue
            self._thread.join()  # its connection back in the pool
            return added

    def abort(self) -> None:
        """Stop the worker (cancelling the statement it runs) and roll its transaction back."""
        self._stop.set()
        self._orders.put(_FINISH)
        with self._lock:
            conn = self._conn
            driver = conn.connection.driver_connection if conn is not None else None
            if driver is not None:
                try:
                    driver.cancel_safe()  # psycopg: stops the statement the worker runs
                except Exception:  # noqa: BLE001, S110 - nothing runs, or the connection is gone already
                    pass  # nosec B110
        self._thread.join()

    def _work(self) -> None:
        try:
            with self._engine.connect() as conn:
                with self._lock:
                    self._conn = conn
                try:
                    self._result.set_result(self._merge(conn))
                finally:
                    with self._lock:
                        self._conn = None
        except BaseException as exc:  # noqa: BLE001 - handed to the staging thread through the future
            if not self._result.done():
                self._result.set_exception(exc)

    def _merge(self, conn: Connection) -> int:
        added = merged = 0
        finishing = False
        with conn.begin():  # committed when the block ends without an error, else rolled back
            while not finishing:
                top, finishing = self._next_orders()
                while merged < top:
                    if self._stop.is_set():
                        raise _Stopped("the import stopped; its merge is rolled back")
                    hi = min(top, merged + self._longest)
                    added += self._step(conn, merged, hi)
                    merged = hi
                    if self._after_step is not None:
                        self._after_step()
                if self._stop.is_set():
                    raise _Stopped("the import stopped; its merge is rolled back")
            if self._before_commit is None:
                raise RuntimeError("finished without a last step")
            self._before_commit(conn)
        return added

    def _next_orders(self) -> tuple[int, bool]:
        """The highest row staged so far (waiting for one), and whether the staging has finished: every
        order queued meanwhile is taken at once, so the merge's steps are as long as it lagged."""
        top, finishing = 0, False
        order = self._orders.get()
        while True:
            if order == _FINISH:
                finishing = True
            else:
                top = max(top, order)
            try:
                order = self._orders.get_nowait()
            except queue.Empty:
                return top, finishing


class _Stopped(RuntimeError):
    """The staging thread stopped the merge (:meth:`Alongside.abort`)."""
