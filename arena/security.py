"""Sessions, battle tokens, CSRF, rate limits and admin tokens.

Battle tokens are *encrypted* as well as signed (Fernet: AES-CBC + HMAC-SHA256, with a timestamp), because
the token carries the model ids of both sides: a signed-only token would be readable base64, and after a
few reveals an annotator could map ids to names and vote un-blind.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import ipaddress
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cryptography.fernet import Fernet, InvalidToken
from itsdangerous import BadSignature, URLSafeSerializer

from votes.voting.battles import IssuedBattle

__all__ = [
    "BattleTokenError",
    "BattleTokens",
    "InMemoryRateLimiter",
    "RateLimiter",
    "RedisRateLimiter",
    "SessionData",
    "Signer",
    "address_key",
    "hash_secret",
    "verify_admin_token",
]

SESSION_COOKIE = "arena_session"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"


def hash_secret(value: str) -> str:
    """sha256 hex of a secret (invite tokens are stored only as this)."""
    return hashlib.sha256(value.encode()).hexdigest()


def _derive_key(secret: str, purpose: str) -> bytes:
    return hmac.new(secret.encode(), purpose.encode(), hashlib.sha256).digest()


# --------------------------------------------------------------------------------------------------
# Sessions and CSRF


@functools.lru_cache(maxsize=4096)
def address_key(address: str) -> str:
    """What an address is limited and grouped by: an IPv4 address, or an IPv6 address's /64 network.

    A host gets a whole /64 from its provider and can use any address in it, so counting single IPv6
    addresses would let one visitor shed a limit by changing address. Anything unparsable is taken as is
    (cut to 100 characters). Remembered for the last few thousand addresses: a vote asks three to five
    times (connection cap, rate limits, the stored hash), and parsing each time cost 2% of a worker's CPU.
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:100]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return str(ip)


def provisional_id(nonce: str) -> int:
    """The negative stand-in annotator id of a session that has not voted yet (no row exists for it)."""
    digest = hashlib.sha256(f"arena-provisional\n{nonce}".encode()).digest()
    return -1 - int.from_bytes(digest[:7], "big")


def session_key(nonce: str) -> str:
    """What the annotator row written at a session's first vote stores to find it again (not the nonce)."""
    return hashlib.sha256(f"arena-session-key\n{nonce}".encode()).hexdigest()


@dataclass(frozen=True)
class SessionData:
    """A session: its annotator, or a provisional (negative) id until the first vote writes the row.

    ``invited`` sessions come from an invite link and ``signed_in`` ones from an account (OpenID Connect,
    :mod:`arena.signin`); the rest are anonymous (limited per address too).
    """

    annotator_id: int
    nonce: str
    provisional: bool = False
    invited: bool = False
    signed_in: bool = False

    @property
    def known(self) -> bool:
        """An invited or signed-in annotator: limited as one person, not by the address it comes from."""
        return self.invited or self.signed_in

    def owns(self, annotator_id: int) -> bool:
        """True for this session's annotator and for its provisional id (tokens fetched before voting)."""
        return annotator_id == self.annotator_id or annotator_id == provisional_id(self.nonce)


