"""Shared route plumbing: the app state, DB sessions, the annotator session, the client address, rate limits.

Everything a handler awaits here does its blocking part (an annotator row, a shared Redis limiter) in a
worker thread, so handlers stay ``async`` without blocking the event loop.

An anonymous visitor costs nothing until they vote: a new session is a signed cookie with a provisional
annotator id (no row), handed out only within the per-address cap on new sessions, and the annotator row
is written at the first vote (:func:`voting_session`), after the rate limits passed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from arena.metrics import count_refusal
from arena.security import (
    SESSION_COOKIE,
    InMemoryRateLimiter,
    SessionData,
    address_key,
    provisional_id,
    session_key,
)
from arena.voting.state import ArenaState
from votes.db import read_session, session_scope
from votes.voting.annotators import annotator_for_session

__all__ = [
    "NeedsInvite",
    "NeedsSignIn",
    "RateLimited",
    "SessionDep",
    "StateDep",
    "annotator_session",
    "check_rate_limits",
    "get_session",
    "get_state",
    "limit_identity",
    "request_address",
    "require_session",
    "session_or_new",
    "voting_session",
]


def get_state(request: Request) -> ArenaState:
    state: ArenaState = request.app.state.arena
    return state


async def _state_dependency(request: Request) -> ArenaState:
    # async: FastAPI would run a plain function dependency in the thread pool, one hop per request.
    return get_state(request)


StateDep = Annotated[ArenaState, Depends(_state_dependency)]


def get_session(state: StateDep) -> Iterator[Session]:
    """A read-only session for handlers: pages never take SQLite's write lock (votes use the writer)."""
    with read_session(state.engine) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


class RateLimited(Exception):
    def __init__(self, retry_after: float) -> None:
        super().__init__(f"Too many requests; try again in {max(1, round(retry_after))} s.")
        self.retry_after = max(1, round(retry_after))


class NeedsInvite(Exception):
    """Invite-only site and no session."""


class NeedsSignIn(Exception):
    """The site takes votes from signed-in annotators only (``ARENA_REQUIRE_SIGN_IN``)."""


def request_address(request: Request) -> str:
    """The client's address (behind trusted proxies, as :class:`arena.web.middleware.TrustedProxyMiddleware`
    found it)."""
    return request.client.host if request.client else "unknown"


def _session_annotator(state: ArenaState, key: str) -> int:
    with session_scope(state.engine) as session:
        return annotator_for_session(session=session, session_key=key)


async def session_or_new(request: Request, state: ArenaState) -> SessionData:
    """The annotator session from the cookie, or a new provisional one (cookie set on the response).

    Nothing is written: a new session only counts against the address's cap on new sessions
    (:class:`RateLimited` beyond it).
    """
    data = state.signer.read_session(request.cookies.get(SESSION_COOKIE))
    if data is not None:
        return data
    if state.settings.invite_only:
        raise NeedsInvite()
    address = address_key(request_address(request))
    limit = state.settings.new_sessions_per_address_per_hour
    if isinstance(state.limiter, InMemoryRateLimiter):
        retry = state.limiter.hit(f"new:{address}", limit=limit, window_s=3600)
    else:
        retry = await run_in_threadpool(state.limiter.hit, f"new:{address}", limit=limit, window_s=3600)
    if retry is not None:
        raise RateLimited(retry)
    data, cookie = state.signer.new_session()
    request.state.set_session = cookie
    return data


async def voting_session(request: Request, state: ArenaState, who: SessionData, *, token: str) -> SessionData:
    """The session a vote is recorded under: a provisional one gets its annotator row now (first vote),
    and the cookie is renewed with the same nonce (the page's CSRF token stays valid).

    The battle token is checked first (raises :class:`BattleTokenError`): a forged or foreign token
    writes nothing.
    """
    if state.settings.require_sign_in and not who.signed_in:
        raise NeedsSignIn()
    if not who.provisional:
        return who
    state.tokens.read(token, annotator_id=who)
    return await annotator_session(request, state, who)


