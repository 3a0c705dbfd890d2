"""The connection guard on uvicorn's httptools protocol, which `arena serve` runs: httptools sets no limit
on header size, so the guard refuses headers past ``ARENA_MAX_HEADER_BYTES`` while they arrive (431),
and lets large bodies and headers under the limit through. The same server runs h11's guarded protocol
for comparison: both must refuse the oversized headers and answer the rest."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from arena.web.connections import (
    GuardedH11Protocol,
    GuardedHttpToolsProtocol,
    _ConnectionGuard,
    guarded_protocol,
)

LIMIT = 4096


async def _echo_length(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A bare ASGI app: answers 200 with the size of the body it read."""
    if scope["type"] != "http":
        return
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = str(size).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]}
    )
    await send({"type": "http.response.body", "body": body})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _serving(protocol: type[asyncio.Protocol], monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A uvicorn server on a free port running ``protocol`` with header limit LIMIT; yields the port."""
    monkeypatch.setenv("ARENA_MAX_HEADER_BYTES", str(LIMIT))
    monkeypatch.setattr(_ConnectionGuard, "_limits", None)  # read again with the limit above
    port = _free_port()
    config = uvicorn.Config(
        _echo_length,
        host="127.0.0.1",
        port=port,
        http=protocol,
        h11_max_incomplete_event_size=LIMIT,
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the test server did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(30)
        monkeypatch.setattr(_ConnectionGuard, "_limits", None)


@pytest.fixture(params=["httptools", "h11"])
def server_port(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    protocol = GuardedHttpToolsProtocol if request.param == "httptools" else GuardedH11Protocol
    with _serving(protocol, monkeypatch) as port:
        yield port


def _exchange(port: int, chunks: list[bytes]) -> bytes:
    """Send the chunks one by one (a short pause between them) and read until the server closes or stops."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        try:
            for chunk in chunks:
                conn.sendall(chunk)
                time.sleep(0.01)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused part-way: the answer was written before the close
        # The first bytes of the answer may take a while on a busy machine; once it has begun, a pause of
        # 2 s means the server has said all it will on a connection it keeps open.
        conn.settimeout(15)
        answer = b""
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                answer += data
                conn.settimeout(2)
                if answer.count(b"HTTP/1.1") >= 2 or (
                    b"\r\n\r\n" in answer and b"connection: close" in answer
                ):
                    break
        except (TimeoutError, ConnectionResetError):
            pass
    return answer


def test_arena_serve_runs_the_httptools_guard() -> None:
    assert GuardedHttpToolsProtocol is not None
    assert guarded_protocol() is GuardedHttpToolsProtocol


def test_oversized_headers_are_refused_while_they_arrive(server_port: int) -> None:
    head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: "
    chunks = [head] + [b"z" * 1024] * 200 + [b"\r\n\r\n"]  # 200 KB of one header, in 1 KB reads
    answer = _exchange(server_port, chunks)
    status = answer.split(b"\r\n", 1)[0]
    assert status in (b"HTTP/1.1 431 Request Header Fields Too Large", b"HTTP/1.1 400 Bad Request"), answer[
        :200
    ]
    assert b"200 OK" not in answer


def test_httptools_guard_answers_431(monkeypatch: pytest.MonkeyPatch) -> None:
    """One read holding too much of a request's headers, and no end of them: 431 and the close."""
    with _serving(GuardedHttpToolsProtocol, monkeypatch) as port:
        answer = _exchange(port, [b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ", b"z" * 20_000, b"z" * 20_000])
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]


def test_headers_under_the_limit_and_large_bodies_pass(server_port: int) -> None:
    small = b"GET / HTTP/1.1\r\nHost: x\r\nX-Some: " + b"y" * (LIMIT // 2) + b"\r\n\r\n"
    assert _exchange(server_port, [small]).startswith(b"HTTP/1.1 200 "), "headers under the limit"
    body = b"b" * 300_000  # far above the header limit, in the same reads as the headers
    post = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    answer = _exchange(server_port, [post + body[:100_000], body[100_000:]])
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert answer.endswith(b"300000")


def test_kept_alive_connection_counts_each_request_afresh(server_port: int) -> None:
    """Many requests on one connection, each well under the limit, together far above it: all answered."""
    one = b"GET / HTTP/1.1\r\nHost: x\r\nX-Some: " + b"y" * (LIMIT // 2) + b"\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server_port), timeout=10) as conn:
        for _ in range(6):
            conn.sendall(one)
            answer = b""
            while not answer.endswith(b"\r\n\r\n0"):
                data = conn.recv(65536)
                assert data, "the server closed a kept-alive connection"
                answer += data
            assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
