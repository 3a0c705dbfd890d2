"""A local OpenID Connect provider for the sign-in tests: real HTTP on a loopback port.

It serves discovery, an authorization endpoint that approves at once (the "user" is whoever the test
names in :attr:`LocalProvider.subject`), a token endpoint that checks the client's secret, the code,
the redirect URI and the PKCE verifier, and its public keys. ``forge`` makes the next ID token wrong in
one way (another audience, issuer or nonce, expired, signed by a key it does not publish) so the tests
can show each is refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

CLIENT_ID = "arena-test"
CLIENT_SECRET = "arena-test-secret"  # noqa: S105 - a test provider's fixed secret


@dataclass
class LocalProvider:
    """What the provider does next; the tests set these between requests."""

    issuer: str = ""
    subject: str = "alice"
    extra_claims: dict[str, Any] = field(default_factory=dict)
    forge: str | None = None  # "aud", "iss", "nonce", "expired", "key"
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    stranger: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    tokens_issued: int = 0

    def id_token(self, grant: dict[str, str]) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": CLIENT_ID,
            "sub": grant["sub"],
            "iat": now,
            "exp": now + 300,
            "nonce": grant["nonce"],
            **self.extra_claims,
        }
        if self.forge == "aud":
            claims["aud"] = "another-client"
        elif self.forge == "iss":
            claims["iss"] = "http://127.0.0.1:1/evil"
        elif self.forge == "nonce":
            claims["nonce"] = "replayed"
        elif self.forge == "expired":
            claims["iat"], claims["exp"] = now - 3600, now - 1800
        key = self.stranger if self.forge == "key" else self.key
        return jwt.encode({"alg": "RS256", "kid": "k1"}, claims, key)


def _handler(provider: LocalProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            return

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/.well-known/openid-configuration":
                self._json(
                    200,
                    {
                        "issuer": provider.issuer,
                        "authorization_endpoint": f"{provider.issuer}/authorize",
                        "token_endpoint": f"{provider.issuer}/token",
                        "jwks_uri": f"{provider.issuer}/jwks",
                        "response_types_supported": ["code"],
                        "id_token_signing_alg_values_supported": ["RS256"],
                    },
                )
            elif url.path == "/jwks":
                self._json(200, dict(KeySet([provider.key]).as_dict(private=False)))
            elif url.path == "/authorize":
                if query.get("client_id") != CLIENT_ID or query.get("code_challenge_method") != "S256":
                    self._json(400, {"error": "invalid_request"})
                    return
                code = secrets.token_urlsafe(16)
                provider.codes[code] = {
                    "redirect_uri": query["redirect_uri"],
                    "nonce": query.get("nonce", ""),
                    "challenge": query["code_challenge"],
                    "sub": provider.subject,
                }
                back = f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query.get('state', '')})}"
                self.send_response(302)
                self.send_header("Location", back)
                self.end_headers()
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length") or 0)
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
            if urlsplit(self.path).path != "/token" or self.headers.get("Authorization") != expected:
                self._json(401, {"error": "invalid_client"})
                return
            grant = provider.codes.pop(form.get("code", ""), None)  # a code is good once
            verifier = form.get("code_verifier", "")
            challenge = (
                base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            )
            if (
                grant is None
                or grant["redirect_uri"] != form.get("redirect_uri")
                or challenge != grant["challenge"]
            ):
                self._json(400, {"error": "invalid_grant"})
                return
            provider.tokens_issued += 1
            self._json(
                200,
                {
                    "access_token": secrets.token_urlsafe(16),
                    "token_type": "Bearer",
                    "id_token": provider.id_token(grant),
                },
            )

    return Handler


@contextmanager
def serve_provider() -> Iterator[LocalProvider]:
    """A :class:`LocalProvider` on a free loopback port until the block ends."""
    provider = LocalProvider()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(provider))
    provider.issuer = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
