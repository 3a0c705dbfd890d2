"""Connections that cannot starve the site: a header-read timeout and caps per address and in total.

Without them one host holding thousands of idle sockets (each sending a byte a second, so no idle
timeout ever fires) takes every file descriptor and the site with it. This is uvicorn's h11 protocol with
three additions, read from the ``ARENA_*`` settings of the worker process:

- a request's headers must arrive within ``header_timeout_seconds`` of the connection opening (or of the
  previous response, on a kept-alive connection), or the connection is answered 408 and closed;
- an address holding ``max_connections_per_address`` connections already gets 503 with ``Retry-After``
  and the connection closed at once; so does anyone when the worker holds ``max_connections``;
- a warning in the log (once a minute at most) when the open connections pass 90% of the process's file
  descriptor limit, before ``accept`` starts failing.

IPv6 addresses are counted per /64, which is what one subscriber usually gets. A reverse proxy in front
should apply the same limits to the clients' addresses (docs/deployment.md): behind it every connection
comes from the proxy's address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import resource
import time
from collections import Counter
from typing import Any, ClassVar

from uvicorn.protocols.http.h11_impl import H11Protocol

from arena.settings import Settings

__all__ = ["GuardedH11Protocol", "address_key"]

log = logging.getLogger(__name__)

_REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nretry-after: 10\r\n"
    b"connection: close\r\ncontent-length: 32\r\n\r\nToo many connections; try later.\n"
)
_TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    b"content-length: 27\r\n\r\nRequest headers too slow.\n\n"
)
_WARN_EVERY_SECONDS = 60.0


def address_key(host: str) -> str:
    """What a connection cap counts: the IPv4 address, or the /64 of an IPv6 address."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is None:
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address.ipv4_mapped or address) if isinstance(address, ipaddress.IPv6Address) else str(address)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header-read timeout and per-address and total connection caps."""

    # Shared by every connection of this worker process (one event loop).
    _per_address: ClassVar[Counter[str]] = Counter()
    _open: ClassVar[int] = 0
    _limits: ClassVar[tuple[float, int, int, int] | None] = None
    _last_warning: ClassVar[float] = float("-inf")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._key: str | None = None
        self._header_timer: asyncio.TimerHandle | None = None

    @classmethod
    def limits(cls) -> tuple[float, int, int, int]:
        """(header timeout, per-address cap, total cap, file descriptor limit), read once per process."""
        if cls._limits is None:
            settings = Settings()
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            descriptors = soft if soft != resource.RLIM_INFINITY else 1 << 20
            cls._limits = (
                settings.header_timeout_seconds,
                settings.max_connections_per_address,
                settings.max_connections,
                descriptors,
            )
        return cls._limits

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        timeout, per_address, total, descriptors = self.limits()
        peer = transport.get_extra_info("peername")
        key = address_key(str(peer[0])) if isinstance(peer, tuple) and peer else "unknown"
        cls = GuardedH11Protocol
        if cls._open >= total or cls._per_address[key] >= per_address:
            transport.write(_REFUSED)
            transport.close()
            self.transport = transport
            return
        self._key = key
        cls._per_address[key] += 1
        cls._open += 1
        if cls._open >= 0.9 * descriptors:
            now = time.monotonic()
            if now - cls._last_warning >= _WARN_EVERY_SECONDS:
                cls._last_warning = now
                log.warning(
                    "%d connections open, near the limit of %d file descriptors: raise `ulimit -n` or "
                    "lower ARENA_MAX_CONNECTIONS",
                    cls._open,
                    descriptors,
                )
        super().connection_made(transport)
        self._start_header_timer(timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._key is None:  # refused at the door: uvicorn never saw it
            return
        self._stop_header_timer()
        cls = GuardedH11Protocol
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
        super().on_response_complete()
        if self._key is not None and not self.transport.is_closing():
            self._start_header_timer(self.limits()[0])  # the next request's headers are on the clock

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
