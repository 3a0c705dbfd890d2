"""Shared route plumbing: the app state, DB sessions, the annotator session, the client address, rate limits.

Everything a handler awaits here does its blocking part (a new annotator row, a shared Redis limiter) in
a worker thread, so handlers stay ``async`` without blocking the event loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from arena.metrics import count_refusal
from arena.security import SESSION_COOKIE, InMemoryRateLimiter, SessionData
from arena.state import ArenaState
from votes.annotators import create_annotator
from votes.db import read_session, session_scope

__all__ = [
    "NeedsInvite",
    "RateLimited",
    "SessionDep",
    "StateDep",
    "check_rate_limits",
    "get_session",
    "get_state",
    "request_address",
    "require_session",
    "session_or_new",
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


def request_address(request: Request) -> str:
    """The client's address (behind trusted proxies, as :class:`arena.middleware.TrustedProxyMiddleware`
    found it)."""
    return request.client.host if request.client else "unknown"


def _new_annotator(state: ArenaState) -> int:
    with session_scope(state.engine) as session:
        annotator = create_annotator(session=session)
        assert annotator.id is not None  # nosec B101 # type narrowing
        return annotator.id


async def session_or_new(request: Request, state: ArenaState) -> SessionData:
    """The annotator session from the cookie, or a new anonymous annotator (cookie set on the response).

    Only creating the annotator touches the database (in a worker thread).
    """
    data = state.signer.read_session(request.cookies.get(SESSION_COOKIE))
    if data is not None:
        return data
    if state.settings.invite_only:
        raise NeedsInvite()
    annotator_id = await run_in_threadpool(_new_annotator, state)
    data, cookie = state.signer.new_session(annotator_id)
    request.state.set_session = cookie
    return data


def require_session(request: Request, state: ArenaState) -> SessionData:
    """State-changing calls need an existing session (a new one could not carry a valid CSRF token)."""
    data = state.signer.read_session(request.cookies.get(SESSION_COOKIE))
    if data is None:
        raise HTTPException(
            403, "No annotator session: load a battle first (GET /vote or /api/battles/next)."
        )
    return data


def _count_hits(state: ArenaState, address: str, annotator_id: int | None, voting: bool) -> float | None:
    s = state.settings
    retry = state.limiter.hit(f"addr:{address}", limit=s.rate_limit_per_address_per_minute, window_s=60)
    if retry is None and voting and annotator_id is not None:
        retry = state.limiter.hit(f"ann:{annotator_id}", limit=s.rate_limit_per_minute, window_s=60)
        if retry is None and s.daily_vote_cap is not None:
            retry = state.limiter.hit(f"day:{annotator_id}", limit=s.daily_vote_cap, window_s=86_400)
    return retry


async def check_rate_limits(
    state: ArenaState, *, address: str, annotator_id: int | None, voting: bool
) -> None:
    """Per-address limit on every battle and vote request; per-annotator and daily limits on votes.

    The in-process limiter is counted on the spot; a shared (Redis) limiter is asked from a worker thread.
    Raises :class:`RateLimited` with the seconds to wait.
    """
    if isinstance(state.limiter, InMemoryRateLimiter):
        retry = _count_hits(state, address, annotator_id, voting)
    else:
        retry = await run_in_threadpool(_count_hits, state, address, annotator_id, voting)
    if retry is not None:
        if voting:
            count_refusal("rate_limited")
        raise RateLimited(retry)
