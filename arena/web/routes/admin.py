"""Admin API behind a bearer token from settings (``ARENA_ADMIN_TOKEN``); off when the token is unset."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, File, Header, HTTPException, Request, UploadFile
from fastapi import Path as PathParam
from pydantic import BaseModel, Field

from arena.metrics import PUBLISH_SECONDS
from arena.security import hash_secret, verify_admin_token
from arena.voting.state import ArenaState
from arena.web.routes.deps import StateDep
from votes.db import session_scope, storage_failure_line
from votes.files.convert import ImportReport
from votes.files.records import InputError
from votes.imports.files import import_file
from votes.voting.annotators import create_annotator, flag_annotator
from votes.voting.ratings import rebuild_live_ratings

if TYPE_CHECKING:
    from leaderboard.bt.request import FitRequest

MAX_IMPORT_BYTES = 512 * 1024 * 1024
#: Imports run one at a time in their own thread, never on the event loop nor in the request thread
#: pool that serves votes; a few more may wait their turn, beyond that the upload is refused (503).
IMPORT_WORKERS = 1
IMPORT_QUEUE = 2
_import_pool = ThreadPoolExecutor(max_workers=IMPORT_WORKERS, thread_name_prefix="arena-import")
_import_slots = threading.BoundedSemaphore(IMPORT_WORKERS + IMPORT_QUEUE)

log = logging.getLogger(__name__)


def require_admin(state: StateDep, authorization: Annotated[str | None, Header()] = None) -> None:
    if not state.settings.admin_token:
        raise HTTPException(403, "The admin API is disabled: set ARENA_ADMIN_TOKEN to enable it.")
    if not verify_admin_token(state.settings.admin_token, authorization):
        raise HTTPException(
            401, "Admin token required (Authorization: Bearer ...).", {"WWW-Authenticate": "Bearer"}
        )


router = APIRouter(prefix="/api/admin", tags=["admin"], dependencies=[Depends(require_admin)])


class FlagIn(BaseModel):
    flagged: bool = True
    reason: str | None = Field(None, max_length=500)


class FlagOut(BaseModel):
    annotator_id: int
    flagged: bool
    models_rerated: int


class InviteIn(BaseModel):
    label: str | None = Field(None, max_length=200)


class InviteOut(BaseModel):
    annotator_id: int
    url: str


@router.post("/annotators/{annotator_id}/flag", response_model=FlagOut, summary="Flag an annotator")
def admin_flag(
    state: StateDep, annotator_id: Annotated[int, PathParam(ge=1, le=2**63 - 1)], body: FlagIn
) -> FlagOut:
    """Flag (or clear) an annotator; live ratings are rebuilt so flagged votes stop counting at once."""
    with session_scope(state.engine) as db:
        if not flag_annotator(
            session=db, annotator_id=annotator_id, reason=body.reason, flagged=body.flagged
        ):
            raise HTTPException(404, f"No annotator {annotator_id}.")
        standings = rebuild_live_ratings(db.connection(), config=state.live)
    state.pairing.refresh(force=True)
    return FlagOut(annotator_id=annotator_id, flagged=body.flagged, models_rerated=len(standings.models))


@router.post("/invites", response_model=InviteOut, summary="Invite an annotator")
def admin_invite(request: Request, state: StateDep, body: InviteIn) -> InviteOut:
    """Create an invited annotator; the link is shown once (only its hash is stored)."""
    token = secrets.token_urlsafe(24)
    with session_scope(state.engine) as db:
        annotator = create_annotator(
            session=db, kind="invited", label=body.label, token_hash=hash_secret(token)
        )
        assert annotator.id is not None  # nosec B101 # type narrowing
        annotator_id = annotator.id
    return InviteOut(annotator_id=annotator_id, url=str(request.url_for("accept_invite", token=token)))


class ImportRefusedOut(BaseModel):
    """A 422 from the import: ``file: line N: reason`` for a bad row, or FastAPI's list of errors for a
    malformed request (no file field, say)."""

    detail: str | list[Any]


@router.post(
    "/import",
    summary="Import a file",
    responses={
        422: {"model": ImportRefusedOut, "description": "A bad row, or a malformed request"},
        507: {
            "model": ImportRefusedOut,
            "description": "No room to write (full disk, quota): nothing written",
        },
    },
)
async def admin_import(state: StateDep, file: Annotated[UploadFile, File()]) -> dict[str, Any]:
    """Import a catalog or battles file (format from the file name); all or nothing.

    A bad row answers 422 with ``file: line N: reason``; the import itself runs in a bounded pool off
    the web worker (503 with ``Retry-After`` when imports are queued already). A full disk (or quota, or
    file size limit), while the upload is saved or while the import writes, answers 507 with the one line
    `arena import` prints; nothing is written and the log gets that line, not a traceback.
    """
    if not _import_slots.acquire(blocking=False):
        raise HTTPException(503, "Other imports are running; try again later.", {"Retry-After": "30"})
    name = Path(file.filename or "upload.jsonl").name
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            size = 0
            with path.open("wb") as out:
                while chunk := await file.read(1 << 20):
                    size += len(chunk)
                    if size > MAX_IMPORT_BYTES:
                        raise HTTPException(413, "File too large for the admin upload; use `arena import`.")
                    out.write(chunk)
            loop = asyncio.get_running_loop()
            try:
                report = await loop.run_in_executor(_import_pool, _import_and_refresh, state, path)
            except InputError as exc:  # named by the upload's name, not the temporary path
                where = f"{exc.where}: " if exc.where else ""
                raise HTTPException(422, f"{name}: {where}{exc.reason}") from None
    except HTTPException:
        raise
    except Exception as exc:
        line = storage_failure_line(exc)
        if line is None:
            raise
        log.warning("admin import of %s refused: %s", name, line)
        raise HTTPException(507, line) from None
    finally:
        _import_slots.release()
    return dataclasses.asdict(report)


def _import_and_refresh(state: ArenaState, path: Path) -> ImportReport:
    report = import_file(
        state.engine, path, elo_config=state.live, max_expanded=state.settings.max_expanded_bytes
    )
    state.pairing.refresh(force=True)
    return report


class PublishIn(BaseModel):
    category: str | None = Field(None, max_length=100)
    language: str | None = Field(None, max_length=50)
    method: str = Field("bt", max_length=50)
    n_rounds: int = Field(1000, ge=0, le=100_000)
    seed: int = 0
    exclude_flagged: bool = True

    def fit_request(self) -> FitRequest:
        """The board's :class:`~leaderboard.bt.request.FitRequest` (the rest as the defaults say); a
        ``ValueError`` for a method no board can be made with."""
        from leaderboard.bt.request import FitRequest  # the fitting stack loads on the first publish

        return FitRequest(method=self.method, n_rounds=self.n_rounds, random_state=self.seed)


@router.post("/publish", summary="Publish a snapshot")
def admin_publish(state: StateDep, body: PublishIn) -> dict[str, Any]:
    """Fit and publish an immutable leaderboard snapshot from the votes in the database."""
    # The fitting and plotting stack loads on the first publish, not when a worker starts.
    from arena.publish.snapshots import publish_snapshot

    started, result = time.perf_counter(), "error"
    try:
        row = publish_snapshot(
            state.engine,
            snapshot_dir=state.settings.snapshot_dir,
            request=body.fit_request(),
            category=body.category,
            language=body.language,
            exclude_flagged=body.exclude_flagged,
            flagged_weight=state.settings.flagged_down_weight,
        )
        result = "ok"
    except ValueError as exc:
        raise HTTPException(400, f"Cannot publish: {exc}") from None
    finally:
        PUBLISH_SECONDS.labels(result=result).observe(time.perf_counter() - started)
    return {"id": row.id, "n_votes": row.n_votes, "votes_sha256": row.votes_sha256, "slice": row.slice}


@router.post("/live-ratings/rebuild", summary="Rebuild the live ratings")
def admin_rebuild(state: StateDep) -> dict[str, int]:
    """Recompute the live ratings from the vote log (a replay of the counted votes)."""
    with session_scope(state.engine) as db:
        standings = rebuild_live_ratings(db.connection(), config=state.live)
    return {"models": len(standings.models)}