class Signer:
    """Signs the session cookie and derives the session's CSRF token (a synchroniser token, no storage)."""

    def __init__(self, secret: str) -> None:
        self._session = URLSafeSerializer(secret, salt="arena-session")
        self._csrf_key = _derive_key(secret, "arena-csrf")
        self._client_key = _derive_key(secret, "arena-client")
        # A cookie's verdict depends on nothing but its text (the signature has no timestamp), and each
        # annotator sends the same cookie with every request: checking it once per process saves ~6% of
        # a worker's CPU under load. Bounded, so a flood of junk cookies only evicts.
        self._verified = functools.lru_cache(maxsize=8192)(self._verify_session)

    def new_session(
        self,
        annotator_id: int | None = None,
        *,
        invited: bool = False,
        signed_in: bool = False,
        nonce: str | None = None,
    ) -> tuple[SessionData, str]:
        """A session cookie: for an annotator, or provisional (``annotator_id`` None, nothing stored).

        ``nonce`` keeps an existing session's nonce (and so its CSRF token) when its annotator is written.
        """
        nonce = nonce or secrets.token_urlsafe(16)
        if annotator_id is None:
            data = SessionData(annotator_id=provisional_id(nonce), nonce=nonce, provisional=True)
            return data, self._session.dumps({"p": 1, "n": nonce})
        data = SessionData(annotator_id=annotator_id, nonce=nonce, invited=invited, signed_in=signed_in)
        payload: dict[str, object] = {"a": annotator_id, "n": nonce}
        if invited:
            payload["i"] = 1
        if signed_in:
            payload["s"] = 1
        return data, self._session.dumps(payload)

    def read_session(self, cookie: str | None) -> SessionData | None:
        if not cookie or len(cookie) > 512:
            return None
        return self._verified(cookie)

    def _verify_session(self, cookie: str) -> SessionData | None:
        try:
            payload = self._session.loads(cookie)
            nonce = str(payload["n"])
            if payload.get("p"):
                return SessionData(annotator_id=provisional_id(nonce), nonce=nonce, provisional=True)
            return SessionData(
                annotator_id=int(payload["a"]),
                nonce=nonce,
                invited=bool(payload.get("i")),
                signed_in=bool(payload.get("s")),
            )
        except (BadSignature, KeyError, TypeError, ValueError):
            return None

    def csrf_token(self, session: SessionData) -> str:
        return hmac.new(self._csrf_key, session.nonce.encode(), hashlib.sha256).hexdigest()

    def check_csrf(self, session: SessionData, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(self.csrf_token(session), token or "")

    def address_hash(self, address: str) -> str:
        """A keyed hash of the client's network (:func:`address_key`), stored with the vote for the review."""
        msg = f"address\n{address_key(address)}".encode()
        return hmac.new(self._client_key, msg, hashlib.sha256).hexdigest()[:32]

    def client_hash(self, address: str, user_agent: str) -> str:
        """A keyed fingerprint of the client, stored with the vote instead of the address itself."""
        msg = f"{address}\n{user_agent}".encode()
        return hmac.new(self._client_key, msg, hashlib.sha256).hexdigest()[:32]


# --------------------------------------------------------------------------------------------------
# Battle tokens


class BattleTokenError(Exception):
    """A battle token that cannot be used; ``reason`` is forged, expired or foreign."""

    MESSAGES = {
        "forged": "This battle token is not valid (it was altered or not issued by this site).",
        "expired": "This battle has expired; here is a fresh one.",
        "foreign": "This battle was issued to another session and cannot be voted on here.",
    }
    HTTP_STATUS = {"forged": 400, "expired": 410, "foreign": 403}

    def __init__(self, reason: str) -> None:
        super().__init__(self.MESSAGES[reason])
        self.reason = reason

    @property
    def status_code(self) -> int:
        """The HTTP status the pages and the API answer this token with."""
        return self.HTTP_STATUS[self.reason]


class BattleTokens:
    """Encrypt an :class:`IssuedBattle` into an opaque, expiring token bound to the annotator session."""

    def __init__(self, secret: str, *, ttl_seconds: int, clock: Callable[[], float] = time.time) -> None:
        key = base64.urlsafe_b64encode(_derive_key(secret, "arena-battle-token"))
        self._fernet = Fernet(key)
        self.ttl_seconds = ttl_seconds
        self._clock = clock

    def issue(self, battle: IssuedBattle) -> str:
        payload = battle.to_dict()
        data = json.dumps(payload, separators=(",", ":")).encode()
        return self._fernet.encrypt_at_time(data, int(self._clock())).decode()

    def read(self, token: str, *, annotator_id: int | SessionData) -> IssuedBattle:
        """Decrypt and check a token; raises :class:`BattleTokenError` (nothing is changed)."""
        try:
            raw = token.encode("ascii")
            data = self._fernet.decrypt(raw)
            issued = self._fernet.extract_timestamp(raw)
            payload = json.loads(data)
        except (InvalidToken, UnicodeEncodeError, ValueError):
            raise BattleTokenError("forged") from None
        if self._clock() - issued > self.ttl_seconds:
            raise BattleTokenError("expired")
        try:
            battle = IssuedBattle.from_dict(payload)
        except (KeyError, TypeError, ValueError):
            raise BattleTokenError("forged") from None
        owned = (
            annotator_id.owns(battle.annotator_id)
            if isinstance(annotator_id, SessionData)
            else battle.annotator_id == annotator_id
        )
        if not owned:
            raise BattleTokenError("foreign")
        return battle


# --------------------------------------------------------------------------------------------------
# Rate limits: fixed windows, per key


class RateLimiter(Protocol):
    def hit(self, key: str, *, limit: int, window_s: int) -> float | None:
        """Count one event; None if allowed, else the seconds until the window resets."""
        ...


class InMemoryRateLimiter:
    """Per-process fixed-window counters (the default for a single worker)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._counts: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def hit(self, key: str, *, limit: int, window_s: int) -> float | None:
        now = self._clock()
        window = int(now // window_s)
        with self._lock:
            if len(self._counts) > 100_000:  # forget old windows
                self._counts = {k: v for k, v in self._counts.items() if k[1] >= window}
            n = self._counts.get((key, window), 0) + 1
            self._counts[(key, window)] = n
        if n > limit:
            return (window + 1) * window_s - now
        return None


class RedisRateLimiter:
    """Fixed-window counters in Redis (``INCR`` + ``EXPIRE``), shared by every worker."""

    def __init__(self, url: str, clock: Callable[[], float] = time.time, prefix: str = "arena:rl:") -> None:
        import redis  # only with a shared limit store (ARENA_REDIS_URL)

        self._redis = redis.Redis.from_url(url, socket_timeout=2.0)
        self._clock = clock
        self._prefix = prefix

    def hit(self, key: str, *, limit: int, window_s: int) -> float | None:
        now = self._clock()
        window = int(now // window_s)
        name = f"{self._prefix}{key}:{window_s}:{window}"
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.incr(name)
            pipe.expire(name, window_s + 1)
            n, _ = pipe.execute()
        if int(n) > limit:
            return (window + 1) * window_s - now
        return None

    def close(self) -> None:
        self._redis.close()


# --------------------------------------------------------------------------------------------------
# Admin tokens


def verify_admin_token(expected: str | None, authorization: str | None) -> bool:
    """True for ``Authorization: Bearer <admin_token>``; always False when no admin token is configured."""
    if not expected or not authorization:
        return False
    scheme, _, token = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), expected.encode())
