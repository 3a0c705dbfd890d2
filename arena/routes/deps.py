"""Shared route plumbing: the app state, DB sessions, the annotator session, CSRF and rate limits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from arena.app import ArenaState
from arena.security import SESSION_COOKIE, InMemoryRateLimiter, SessionData, client_address
from votes.annotators import create_annotator
from votes.db import read_session, session_scope

__all__ = [
    "RateLimited",
    "SessionDep",
    "StateDep",
    "check_rate_limits",
    "check_rate_limits_async",
    "get_session",
    "get_state",
    "request_address",
    "require_session",
    "session_or_new",
    "session_or_new_async",
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


def request_address(request: Request, state: ArenaState) -> str:
    peer = request.client.host if request.client else None
    return client_address(peer, request.headers.get("x-forwarded-for"), state.settings.trusted_proxies)


def session_or_new(request: Request, state: ArenaState) -> SessionData:
    """The annotator session from the cookie, or a new anonymous annotator (cookie set on the response)."""
    data = state.signer.read_session(request.cookies.get(SESSION_COOKIE))
    if data is not None:
        return data
    if state.settings.invite_only:
        raise NeedsInvite()
    with session_scope(state.engine) as session:
        annotator = create_annotator(session=session)
        assert annotator.id is not None  # nosec B101 # type narrowing
        annotator_id = annotator.id
    data, cookie = state.signer.new_session(annotator_id)
    request.state.set_session = cookie
    return data


async def session_or_new_async(request: Request, state: ArenaState) -> SessionData:
    """:func:`session_or_new` for async handlers: only creating an annotator goes to a thread."""
    data = state.signer.read_session(request.cookies.get(SESSION_COOKIE))
    if data is not None:
        return data
    return await run_in_threadpool(session_or_new, request, state)


def require_session(request: Request, state: ArenaState) -> SessionData:
    """State-changing calls need an existing session (a new one could not carry a valid CSRF token)."""
    data = state.signer.read_session(request.cookies.get(SESSION_COOKIE))
    if data is None:
        raise HTTPException(
            403, "No annotator session: load a battle first (GET /vote or /api/battles/next)."
        )
    return data


def check_rate_limits(state: ArenaState, *, address: str, annotator_id: int | None, voting: bool) -> None:
    """Per-address limit on every battle and vote request; per-annotator and daily limits on votes."""
    s = state.settings
    retry = state.limiter.hit(f"addr:{address}", limit=s.rate_limit_per_address_per_minute, window_s=60)
    if retry is None and voting and annotator_id is not None:
        retry = state.limiter.hit(f"ann:{annotator_id}", limit=s.rate_limit_per_minute, window_s=60)
        if retry is None and s.daily_vote_cap is not None:
            retry = state.limiter.hit(f"day:{annotator_id}", limit=s.daily_vote_cap, window_s=86_400)
    if retry is not None:
        raise RateLimited(retry)


async def check_rate_limits_async(
    state: ArenaState, *, address: str, annotator_id: int | None, voting: bool
) -> None:
    """:func:`check_rate_limits` for async handlers; a shared (Redis) limiter is asked from a thread."""
    if isinstance(state.limiter, InMemoryRateLimiter):
        check_rate_limits(state, address=address, annotator_id=annotator_id, voting=voting)
    else:
        await run_in_threadpool(
            check_rate_limits, state, address=address, annotator_id=annotator_id, voting=voting
        )
