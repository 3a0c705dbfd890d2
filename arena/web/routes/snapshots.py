"""The published leaderboard on the web: latest board beside the live Elo, snapshot list, snapshot pages,
downloads with sha256, and the same as JSON.

Read only by construction: every route here is a GET, so PUT, PATCH and DELETE on any of these paths
answer 405, and the files are served from read-only folders after checking their names against the
snapshot's manifest.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse
from pydantic import BaseModel

from arena.web.routes.deps import SessionDep, StateDep
from leaderboard.snapshot.dataset_card import CARD_FILE, MODELS_FILE
from leaderboard.snapshot.figures import FIGURES, plot_files
from leaderboard.snapshot.files import DATA_FILES, METADATA_FILE, ZIP_FILE
from leaderboard.snapshot.folder import SnapshotData, read_snapshot, slice_label
from leaderboard.snapshot.titles import left_off_note, unpublished_note
from leaderboard.style.board import STYLE_CSV_FILE, STYLE_JSON_FILE, read_style_table
from votes.catalog.roles import retired_names
from votes.models import Snapshot
from votes.reads.snapshots import (
    get_snapshot,
    latest_snapshot,
    list_slices,
    list_snapshots,
    snapshot_manifest,
)

__all__ = ["router"]

router = APIRouter()

MEDIA_TYPES = {
    ".csv": "text/csv; charset=utf-8",
    ".json": "application/json",
    ".parquet": "application/vnd.apache.parquet",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".zip": "application/zip",
}
WHISKER_WIDTH = 130


class SnapshotRow(BaseModel):
    model: str
    rating: float
    ci_low: float
    ci_high: float
    rank: int
    rank_low: int
    rank_high: int
    rank_ub: int
    battles: float
    win_rate: float


class SnapshotOut(BaseModel):
    id: str
    created_at: str
    slice: str
    method: str
    n_votes: int
    votes_sha256: str
    parameters: dict[str, Any]
    files: dict[str, str]


class SnapshotDetail(SnapshotOut):
    metadata: dict[str, Any]
    models: list[SnapshotRow]


def _slice_of(slice_: str | None, category: str | None, language: str | None) -> str:
    if slice_:
        return slice_
    return slice_label(category=category or None, language=language or None)


def _load(row: Snapshot) -> SnapshotData:
    try:
        return read_snapshot(row.path)
    except (OSError, ValueError) as exc:  # missing or tampered files: say so rather than show them
        raise HTTPException(
            status_code=500, detail=f"snapshot {row.id} files are unreadable: {exc}"
        ) from None


def _rows(data: SnapshotData) -> list[SnapshotRow]:
    records = data.table.to_dict(orient="records")
    return [SnapshotRow(**{k: v for k, v in r.items() if k in SnapshotRow.model_fields}) for r in records]


STYLE_FILES = (STYLE_CSV_FILE, STYLE_JSON_FILE)


def _board(data: SnapshotData, board: str) -> tuple[str, list[SnapshotRow], list[int] | None]:
    """The rows of the board asked for (``default`` or ``style``), and each row's rank change under style
    control; the default board when the snapshot has no style-controlled one."""
    table = read_style_table(data.path) if board == "style" else None
    if table is None:
        return "default", _rows(data), None
    records = table.to_dict(orient="records")
    rows = [SnapshotRow(**{k: v for k, v in r.items() if k in SnapshotRow.model_fields}) for r in records]
    return "style", rows, [int(r["rank_change"]) for r in records]


def _fragility(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """Per model, the votes whose removal swaps it with the model below it; ``top``: votes that change #1."""
    cert = metadata.get("fragility")
    if not isinstance(cert, dict) or "adjacent_swap_votes" not in cert:
        return None
    below = {
        p["upper"]: p["votes"] for p in cert["adjacent_swap_votes"] if isinstance(p, dict) and "upper" in p
    }
    return {"below": below, "top": cert.get("top_change_votes"), "limit": cert.get("search_limit_votes")}


