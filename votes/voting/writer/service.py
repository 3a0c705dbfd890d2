"""The vote writer as a process of its own, so that several web workers share one group commit.

With a writer per web worker, the workers' transactions queue on the same live-rating row locks (on SQLite,
on the database lock, through the busy handler's sleeps), each waiting for the other's commit and fsync.
One writer process gathers the votes of every worker into one transaction instead. Workers talk to it over
a Unix socket (one JSON object per line, :mod:`votes.voting.writer.wire`); it answers each vote only after its
commit, like the in-process :class:`~votes.voting.writer.GroupCommitWriter`, which it runs.

Correctness does not depend on this process: every writer still takes the row locks, so a worker that cannot
reach it (not started, restarted, crashed) writes through its own in-process writer, and a vote whose answer
was lost with the connection is submitted again there: its battle token makes that retry return the vote
already written, never a second one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import logging
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from votes.db import make_engine
from votes.voting.battles import VoteRequest, VoteResult
from votes.voting.live import LiveConfig
from votes.voting.writer.group_commit import GroupCommitWriter
from votes.voting.writer.wire import MAX_LINE, encode_line, outcome_to_wire, writer_identity

__all__ = ["run_vote_writer", "serve_vote_writer"]

log = logging.getLogger(__name__)


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

    def answer(
        out: asyncio.StreamWriter, rid: Any, request_id: str | None, future: Future[VoteResult]
    ) -> None:
        # Runs in the writer thread, right after the commit; the event loop does the sending.
        outbox.put(out, encode_line({"id": rid, **outcome_to_wire(future)}))
        if request_id is not None and future.exception() is None:
            result = future.result()
            log.info(
                "vote committed",
                extra={
                    "request_id": request_id,
                    "vote_id": result.vote_id,
                    "battle_id": result.battle_id,
                    "replayed": result.replayed,
                },
            )

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
                    request = VoteRequest.from_dict(message["vote"])
                except (ValueError, KeyError, TypeError) as exc:
                    log.warning("vote writer: unreadable message dropped (%s)", exc)
                    continue
                future = writer.submit(request)
                future.add_done_callback(functools.partial(answer, out, rid, request.request_id))
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
    config: LiveConfig,
    max_wait_ms: float = 2.0,
    max_batch: int = 256,
    stop: threading.Event | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Run the writer until ``stop`` is set (or forever); queued votes are committed and answered first."""
    path = Path(socket_path)
    writer = GroupCommitWriter(engine, config=config, max_wait_ms=max_wait_ms, max_batch=max_batch)
    hello = encode_line({"hello": writer_identity(engine, config)})
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


def run_vote_writer(
    database_url: str,
    socket_path: str | os.PathLike[str],
    *,
    config: LiveConfig,
    max_wait_ms: float = 2.0,
    max_batch: int = 256,
    parent_pid: int | None = None,
    ignore_interrupt: bool = False,
) -> None:
    """The vote writer process's life: serve until SIGTERM (or SIGINT, unless ``ignore_interrupt``).

    With ``parent_pid`` it also stops when that process is gone (a supervisor that died without stopping
    it). Installs signal handlers: call it from the process's main thread.
    """
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN if ignore_interrupt else lambda *_: stop.set())
    if parent_pid is not None:

        def watch_parent() -> None:
            while not stop.wait(1.0):
                if os.getppid() != parent_pid:  # the parent died without stopping us
                    stop.set()

        threading.Thread(target=watch_parent, name="arena-parent-watch", daemon=True).start()
    engine = make_engine(database_url)
    gc.collect()
    gc.freeze()  # start-up objects live as long as the process; full collections need not walk them
    try:
        serve_vote_writer(
            engine, socket_path, config=config, max_wait_ms=max_wait_ms, max_batch=max_batch, stop=stop
        )
    finally:
        engine.dispose()
