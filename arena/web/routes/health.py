"""Probes and metrics for operators: ``/healthz`` (the process answers), ``/readyz`` (the database, the
schema and the vote writer answer) and ``/metrics`` (Prometheus text).

None of them takes a session, sets a cookie or counts against a rate limit; their access-log lines are
logged at debug level (:data:`arena.logs.PROBE_PATHS`).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from arena.metrics import CONTENT_TYPE_LATEST, render_metrics
from arena.security import verify_admin_token
from arena.voting.state import ArenaState
from arena.web.routes.deps import get_state
from votes.db import read_session
from votes.migrate import current_revision, head_revision
from votes.reads.filters import count_flagged_annotators
from votes.voting.writer import GroupCommitWriter, RemoteVoteWriter

__all__ = ["READY_TIMEOUT_S", "readiness", "router"]

#: A readiness check that takes longer than this answers 503 (the database is as good as down).
READY_TIMEOUT_S = 1.5

router = APIRouter(tags=["operations"], include_in_schema=False)


@functools.cache
def _head() -> str:
    return head_revision()


def readiness(state: ArenaState) -> dict[str, str]:
    """Each part the site needs to take votes, with ``"ok"`` or what is wrong with it (blocking I/O)."""
    checks: dict[str, str] = {}
    try:
        revision = current_revision(state.engine)
    except Exception as exc:  # noqa: BLE001 - any failure to reach the database is "down"
        checks["database"] = f"unreachable ({type(exc).__name__})"
        checks["schema"] = "unknown"
    else:
        checks["database"] = "ok"
        head = _head()
        checks["schema"] = "ok" if revision == head else f"at {revision or 'nothing'}, not {head}"
    writer = state.writer
    local = writer.fallback if isinstance(writer, RemoteVoteWriter) else writer
    if isinstance(local, GroupCommitWriter) and not local.alive:
        checks["vote_writer"] = "not running"
    else:
        checks["vote_writer"] = "ok"
    return checks


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process answers; nothing else is touched."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """200 when the database answers, its schema is current and the vote writer runs; 503 naming the
    failing part otherwise."""
    state = get_state(request)
    try:
        checks = await asyncio.wait_for(run_in_threadpool(readiness, state), READY_TIMEOUT_S)
    except TimeoutError:
        checks = {"database": f"no answer within {READY_TIMEOUT_S} s", "schema": "unknown"}
    ready = all(value == "ok" for value in checks.values())
    body: dict[str, Any] = {"status": "ready" if ready else "not ready", "checks": checks}
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics")
def metrics(request: Request, authorization: Annotated[str | None, Header()] = None) -> Response:
    """Prometheus text format; 404 when metrics are off, 401 without the admin token when required."""
    state = get_state(request)
    settings = state.settings
    if settings.metrics == "off":
        raise HTTPException(404, "Metrics are off (ARENA_METRICS=off).")
    if settings.metrics == "admin" and not verify_admin_token(settings.admin_token, authorization):
        raise HTTPException(
            401, "Admin token required (Authorization: Bearer ...).", {"WWW-Authenticate": "Bearer"}
        )
    try:
        with read_session(state.engine) as db:
            flagged: int | None = count_flagged_annotators(db)
    except Exception:  # noqa: BLE001 - the other metrics are still worth answering with
        flagged = None
    body = render_metrics(multiprocess_dir=settings.prometheus_multiproc_dir, flagged_annotators=flagged)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
