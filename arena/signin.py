"""Sign-in with OpenID Connect: one annotator per account, on every device and address.

Anonymous limits are keyed on what a visitor cannot shed (the address), but a deployment that wants to
count only real people asks them to sign in with a provider it trusts. This is the authorization-code
flow with PKCE: :meth:`OidcSignIn.begin` sends the browser to the provider with a fresh ``state``,
``nonce`` and code verifier kept in a short-lived signed cookie; :meth:`OidcSignIn.finish` checks the
returned ``state``, exchanges the code at the token endpoint and verifies the ID token (signature against
the provider's published keys, issuer, audience, expiry, nonce). Authlib's OAuth 2 client builds the
requests (PKCE, client authentication); joserfc, by the same maintainers, verifies the JWT. Nothing of
the account is stored but a keyed hash of (issuer, subject), which finds the account's annotator row.

Where the provider states when an account was made (a claim, ``created_at`` by default, in epoch seconds
or ISO 8601), accounts younger than ``oidc_min_account_age_days`` are refused: fresh accounts are what
sybils are made of. Providers that do not state it are taken as they are (the docs say so).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from authlib.integrations.httpx_client import AsyncOAuth2Client
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from arena.settings import Settings

__all__ = ["SIGNIN_COOKIE", "Account", "OidcSignIn", "SignInError", "safe_next"]

SIGNIN_COOKIE = "arena_signin"
#: The browser has this long to come back from the provider.
SIGNIN_TTL_S = 600
#: Bounds on what the provider sends back: documents, keys and tokens are small.
MAX_DOCUMENT_BYTES = 256 * 1024
MAX_CODE_CHARS = 4096
HTTP_TIMEOUT_S = 10.0
#: Clock difference tolerated between this site and the provider when checking ``exp``/``iat``.
LEEWAY_S = 60
ALGORITHMS = ["RS256", "ES256", "PS256", "EdDSA"]


class SignInError(Exception):
    """A sign-in that cannot go on; the message is safe to show and names what failed."""


@dataclass(frozen=True)
class Account:
    """A verified account: the key its annotator row is found by, and its creation time if stated."""

    key: str
    created_at: datetime | None


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this site only (no scheme, no host, no ``//``)."""
    if not target or len(target) > 500 or not target.startswith("/") or target.startswith("//"):
        return "/vote"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or "\\" in target or any(ord(c) < 32 for c in target):
        return "/vote"
    return target


