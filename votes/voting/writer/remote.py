"""A web worker's handle on the vote writer process, with its own in-process writer as the fallback."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from concurrent.futures import Future
from typing import Any

from votes.voting.battles import VoteRequest, VoteResult
from votes.voting.writer.group_commit import VoteWriter
from votes.voting.writer.wire import MAX_LINE, encode_line, settle

__all__ = ["RemoteVoteWriter"]

log = logging.getLogger(__name__)


class _Connection:
    """One socket to the writer process and the votes sent on it that still await their answer."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.file = sock.makefile("rb")
        self.pending: dict[int, tuple[VoteRequest, Future[VoteResult]]] = {}
        self.reader: threading.Thread | None = None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.file.close()
        self.sock.close()


class RemoteVoteWriter:
    """A worker's handle on the writer process, with the in-process writer as its fallback.

    Has the interface of :class:`~votes.voting.writer.GroupCommitWriter`: ``submit`` returns a future resolved
    after the vote's commit. While the writer process cannot be reached, votes go to ``fallback``, and a
    connection is tried again at most every ``retry_s`` seconds.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        *,
        fallback: VoteWriter,
        expect: dict[str, Any],
        retry_s: float = 1.0,
        connect_timeout_s: float = 0.5,  # a (re)connection happens on the caller's thread: keep it short
    ) -> None:
        self.path = str(socket_path)
        self.fallback = fallback
        self.expect = expect
        self.retry_s = retry_s
        self.connect_timeout_s = connect_timeout_s
        self._lock = threading.Lock()
        self._conn: _Connection | None = None
        self._next_id = 0
        self._last_attempt = float("-inf")
        self._stopped = True
        self.n_remote = 0
        self.n_local = 0

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def start(self) -> None:
        self.fallback.start()
        with self._lock:
            self._stopped = False
            self._connect_locked()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Wait (a while) for the answers the writer process still owes, close, then stop the fallback."""
        with self._lock:
            self._stopped = True
            conn = self._conn
        deadline = time.monotonic() + timeout_s
        while conn is not None and conn.pending and time.monotonic() < deadline:
            time.sleep(0.005)
        with self._lock:
            if self._conn is conn:
                self._conn = None
        if conn is not None:
            conn.close()
            if conn.reader is not None:
                conn.reader.join()  # it hands anything still unanswered to the fallback
        self.fallback.stop()

    def submit(self, request: VoteRequest) -> Future[VoteResult]:
        future: Future[VoteResult] = Future()
        with self._lock:
            conn = self._conn
            if conn is None and not self._stopped and time.monotonic() - self._last_attempt >= self.retry_s:
                conn = self._connect_locked()
            if conn is not None:
                self._next_id += 1
                rid = self._next_id
                conn.pending[rid] = (request, future)
                try:
                    conn.sock.sendall(encode_line({"id": rid, "vote": request.to_dict()}))
                except OSError as exc:
                    log.warning("vote writer connection lost while sending (%s)", exc)
                    self._conn = None
                    conn.close()  # its reader hands every pending vote, this one too, to the fallback
                else:
                    self.n_remote += 1
                return future
        self._local(request, future)
        return future

    # -- internals

    def _local(self, request: VoteRequest, future: Future[VoteResult]) -> None:
        self.n_local += 1
        inner = self.fallback.submit(request)

        def copy(done: Future[VoteResult]) -> None:
            if future.done():
                return
            exc = done.exception()
            if exc is None:
                future.set_result(done.result())
            else:
                future.set_exception(exc)

        inner.add_done_callback(copy)

    def _connect_locked(self) -> _Connection | None:
        self._last_attempt = time.monotonic()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.connect_timeout_s)
            sock.connect(self.path)
            conn = _Connection(sock)
            hello = json.loads(conn.file.readline(MAX_LINE) or b"{}").get("hello")
        except (OSError, ValueError, AttributeError) as exc:
            sock.close()
            log.debug("vote writer at %s not reachable (%s); writing in-process", self.path, exc)
            return None
        if hello != self.expect:
            conn.close()
            log.error(
                "the vote writer at %s serves another database or live rating configuration "
                "(%s, expected %s); writing in-process",
                self.path,
                hello,
                self.expect,
            )
            return None
        sock.settimeout(None)
        self._conn = conn
        conn.reader = threading.Thread(
            target=self._read, args=(conn,), name="arena-vote-writer-client", daemon=True
        )
        conn.reader.start()
        log.info("votes go to the vote writer process at %s", self.path)
        return conn

    def _read(self, conn: _Connection) -> None:
        try:
            for line in conn.file:
                answer = json.loads(line)
                with self._lock:
                    entry = conn.pending.pop(answer.get("id"), None)
                if entry is not None:
                    settle(entry[1], answer)
        except (OSError, ValueError) as exc:
            log.warning("vote writer connection failed (%s)", exc)
        with self._lock:
            if self._conn is conn:
                self._conn = None
            pending, conn.pending = conn.pending, {}
        conn.close()
        if pending:
            log.warning(
                "vote writer went away with %d votes unanswered; retrying them in-process", len(pending)
            )
        # Written there, or, if the writer process committed them before it went, found there by token.
        for request, future in pending.values():
            if not future.done():
                self._local(request, future)