async def annotator_session(request: Request, state: ArenaState, who: SessionData) -> SessionData:
    """The session with its annotator row written (now, for a provisional one; the cookie is renewed
    with the same nonce). For what needs an annotator before a vote, such as a live battle's answers."""
    if state.settings.require_sign_in and not who.signed_in:
        raise NeedsSignIn()
    if not who.provisional:
        return who
    annotator_id = await run_in_threadpool(_session_annotator, state, session_key(who.nonce))
    data, cookie = state.signer.new_session(annotator_id, nonce=who.nonce)
    request.state.set_session = cookie
    state.pairing.adopt(who.annotator_id, annotator_id)
    return data


def require_session(request: Request, state: ArenaState) -> SessionData:
    """State-changing calls need an existing session (a new one could not carry a valid CSRF token)."""
    data = state.signer.read_session(request.cookies.get(SESSION_COOKIE))
    if data is None:
        raise HTTPException(
            403, "No annotator session: load a battle first (GET /vote or /api/battles/next)."
        )
    return data


def limit_identity(who: SessionData) -> int:
    """Who per-annotator limits count: an anonymous session is one annotator before and after its first
    vote writes the row, so it is counted by its provisional id, which that step does not change."""
    return who.annotator_id if who.known else provisional_id(who.nonce)


def _count_hits(state: ArenaState, address: str, who: SessionData | None, voting: bool) -> float | None:
    s = state.settings
    key = address_key(address)
    retry = state.limiter.hit(f"addr:{key}", limit=s.rate_limit_per_address_per_minute, window_s=60)
    if retry is not None or not voting or who is None:
        return retry
    if not who.known:  # anonymous votes: limited per address too, which a new cookie does not reset
        retry = state.limiter.hit(f"vaddr:{key}", limit=s.votes_per_address_per_minute, window_s=60)
        if retry is None:
            retry = state.limiter.hit(f"vday:{key}", limit=s.votes_per_address_per_day, window_s=86_400)
        if retry is not None:
            return retry
    annotator = limit_identity(who)
    retry = state.limiter.hit(f"ann:{annotator}", limit=s.rate_limit_per_minute, window_s=60)
    if retry is None and s.daily_vote_cap is not None:
        retry = state.limiter.hit(f"day:{annotator}", limit=s.daily_vote_cap, window_s=86_400)
    return retry


async def check_rate_limits(
    state: ArenaState, *, address: str, who: SessionData | None, voting: bool
) -> None:
    """Per-address limit on every battle and vote request; per-annotator and daily limits on votes, and
    for anonymous sessions per-address vote limits per minute and per day (an IPv6 /64 is one address).

    The in-process limiter is counted on the spot; a shared (Redis) limiter is asked from a worker thread.
    Raises :class:`RateLimited` with the seconds to wait.
    """
    if isinstance(state.limiter, InMemoryRateLimiter):
        retry = _count_hits(state, address, who, voting)
    else:
        retry = await run_in_threadpool(_count_hits, state, address, who, voting)
    if retry is not None:
        if voting:
            count_refusal("rate_limited")
        raise RateLimited(retry)


def _count_live_hits(state: ArenaState, address: str, annotator_id: int) -> float | None:
    s = state.settings
    retry = state.limiter.hit(
        f"live-addr:{address_key(address)}", limit=s.live_generations_per_address_per_minute, window_s=60
    )
    if retry is None:
        retry = state.limiter.hit(
            f"live-ann:{annotator_id}", limit=s.live_generations_per_minute, window_s=60
        )
    return retry


async def check_live_limits(state: ArenaState, *, address: str, annotator_id: int) -> None:
    """Per-address and per-annotator limits on live generations (each turn of a live battle asks two
    models). Raises :class:`RateLimited` with the seconds to wait."""
    if isinstance(state.limiter, InMemoryRateLimiter):
        retry = _count_live_hits(state, address, annotator_id)
    else:
        retry = await run_in_threadpool(_count_live_hits, state, address, annotator_id)
    if retry is not None:
        raise RateLimited(retry)
