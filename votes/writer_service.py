"""The vote writer as a process of its own, so that several web workers share one group commit.

With a writer per web worker, the workers' transactions queue on the same live-rating row locks (on SQLite,
on the database lock, through the busy handler's sleeps), each waiting for the other's commit and fsync.
One writer process gathers the votes of every worker into one transaction instead. Workers talk to it over
a Unix socket (one JSON object per line); it answers each vote only after its commit, like the in-process
:class:`~votes.store.GroupCommitWriter`, which it runs.

Correctness does not depend on this process: every writer still takes the row locks, so a worker that cannot
reach it (not started, restarted, crashed) writes through its own in-process writer, and a vote whose answer
was lost with the connection is submitted again there: its battle token makes that retry return the vote
already written, never a second one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from leaderboard.elo import EloConfig
from votes.store import (
    AlreadyVotedError,
    GroupCommitWriter,
    IssuedBattle,
    VoteError,
    VoteRequest,
    VoteResult,
    VoteWriter,
)

__all__ = [
    "PROTOCOL",
    "RemoteVoteWriter",
    "VoteWriterError",
    "database_fingerprint",
    "serve_vote_writer",
    "writer_identity",
]

log = logging.getLogger(__name__)

#: Version of the line protocol; a worker refuses a writer that speaks another.
PROTOCOL = 1
#: Longest line either side accepts (a vote is a few hundred bytes).
MAX_LINE = 64 * 1024


class VoteWriterError(RuntimeError):
    """The writer process failed to record a vote for a reason other than the vote itself."""


# --------------------------------------------------------------------------------------------------
# Identity: a worker must never send its votes to a writer of another database or another Elo.


def database_fingerprint(engine: Engine) -> str:
    """A hash naming the database (password left out; a SQLite file by its absolute path)."""
    url = engine.url
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        url = url.set(database=os.path.abspath(str(url.database)))
    rendered = url.render_as_string(hide_password=True)
    return hashlib.sha256(rendered.encode()).hexdigest()[:16]


def writer_identity(engine: Engine, config: EloConfig) -> dict[str, Any]:
    """What a writer says first and what a worker expects to hear."""
    elo = asdict(config)
    elo["provisional"] = [list(p) for p in config.provisional]
    return {"protocol": PROTOCOL, "database": database_fingerprint(engine), "elo": elo}


# --------------------------------------------------------------------------------------------------
# Wire format


def _request_to_wire(request: VoteRequest) -> dict[str, Any]:
    b = request.battle
    # Written out: dataclasses.asdict deep-copies every value and cost 5% of a worker's CPU.
    battle = {
        "token_id": b.token_id,
        "annotator_id": b.annotator_id,
        "prompt_id": b.prompt_id,
        "output_a_id": b.output_a_id,
        "output_b_id": b.output_b_id,
        "model_a_id": b.model_a_id,
        "model_b_id": b.model_b_id,
        "issued_at": b.issued_at.isoformat(),
        "pair_probability": b.pair_probability,
    }
    return {
        "battle": battle,
        "winner": request.winner,
        "client_hash": request.client_hash,
        "idempotency_key": request.idempotency_key,
        "voted_at": request.voted_at.isoformat() if request.voted_at else None,
    }


def _request_from_wire(data: dict[str, Any]) -> VoteRequest:
    b = dict(data["battle"])
    b["issued_at"] = datetime.fromisoformat(b["issued_at"])
    voted_at = data.get("voted_at")
    return VoteRequest(
        battle=IssuedBattle(**b),
        winner=str(data["winner"]),
        client_hash=data.get("client_hash"),
        idempotency_key=data.get("idempotency_key"),
        voted_at=datetime.fromisoformat(voted_at) if voted_at else None,
    )


def _outcome_to_wire(future: Future[VoteResult]) -> dict[str, Any]:
    exc = future.exception()
    if exc is None:
        return {"result": vars(future.result())}
    if isinstance(exc, AlreadyVotedError):
        return {"error": {"kind": "already_voted", "message": str(exc), "battle_id": exc.battle_id}}
    if isinstance(exc, VoteError):
        return {"error": {"kind": "vote", "message": str(exc)}}
    if isinstance(exc, ValueError):  # a request the store refuses outright (an unknown winner)
        return {"error": {"kind": "value", "message": str(exc)}}
    return {"error": {"kind": "internal", "message": f"{type(exc).__name__}: {exc}"}}


def _settle(future: Future[VoteResult], answer: dict[str, Any]) -> None:
    if future.done():
        return
    if "result" in answer:
        future.set_result(VoteResult(**answer["result"]))
        return
    error = answer.get("error") or {}
    kind, message = error.get("kind"), str(error.get("message", "vote writer error"))
    if kind == "already_voted":
        future.set_exception(AlreadyVotedError(int(error["battle_id"])))
    elif kind == "vote":
        future.set_exception(VoteError(message))
    elif kind == "value":
        future.set_exception(ValueError(message))
    else:
        future.set_exception(VoteWriterError(message))


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


# --------------------------------------------------------------------------------------------------
# The writer process


class _Outbox:
    """Answers handed from the writer thread to the event loop, one wake-up and one send per batch.

    Waking the loop and writing to the socket once per vote cost a system call each, on both sides.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._items: list[tuple[asyncio.StreamWriter, bytes]] = []
        self._scheduled = False

    def put(self, out: asyncio.StreamWriter, data: bytes) -> None:
        with self._lock:
            self._items.append((out, data))
            if self._scheduled:
                return
            self._scheduled = True
        self._loop.call_soon_threadsafe(self._flush)

    def _flush(self) -> None:
        with self._lock:
            items, self._items = self._items, []
            self._scheduled = False
        by_stream: dict[asyncio.StreamWriter, list[bytes]] = {}
        for out, data in items:  # answers to one worker keep their order
            by_stream.setdefault(out, []).append(data)
        for out, chunks in by_stream.items():
            if not out.is_closing():
                out.write(b"".join(chunks))


