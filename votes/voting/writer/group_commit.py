"""The in-process vote writer: votes that arrive together share one transaction and one durable commit.

One thread takes the votes that arrived together and writes them (each with its Elo update, in order) in
one transaction, one fsync; each caller is answered only after that commit.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from votes.voting.battles import VoteError, VoteRequest, VoteResult
from votes.voting.live import LiveConfig
from votes.voting.metrics import (
    WRITER_BATCH_VOTES,
    WRITER_COMMIT_SECONDS,
    WRITER_VOTES_WRITTEN,
    WRITER_WRITE_SECONDS,
)
from votes.voting.recording import record_votes

__all__ = ["GroupCommitWriter", "VoteWriter"]

log = logging.getLogger(__name__)


class VoteWriter(Protocol):
    """What the site needs of a vote writer: in this process (:class:`GroupCommitWriter`) or a process
    shared by several workers (:class:`votes.voting.writer.RemoteVoteWriter`)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def submit(self, request: VoteRequest) -> Future[VoteResult]:
        """A future resolved only after the transaction holding the vote has committed."""
        ...


@dataclass
class _Pending:
    request: VoteRequest
    future: Future[VoteResult] = field(default_factory=Future)


class GroupCommitWriter:
    """One writer thread; votes that arrive together share one durable commit.

    ``submit`` returns a future resolved only after the transaction holding the vote has committed.
    The batch waits at most ``max_wait_ms`` for company after its first vote and holds at most
    ``max_batch`` votes. A failed batch is retried vote by vote, so one bad vote fails only itself.
    """

    def __init__(
        self, engine: Engine, *, config: LiveConfig, max_wait_ms: float = 2.0, max_batch: int = 256
    ) -> None:
        self.engine = engine
        self.config = config
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_batch = max_batch
        self._queue: queue.Queue[_Pending | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._live_rows: set[int] = set()
        self._conn: Connection | None = None
        self.n_batches = 0
        self.n_votes = 0
        self.busy_s = 0.0  # wall time spent writing and committing batches

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="arena-vote-writer", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Finish the votes already queued, then stop the thread."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        self._drop_connection()

    @property
    def alive(self) -> bool:
        """Whether the writer thread runs (readiness probes ask)."""
        return self._thread is not None and self._thread.is_alive()

    def submit(self, request: VoteRequest) -> Future[VoteResult]:
        if self._thread is None:
            raise RuntimeError("the vote writer is not running")
        pending = _Pending(request)
        self._queue.put(pending)
        return pending.future

    def _collect(self, first: _Pending) -> tuple[list[_Pending], bool]:
        batch = [first]
        deadline = time.monotonic() + self.max_wait_s
        while len(batch) < self.max_batch:
            try:
                timeout = deadline - time.monotonic()
                item = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                break
            batch, stopping = self._collect(first)
            try:
                self._write(batch)
            except Exception:  # noqa: BLE001 - retry one by one so a bad vote fails only itself
                log.exception("vote batch of %d failed; retrying one by one", len(batch))
                for pending in batch:
                    try:
                        self._write([pending])
                    except Exception as exc:  # noqa: BLE001 - handed to the waiting request
                        if not pending.future.done():
                            pending.future.set_exception(exc)

    def _connection(self) -> Connection:
        # One connection kept across batches: a pool checkout per batch costs a pre-ping round trip
        # (PostgreSQL) and Python time; a failed batch drops it, and the next checkout pings again.
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = self.engine.connect()
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _write(self, batch: list[_Pending]) -> None:
        started = time.perf_counter()
        requests = [p.request for p in batch]
        try:
            with Session(bind=self._connection(), expire_on_commit=False) as session:
                try:
                    # Optimistic: this transaction is ours, so a unique-key collision (a retry of a stored
                    # vote, or another worker writing the same token) rolls it all back, and the batch is
                    # written again vote by vote, each looked up first.
                    results = record_votes(
                        session=session,
                        requests=requests,
                        config=self.config,
                        live_rows=self._live_rows,
                        conflicts="raise",
                    )
                except IntegrityError:
                    session.rollback()
                    results = record_votes(
                        session=session, requests=requests, config=self.config, conflicts="one-by-one"
                    )
                written = time.perf_counter()
                session.commit()
        except Exception:
            self._drop_connection()
            raise
        committed = time.perf_counter()
        WRITER_WRITE_SECONDS.observe(written - started)
        WRITER_COMMIT_SECONDS.observe(committed - written)
        WRITER_BATCH_VOTES.observe(len(batch))
        WRITER_VOTES_WRITTEN.inc(len(batch))
        self.busy_s += committed - started
        self.n_batches += 1
        self.n_votes += len(batch)
        for pending, result in zip(batch, results, strict=True):
            if isinstance(result, VoteError):
                pending.future.set_exception(result)
            else:
                pending.future.set_result(result)
