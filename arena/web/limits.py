"""Request size limits, checked before a route runs: body bytes per route (413) and headers (431).

The body limit is read from ``Content-Length`` when the client sends one (refused before a byte of the
body is read) and counted as the body arrives otherwise (chunked transfer, or a client that lies), so
no route ever buffers more than its limit. Limits are chosen per route by the longest matching path
prefix; everything else gets the default, which fits any vote or form with room to spare.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyTooLarge", "RequestLimitsMiddleware"]


class BodyTooLarge(HTTPException):
    """The body passed the route's limit while it was being read (an HTTP 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"Request body too large: at most {limit:,} bytes here.")


class RequestLimitsMiddleware:
    """Refuse oversized bodies (413) and too many or too large headers (431) before the app sees them."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        default_body_bytes: int,
        body_bytes_by_prefix: Mapping[str, int],
        max_header_bytes: int,
        max_headers: int,
    ) -> None:
        self.app = app
        self.default_body_bytes = default_body_bytes
        self.prefixes = sorted(body_bytes_by_prefix.items(), key=lambda item: -len(item[0]))
        self.max_header_bytes = max_header_bytes
        self.max_headers = max_headers

    def body_limit(self, path: str) -> int:
        for prefix, limit in self.prefixes:
            if path.startswith(prefix):
                return limit
        return self.default_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        header_bytes = sum(len(name) + len(value) for name, value in headers)
        if len(headers) > self.max_headers or header_bytes > self.max_header_bytes:
            text = (
                f"Request headers too large: at most {self.max_headers} headers "
                f"and {self.max_header_bytes:,} bytes."
            )
            await _respond(send, 431, text)
            return
        limit = self.body_limit(scope["path"])
        declared = _content_length(headers)
        if declared is not None and declared > limit:
            await _respond(send, 413, BodyTooLarge(limit).detail)
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except BodyTooLarge as exc:  # raised where no handler turned it into a response
            if started:
                raise
            await _respond(send, 413, exc.detail)


def _content_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _respond(send: Send, status: int, text: str) -> None:
    body = json.dumps({"detail": text}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