async def _serve(
    writer: GroupCommitWriter,
    path: Path,
    hello: bytes,
    stop: threading.Event,
    on_ready: Callable[[], None] | None,
) -> None:
    streams: set[asyncio.StreamWriter] = set()
    handlers: set[asyncio.Task[Any]] = set()
    outbox = _Outbox(asyncio.get_running_loop())

    def answer(out: asyncio.StreamWriter, rid: Any, future: Future[VoteResult]) -> None:
        # Runs in the writer thread, right after the commit; the event loop does the sending.
        outbox.put(out, _line({"id": rid, **_outcome_to_wire(future)}))

    async def connection(reader: asyncio.StreamReader, out: asyncio.StreamWriter) -> None:
        streams.add(out)
        task = asyncio.current_task()
        if task is not None:
            handlers.add(task)
        out.write(hello)
        try:
            while line := await reader.readline():
                try:
                    message = json.loads(line)
                    rid = message["id"]
                    request = _request_from_wire(message["vote"])
                except (ValueError, KeyError, TypeError) as exc:
                    log.warning("vote writer: unreadable message dropped (%s)", exc)
                    continue
                writer.submit(request).add_done_callback(functools.partial(answer, out, rid))
        except (ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass  # a worker went away or sent an over-long line: its votes already queued still commit
        finally:
            streams.discard(out)
            out.close()

    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a socket left behind by a writer that was killed
    umask = os.umask(0o177)  # the socket is born 0600: only this user's processes may hand in votes
    try:
        server = await asyncio.start_unix_server(connection, path=str(path), limit=MAX_LINE)
    finally:
        os.umask(umask)
    if on_ready is not None:
        on_ready()
    await _wait_for(stop)
    server.close()  # no new workers; the queued votes are committed and answered before the sockets close
    await asyncio.to_thread(writer.stop)
    await asyncio.sleep(0)  # let the last answers (scheduled from the writer thread) be written
    for out in list(streams):
        with contextlib.suppress(ConnectionError):
            await out.drain()
        out.close()
    if handlers:  # each sees its stream end and returns
        await asyncio.wait(handlers, timeout=5.0)
    await server.wait_closed()


async def _wait_for(event: threading.Event) -> None:
    """Await a thread event from a daemon thread (an executor thread would keep the interpreter alive)."""
    loop = asyncio.get_running_loop()
    done = asyncio.Event()

    def watch() -> None:
        event.wait()
        with contextlib.suppress(RuntimeError):  # the loop is gone already
            loop.call_soon_threadsafe(done.set)

    threading.Thread(target=watch, name="arena-vote-writer-stop", daemon=True).start()
    await done.wait()


def serve_vote_writer(
    engine: Engine,
    socket_path: str | os.PathLike[str],
    *,
    config: EloConfig,
    max_wait_ms: float = 2.0,
    max_batch: int = 256,
    stop: threading.Event | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Run the writer until ``stop`` is set (or forever); queued votes are committed and answered first."""
    path = Path(socket_path)
    writer = GroupCommitWriter(engine, config=config, max_wait_ms=max_wait_ms, max_batch=max_batch)
    hello = _line({"hello": writer_identity(engine, config)})
    writer.start()
    try:
        asyncio.run(_serve(writer, path, hello, stop or threading.Event(), on_ready))
    finally:
        writer.stop()  # a no-op after a clean stop; after an error, commits what was queued
        if writer.n_batches:
            log.info(
                "vote writer: %d votes in %d transactions (%.1f per commit), %.1f s busy writing",
                writer.n_votes,
                writer.n_batches,
                writer.n_votes / writer.n_batches,
                writer.busy_s,
            )
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


# --------------------------------------------------------------------------------------------------
# The worker's side


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

    Has the interface of :class:`~votes.store.GroupCommitWriter`: ``submit`` returns a future resolved
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
                    conn.sock.sendall(_line({"id": rid, "vote": _request_to_wire(request)}))
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
                "the vote writer at %s serves another database or Elo configuration (%s, expected %s); "
                "writing in-process",
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
                    _settle(entry[1], answer)
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