def _count(value: Any) -> int | None:
    """A vote count from the metadata, or None (beyond the search limit, no gap, or not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _precision(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """Provisional models, votes to separate each model from the next one down, the board's votes to its
    target width, and the fairness ledger (:mod:`leaderboard.design.precision`); None for older snapshots."""
    prec = metadata.get("precision")
    if not isinstance(prec, dict) or not isinstance(prec.get("provisional"), list):
        return None
    adjacent = prec.get("votes_needed_adjacent")
    ledger = prec.get("ledger")
    live = metadata.get("availability")
    in_force = _newest(metadata.get("sampling_weights_by_day"))
    weeks = _recent_weeks(metadata.get("battle_share_by_week"))
    return {
        "provisional": {str(m) for m in prec["provisional"]},
        "provisional_half_width": prec.get("provisional_half_width"),
        "provisional_votes": _count(prec.get("provisional_votes")),
        "target_half_width": prec.get("target_half_width"),
        "level": prec.get("level"),
        "board": _count(prec.get("votes_needed_board")),
        "below": {
            str(p["upper"]): _count(p.get("votes"))
            for p in (adjacent if isinstance(adjacent, list) else [])
            if isinstance(p, dict) and "upper" in p
        },
        "ledger": [
            {
                "model": str(e["model"]),
                "battle_share": float(e.get("battle_share") or 0.0),
                "sampling_share": float(e.get("sampling_share") or 0.0),
                "live": _live(live.get(str(e["model"]))) if isinstance(live, dict) else None,
                "in_force": _share(in_force[1].get(str(e["model"]))) if in_force else None,
                "weekly": [_share(shares.get(str(e["model"]))) for _, shares in weeks],
            }
            for e in (ledger if isinstance(ledger, list) else [])
            if isinstance(e, dict) and "model" in e
        ],
        "has_live": isinstance(live, dict),
        "in_force_day": in_force[0] if in_force else None,
        "weeks": [week for week, _ in weeks],
    }


#: Weeks of battle shares drawn on the page (the snapshot's metadata keeps them all).
PAGE_WEEKS = 8


def _share(value: Any) -> float | None:
    """A share in [0, 1] from the metadata, or None (absent or not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0.0 <= value <= 1.0 else None


def _newest(by_day: Any) -> tuple[str, dict[str, Any]] | None:
    """The newest day's per-model shares of ``sampling_weights_by_day``, or None."""
    if not isinstance(by_day, dict) or not by_day:
        return None
    day = max(str(d) for d in by_day)
    shares = by_day.get(day)
    return (day, shares) if isinstance(shares, dict) else None


def _recent_weeks(by_week: Any) -> list[tuple[str, dict[str, Any]]]:
    """The last :data:`PAGE_WEEKS` weeks of ``battle_share_by_week``, oldest first."""
    if not isinstance(by_week, dict):
        return []
    weeks = sorted(str(w) for w in by_week)[-PAGE_WEEKS:]
    return [(w, by_week[w]) for w in weeks if isinstance(by_week.get(w), dict)]


def _live(entry: Any) -> dict[str, Any] | None:
    """A model's live generations and answered share from the snapshot, or None (never asked live)."""
    if not isinstance(entry, dict) or not _count(entry.get("generations")):
        return None
    share = entry.get("share")
    return {
        "generations": entry["generations"],
        "share": float(share) if isinstance(share, int | float) and not isinstance(share, bool) else None,
    }


def _intervals(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the snapshot's intervals are (``metadata.json`` -> ``intervals``: level, method, unit,
    coverage, fit, ranks), with the level as a whole percentage; None for snapshots made before it."""
    described = (metadata or {}).get("intervals")
    if not isinstance(described, dict) or not isinstance(described.get("level"), int | float):
        return None
    words = {k: str(v) for k, v in described.items() if isinstance(v, str)}
    return {**words, "percent": round(100 * float(described["level"]))}


def _whiskers(rows: list[SnapshotRow], metadata: dict[str, Any] | None = None) -> list[dict[str, float]]:
    """Pixel positions of each row's interval and point on a common scale (inline SVG, no inline CSS).

    The scale is that of the models the board measured: a model in too few votes has an interval
    hundreds of points wide (:func:`leaderboard.bt.intervals.few_vote_floor`), which would shrink every
    other whisker to a dot; its own is cut at the edges (the numbers beside it say how far it goes)."""
    if not rows:
        return []
    parameters = (metadata or {}).get("parameters")
    few = parameters.get("few_votes") if isinstance(parameters, dict) else None
    unmeasured = {str(m) for m in few.get("models", ())} if isinstance(few, dict) else set()
    scaled = [r for r in rows if r.model not in unmeasured] or rows
    lo = min(r.ci_low for r in scaled)
    hi = max(r.ci_high for r in scaled)
    span = hi - lo if hi > lo else 1.0
    pad = 6.0

    def x(value: float) -> float:
        inside = min(max(value, lo), hi)
        return round(pad + (inside - lo) / span * (WHISKER_WIDTH - 2 * pad), 1)

    return [{"x1": x(r.ci_low), "x2": x(r.ci_high), "cx": x(r.rating)} for r in rows]


def _out(row: Snapshot) -> SnapshotOut:
    return SnapshotOut(**snapshot_manifest(row))


def overall_metadata(db: SessionDep) -> dict[str, Any] | None:
    """The metadata of the latest overall board (its ``metadata.json`` alone), which says what the
    publish found for the other boards; None when there is none or it cannot be read."""
    row = latest_snapshot(session=db, slice="all")
    if row is None:
        return None
    try:
        found = json.loads((Path(row.path) / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def unpublished_boards(db: SessionDep) -> str | None:
    """The categories and languages the latest publish found too few votes for, as a sentence."""
    overall = overall_metadata(db)
    return None if overall is None else unpublished_note(overall)


# ------------------------------------------------------------------------------------------------ pages


@router.get("/leaderboard", response_class=HTMLResponse, include_in_schema=False)
def leaderboard_page(
    request: Request,
    state: StateDep,
    db: SessionDep,
    slice_: Annotated[str | None, Query(alias="slice")] = None,
    category: str | None = None,
    language: str | None = None,
    board: Annotated[str, Query(pattern="^(default|style)$")] = "default",
) -> HTMLResponse:
    chosen = _slice_of(slice_, category, language)
    row = latest_snapshot(session=db, slice=chosen)
    rows: list[SnapshotRow] = []
    data = None
    changes: list[int] | None = None
    if row is not None:
        data = _load(row)
        board, rows, changes = _board(data, board)
    context = {
        "board": board,
        "fragility": _fragility(data.metadata) if data is not None and board == "default" else None,
        "precision": _precision(data.metadata) if data is not None else None,
        "rank_changes": changes,
        "intervals": _intervals(data.metadata if data else None),
        "style_control": data.metadata.get("style_control") if data else None,
        "snapshot": row,
        "metadata": data.metadata if data else None,
        "rows": rows,
        "whiskers": _whiskers(rows, data.metadata if data is not None else None),
        "whisker_width": WHISKER_WIDTH,
        "slices": list_slices(session=db),
        "chosen": chosen,
        "standings": state.live_standings(db),
        "retired": retired_names(db.connection()),
        "left_off": left_off_note(data.metadata) if data is not None else None,
        "unpublished": unpublished_boards(db),
    }
    return state.templates.TemplateResponse(request=request, name="pages/leaderboard.html", context=context)


@router.get("/leaderboard/snapshots", response_class=HTMLResponse, include_in_schema=False)
def snapshots_page(
    request: Request,
    state: StateDep,
    db: SessionDep,
    slice_: Annotated[str | None, Query(alias="slice")] = None,
) -> HTMLResponse:
    rows = list_snapshots(session=db, slice=slice_ or None)
    context = {"snapshots": rows, "slices": list_slices(session=db), "chosen": slice_ or ""}
    return state.templates.TemplateResponse(request=request, name="pages/snapshots.html", context=context)


@router.get("/leaderboard/snapshots/{snapshot_id}", response_class=HTMLResponse, include_in_schema=False)
def snapshot_page(
    request: Request,
    state: StateDep,
    db: SessionDep,
    snapshot_id: str,
    board: Annotated[str, Query(pattern="^(default|style)$")] = "default",
) -> HTMLResponse:
    row = get_snapshot(session=db, snapshot_id=snapshot_id)
    if row is None:
        raise HTTPException(status_code=404, detail="no such snapshot")
    data = _load(row)
    board, rows, changes = _board(data, board)
    downloads = [
        {"name": name, "sha256": row.files[name]}
        for name in (
            ZIP_FILE,
            *DATA_FILES,
            *STYLE_FILES,
            MODELS_FILE,
            CARD_FILE,
            METADATA_FILE,
            *plot_files(),
        )
        if name in row.files
    ]
    # every figure of the table the snapshot has, with the data file it is drawn from when it has that
    figures = [
        {
            "stem": spec.stem,
            "title": spec.title,
            "data_file": spec.data_file if spec.data_file in row.files else None,
            "wide": spec.wide,
        }
        for spec in FIGURES.values()
        if f"{spec.stem}.svg" in row.files and f"{spec.stem}.png" in row.files
    ]
    fitted = {
        name: {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in value.items()}
        for name, value in (data.metadata.get("parameters_fitted") or {}).items()
    }
    context = {
        "board": board,
        "fragility": _fragility(data.metadata) if data is not None and board == "default" else None,
        "precision": _precision(data.metadata) if data is not None else None,
        "rank_changes": changes,
        "intervals": _intervals(data.metadata),
        "style_control": data.metadata.get("style_control"),
        "snapshot": row,
        "metadata": data.metadata,
        "rows": rows,
        "whiskers": _whiskers(rows, data.metadata if data is not None else None),
        "whisker_width": WHISKER_WIDTH,
        "downloads": downloads,
        "figures": figures,
        "retired": retired_names(db.connection()),
        "fitted": fitted,
        "left_off": left_off_note(data.metadata),
    }
    return state.templates.TemplateResponse(request=request, name="pages/snapshot.html", context=context)


@router.get("/leaderboard/snapshots/{snapshot_id}/files/{name}", include_in_schema=False)
def snapshot_file(db: SessionDep, snapshot_id: str, name: str) -> FileResponse:
    """A file of a published snapshot; only names in its manifest, never a path."""
    row = get_snapshot(session=db, snapshot_id=snapshot_id)
    if row is None or name not in row.files or "/" in name or name.startswith("."):
        raise HTTPException(status_code=404, detail="no such file")
    path = Path(row.path) / name
    if not path.is_file():
        raise HTTPException(status_code=404, detail="file missing")
    download = name if name != ZIP_FILE else f"arena-snapshot-{row.id}.zip"
    headers = {"X-Content-SHA256": row.files[name], "Cache-Control": "public, max-age=31536000, immutable"}
    media = MEDIA_TYPES.get(path.suffix, "application/octet-stream")
    inline = path.suffix in (".svg", ".png")
    return FileResponse(
        path,
        media_type=media,
        headers=headers,
        filename=None if inline else download,
        content_disposition_type="inline" if inline else "attachment",
    )


# -------------------------------------------------------------------------------------------------- API


@router.get(
    "/api/leaderboard/snapshots",
    response_model=list[SnapshotOut],
    tags=["snapshots"],
    summary="List snapshots",
)
def api_snapshots(
    db: SessionDep,
    slice_: Annotated[str | None, Query(alias="slice", description="all, category=..., language=...")] = None,
    category: str | None = None,
    language: str | None = None,
    method: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,  # larger overflows a BIGINT (500)
) -> list[SnapshotOut]:
    """Published snapshots, newest first, with their manifests (file sha256s)."""
    chosen = slice_ or (slice_label(category=category, language=language) if category or language else None)
    rows = list_snapshots(session=db, slice=chosen, method=method, limit=limit, offset=offset)
    return [_out(r) for r in rows]


@router.get("/api/leaderboard/slices", response_model=list[str], tags=["snapshots"], summary="List boards")
def api_slices(db: SessionDep) -> list[str]:
    """Boards with at least one published snapshot."""
    return list_slices(session=db)


@router.get(
    "/api/leaderboard/published",
    response_model=SnapshotDetail,
    tags=["snapshots"],
    summary="Latest published board",
)
def api_latest(
    db: SessionDep,
    slice_: Annotated[str | None, Query(alias="slice")] = None,
    category: str | None = None,
    language: str | None = None,
) -> SnapshotDetail:
    """The latest published snapshot of a board, with its rows."""
    row = latest_snapshot(session=db, slice=_slice_of(slice_, category, language))
    if row is None:
        raise HTTPException(status_code=404, detail="nothing published for this board yet")
    return _detail(row)


@router.get(
    "/api/leaderboard/snapshots/{snapshot_id}",
    response_model=SnapshotDetail,
    tags=["snapshots"],
    summary="One snapshot",
)
def api_snapshot(db: SessionDep, snapshot_id: str) -> SnapshotDetail:
    """One snapshot: manifest, metadata and rows."""
    row = get_snapshot(session=db, snapshot_id=snapshot_id)
    if row is None:
        raise HTTPException(status_code=404, detail="no such snapshot")
    return _detail(row)


def _detail(row: Snapshot) -> SnapshotDetail:
    data = _load(row)
    return SnapshotDetail(**snapshot_manifest(row), metadata=data.metadata, models=_rows(data))