def _created_at(value: Any) -> datetime | None:
    """An account creation claim as an aware datetime (epoch seconds or ISO 8601), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and 0 <= value < 1e11:
        return datetime.fromtimestamp(float(value), UTC)
    if isinstance(value, str) and len(value) <= 64:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return None


async def _get_json(client: httpx.AsyncClient, url: str, what: str) -> dict[str, Any]:
    """GET a JSON object of bounded size, or :class:`SignInError` naming ``what`` failed."""
    try:
        async with client.stream("GET", url) as response:
            if response.status_code != 200:
                raise SignInError(f"the sign-in provider's {what} answered HTTP {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body.extend(chunk)
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise SignInError(
                        f"the sign-in provider's {what} is larger than {MAX_DOCUMENT_BYTES} bytes"
                    )
    except httpx.HTTPError as exc:
        raise SignInError(f"the sign-in provider's {what} could not be read ({type(exc).__name__})") from None
    try:
        document = json.loads(bytes(body))
    except ValueError:
        raise SignInError(f"the sign-in provider's {what} is not JSON") from None
    if not isinstance(document, dict):
        raise SignInError(f"the sign-in provider's {what} is not a JSON object")
    return document


class OidcSignIn:
    """The provider's configuration (read once), the sign-in cookie, and the two halves of the flow."""

    def __init__(self, settings: Settings, secret: str, *, clock: Any = time.time) -> None:
        if settings.oidc_issuer is None or settings.oidc_client_id is None:
            raise ValueError("sign-in needs ARENA_OIDC_ISSUER and ARENA_OIDC_CLIENT_ID")
        self.issuer = settings.oidc_issuer
        self.client_id = settings.oidc_client_id
        self.client_secret = (
            settings.oidc_client_secret.get_secret_value() if settings.oidc_client_secret else None
        )
        self.min_age_days = settings.oidc_min_account_age_days
        self.created_claim = settings.oidc_account_created_claim
        self.clock = clock
        self._cookie = URLSafeTimedSerializer(secret, salt="arena-oidc-signin")
        self._account_key = hmac.new(secret.encode(), b"arena-oidc-account", hashlib.sha256).digest()
        self._metadata: dict[str, Any] | None = None
        self._keys: KeySet | None = None

    # -- the provider ------------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, follow_redirects=False)

    async def metadata(self) -> dict[str, Any]:
        """The provider's discovery document, read once and checked to name the configured issuer."""
        if self._metadata is None:
            async with self._http() as client:
                doc = await _get_json(
                    client, f"{self.issuer}/.well-known/openid-configuration", "configuration"
                )
            if str(doc.get("issuer", "")).rstrip("/") != self.issuer:
                raise SignInError("the sign-in provider's configuration names another issuer")
            for field in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                if not isinstance(doc.get(field), str):
                    raise SignInError(f"the sign-in provider's configuration has no {field}")
            self._metadata = doc
        return self._metadata

    async def _key_set(self, *, refresh: bool = False) -> KeySet:
        if self._keys is None or refresh:
            meta = await self.metadata()
            async with self._http() as client:
                jwks = await _get_json(client, str(meta["jwks_uri"]), "signing keys")
            try:
                self._keys = KeySet.import_key_set(jwks)  # type: ignore[arg-type]
            except (JoseError, ValueError, TypeError, KeyError):
                raise SignInError("the sign-in provider's signing keys cannot be read") from None
        return self._keys

    def _client(self, redirect_uri: str) -> AsyncOAuth2Client:
        return AsyncOAuth2Client(
            client_id=self.client_id,
            client_secret=self.client_secret,
            scope="openid",
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
            token_endpoint_auth_method="client_secret_basic" if self.client_secret else "none",
            timeout=HTTP_TIMEOUT_S,
        )

    # -- the flow ----------------------------------------------------------------------------------

    async def begin(self, redirect_uri: str, next_path: str | None) -> tuple[str, str]:
        """The provider's authorization URL and the signed cookie that remembers this attempt."""
        meta = await self.metadata()
        nonce, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(48)
        async with self._client(redirect_uri) as client:
            url, state = client.create_authorization_url(
                str(meta["authorization_endpoint"]), code_verifier=verifier, nonce=nonce
            )
        cookie = self._cookie.dumps({"s": state, "n": nonce, "v": verifier, "next": safe_next(next_path)})
        return url, cookie

    def _attempt(self, cookie: str | None) -> dict[str, str]:
        if not cookie or len(cookie) > 2048:
            raise SignInError("this sign-in was not started here, or its cookie was lost: start again")
        try:
            data = self._cookie.loads(cookie, max_age=SIGNIN_TTL_S)
        except SignatureExpired:
            raise SignInError("this sign-in took longer than ten minutes: start again") from None
        except BadSignature:
            raise SignInError("this sign-in was not started here: start again") from None
        if not isinstance(data, dict) or not all(
            isinstance(data.get(k), str) for k in ("s", "n", "v", "next")
        ):
            raise SignInError("this sign-in was not started here: start again")
        return {k: str(data[k]) for k in ("s", "n", "v", "next")}

    async def finish(
        self, cookie: str | None, params: dict[str, str], redirect_uri: str
    ) -> tuple[Account, str]:
        """The verified account and where to go next, from the provider's redirect back to us."""
        attempt = self._attempt(cookie)
        if "error" in params:
            raise SignInError(f"the sign-in provider refused: {params['error'][:100]}")
        state, code = params.get("state", ""), params.get("code", "")
        if not state or not hmac.compare_digest(state.encode(), attempt["s"].encode()):
            raise SignInError("the sign-in answer does not belong to this sign-in (state): start again")
        if not code or len(code) > MAX_CODE_CHARS:
            raise SignInError("the sign-in answer carries no usable code")
        meta = await self.metadata()
        try:
            async with self._client(redirect_uri) as client:
                token = await client.fetch_token(
                    str(meta["token_endpoint"]), code=code, code_verifier=attempt["v"]
                )
        except Exception as exc:  # noqa: BLE001 - Authlib raises its own and httpx's errors here
            raise SignInError(f"the sign-in provider did not give a token ({type(exc).__name__})") from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str) or len(id_token) > 16_384:
            raise SignInError("the sign-in provider's answer has no ID token")
        claims = await self._verify(id_token, attempt["n"])
        return self._account(claims), attempt["next"]

    async def _verify(self, id_token: str, nonce: str) -> dict[str, Any]:
        """The ID token's claims, once its signature, issuer, audience, times and nonce are checked."""
        try:
            decoded = jwt.decode(id_token, await self._key_set(), algorithms=ALGORITHMS)
        except (JoseError, ValueError):
            # A key rotated since we read the set: read it once more before refusing.
            try:
                decoded = jwt.decode(id_token, await self._key_set(refresh=True), algorithms=ALGORITHMS)
            except (JoseError, ValueError):
                raise SignInError("the ID token's signature does not verify") from None
        registry = jwt.JWTClaimsRegistry(
            now=lambda: int(self.clock()),
            leeway=LEEWAY_S,
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "value": self.client_id},
            sub={"essential": True},
            exp={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        try:
            registry.validate(decoded.claims)
        except JoseError as exc:
            raise SignInError(f"the ID token is not valid here ({exc.error}: {exc.description})") from None
        sub = decoded.claims.get("sub")
        if not isinstance(sub, str) or not 0 < len(sub) <= 255:
            raise SignInError("the ID token names no usable subject")
        return dict(decoded.claims)

    def _account(self, claims: dict[str, Any]) -> Account:
        created = _created_at(claims.get(self.created_claim))
        if created is not None and self.min_age_days > 0:
            age_days = (self.clock() - created.timestamp()) / 86_400
            if age_days < self.min_age_days:
                raise SignInError(
                    f"this account is younger than {self.min_age_days} days;"
                    " votes are taken from older accounts"
                )
        msg = f"{self.issuer}\n{claims['sub']}".encode()
        return Account(
            key="oidc:" + hmac.new(self._account_key, msg, hashlib.sha256).hexdigest()[:59],
            created_at=created,
        )
