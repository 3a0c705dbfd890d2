"""Connections that cannot starve the site: a header-read timeout and caps per address and in total.

Without them one host holding thousands of idle sockets (each sending a byte a second, so no idle
timeout ever fires) takes every file descriptor and the site with it. The guard is added to uvicorn's
HTTP protocols, read from the ``ARENA_*`` settings of the worker process:

- a request's headers must arrive within ``header_timeout_seconds`` of the connection opening (or of the
  previous response, on a kept-alive connection), or the connection is answered 408 and closed;
- an address holding ``max_connections_per_address`` connections already gets 503 with ``Retry-After``
  and the connection closed at once; so does anyone when the worker holds ``max_connections``;
- a warning in the log (once a minute at most) when the open connections pass 90% of the process's file
  descriptor limit, before ``accept`` starts failing.

:class:`GuardedHttpToolsProtocol` (uvicorn's httptools parser, written in C) is what `arena serve` runs
when httptools is installed (uvicorn[standard] brings it): with the pure-Python h11 parser the site
took about 15% fewer votes per second (scripts/bench_votes.py, side by side). httptools sets no limit on
header size, so the guard refuses a request whose headers pass ``max_header_bytes`` while they arrive
(431 and the connection closed), as h11 does itself with ``h11_max_incomplete_event_size``.
:class:`GuardedH11Protocol` is the fallback.

IPv6 addresses are counted per /64, which is what one subscriber usually gets
(:func:`arena.security.address_key`). A reverse proxy in front should apply the same limits to the
clients' addresses (docs/deployment.md): behind it every connection comes from the proxy's address.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import Counter
from typing import Any, ClassVar, NamedTuple

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol  # httptools: uvicorn[standard]

from arena.security import address_key
from arena.settings import Settings

__all__ = ["GuardedH11Protocol", "GuardedHttpToolsProtocol", "guarded_protocol"]

log = logging.getLogger(__name__)

_REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nretry-after: 10\r\n"
    b"connection: close\r\ncontent-length: 32\r\n\r\nToo many connections; try later.\n"
)
_TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    b"content-length: 27\r\n\r\nRequest headers too slow.\n\n"
)
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 25\r\n\r\nRequest headers too large\n"
)
_WARN_EVERY_SECONDS = 60.0


class _Limits(NamedTuple):
    header_timeout: float
    per_address: int
    total: int
    descriptors: int
    header_bytes: int


class _ConnectionGuard(asyncio.Protocol):
    """The guard, put in front of one of uvicorn's HTTP protocols (it must come first among the bases)."""

    # Shared by every connection of this worker process (one event loop), whichever protocol it runs.
    _per_address: ClassVar[Counter[str]] = Counter()
    _open: ClassVar[int] = 0
    _limits: ClassVar[_Limits | None] = None
    _last_warning: ClassVar[float] = float("-inf")
    # Set by uvicorn's protocol.
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    cycle: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._key: str | None = None
        self._header_timer: asyncio.TimerHandle | None = None

    @classmethod
    def limits(cls) -> _Limits:
        """The header timeout, the caps, the file descriptor limit and the header size limit, read once per
        process."""
        if _ConnectionGuard._limits is None:
            settings = Settings()
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            descriptors = soft if soft != resource.RLIM_INFINITY else 1 << 20
            _ConnectionGuard._limits = _Limits(
                settings.header_timeout_seconds,
                settings.max_connections_per_address,
                settings.max_connections,
                descriptors,
                settings.max_header_bytes,
            )
        return _ConnectionGuard._limits

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        limits = self.limits()
        peer = transport.get_extra_info("peername")
        key = address_key(str(peer[0])) if isinstance(peer, tuple) and peer else "unknown"
        cls = _ConnectionGuard
        if cls._open >= limits.total or cls._per_address[key] >= limits.per_address:
            transport.write(_REFUSED)
            transport.close()
            self.transport = transport
            return
        self._key = key
        cls._per_address[key] += 1
        cls._open += 1
        if cls._open >= 0.9 * limits.descriptors:
            now = time.monotonic()
            if now - cls._last_warning >= _WARN_EVERY_SECONDS:
                cls._last_warning = now
                log.warning(
                    "%d connections open, near the limit of %d file descriptors: raise `ulimit -n` or "
                    "lower ARENA_MAX_CONNECTIONS",
                    cls._open,
                    limits.descriptors,
                )
        super().connection_made(transport)
        self._start_header_timer(limits.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._key is None:  # refused at the door: uvicorn never saw it
            return
        self._stop_header_timer()
        cls = _ConnectionGuard
        cls._open -= 1
        cls._per_address[self._key] -= 1
        if cls._per_address[self._key] <= 0:
            del cls._per_address[self._key]
        self._key = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._key is None:
            return
        before = self.cycle
        super().data_received(data)
        if self.cycle is not None and self.cycle is not before:  # a request's headers are complete
            self._stop_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if self._key is not None and not self.transport.is_closing():
            self._start_header_timer(self.limits().header_timeout)  # the next request's headers are timed

    def _start_header_timer(self, timeout: float) -> None:
        self._stop_header_timer()
        self._header_timer = self.loop.call_later(timeout, self._headers_too_slow)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being answered: not a header read
        if not self.transport.is_closing():
            self.transport.write(_TIMED_OUT)
            self.transport.close()


class GuardedH11Protocol(_ConnectionGuard, H11Protocol):
    """uvicorn's h11 protocol with the guard (h11 bounds the header size itself)."""


class GuardedHttpToolsProtocol(_ConnectionGuard, HttpToolsProtocol):
    """uvicorn's httptools protocol with the guard and a bound on the bytes of a request's headers.

    The bytes are counted from the start of a request until its headers are complete, a whole read at
    a time: a read that completes the headers is let through (its size is bounded by the transport),
    and one that only starts a request is not counted, so what is held stays below the limit plus two
    reads.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_headers = False
        self._header_bytes = 0

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_headers = True
        self._header_bytes = 0

    def on_headers_complete(self) -> None:
        self._in_headers = False
        super().on_headers_complete()

    def data_received(self, data: bytes) -> None:
        counted = self._in_headers
        super().data_received(data)
        if not self._in_headers or self._key is None:
            return
        if counted:
            self._header_bytes += len(data)
        if self._header_bytes > self.limits().header_bytes and not self.transport.is_closing():
            self._stop_header_timer()
            self.transport.write(_TOO_LARGE)
            self.transport.close()


def guarded_protocol() -> type[asyncio.Protocol]:
    """The guarded protocol `arena serve` runs: httptools' (C parser; h11's is kept for the tests that
    compare both)."""
    return GuardedHttpToolsProtocol
