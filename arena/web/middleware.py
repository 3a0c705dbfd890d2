"""The web app's ASGI middleware: the client address behind trusted proxies, the session cookie, and the
security headers on every response.

:func:`arena.app.create_app` installs all three; each is plain ASGI (no per-request task or body copy).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from arena.security import SESSION_COOKIE

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "SECURITY_HEADERS",
    "SecurityHeadersMiddleware",
    "SessionCookieMiddleware",
    "TrustedProxyMiddleware",
]

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), interest-cohort=()"),
    (b"cross-origin-opener-policy", b"same-origin"),
]

# Where the connection's own peer waits while uvicorn's middleware may replace ``scope["client"]``.
_PEER_KEY = "arena.peer"


def _is_ip_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class TrustedProxyMiddleware:
    """The real client address when the site runs behind its own reverse proxies.

    uvicorn's ``ProxyHeadersMiddleware`` does the work: ``X-Forwarded-For`` (and ``X-Forwarded-Proto``)
    are believed only when the connection comes from one of ``trusted`` (addresses or networks), and the
    client is the nearest hop, walking outwards, that is not one of them, so a hop a client wrote itself
    is never taken. One thing is added: a forwarded client that is not an IP address is not believed
    either, and the connection's peer stays the client.
    """

    def __init__(self, app: ASGIApp, *, trusted: Sequence[str]) -> None:
        # Normalised here (``10.0.0.1/8`` is the network 10.0.0.0/8); a malformed entry fails at start-up.
        networks = [str(ipaddress.ip_network(entry, strict=False)) for entry in trusted]
        self.app = app
        # Starlette spells ASGI messages as plain mappings, uvicorn as TypedDicts: the same protocol.
        self._proxy_headers = ProxyHeadersMiddleware(self._checked, networks)  # type: ignore[arg-type]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope[_PEER_KEY] = scope.get("client")
        await self._proxy_headers(scope, receive, send)  # type: ignore[arg-type]

    async def _checked(self, scope: Scope, receive: Receive, send: Send) -> None:
        peer = scope.pop(_PEER_KEY, None)
        client = scope.get("client")
        if client and not _is_ip_address(client[0]):
            scope["client"] = peer
        await self.app(scope, receive, send)


class SessionCookieMiddleware:
    """Sets the session cookie that a route created (``scope['state']['set_session']``) on its response."""

    def __init__(self, app: ASGIApp, *, secure: bool) -> None:
        self.app = app
        self.secure = secure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                cookie = scope.get("state", {}).get("set_session")
                if cookie:
                    attrs = "; Path=/; HttpOnly; SameSite=Lax; Max-Age=31536000"
                    if self.secure:
                        attrs += "; Secure"
                    headers = list(message.get("headers", []))
                    headers.append((b"set-cookie", f"{SESSION_COOKIE}={cookie}{attrs}".encode()))
                    message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_cookie)


class SecurityHeadersMiddleware:
    """Pure ASGI middleware adding the security headers to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers.extend((k, v) for k, v in SECURITY_HEADERS if k not in present)
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)
