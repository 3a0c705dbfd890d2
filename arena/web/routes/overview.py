"""The category overview page and file: each model's rank in every published board, with intervals.

Read only: the latest snapshot of every board, through :mod:`votes.reads.snapshots` and
:func:`leaderboard.snapshot.overview.category_overview`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pandas as pd
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import Session

from arena.web.routes.deps import SessionDep, StateDep
from arena.web.routes.snapshots import unpublished_boards
from leaderboard.snapshot.folder import read_snapshot
from leaderboard.snapshot.overview import category_overview, overview_csv
from votes.reads.snapshots import latest_snapshot, list_slices

__all__ = ["router"]

router = APIRouter(include_in_schema=False)


def _overview(db: Session) -> tuple[list[str], pd.DataFrame]:
    boards: dict[str, tuple[str, pd.DataFrame]] = {}
    for name in list_slices(session=db):
        row = latest_snapshot(session=db, slice=name)
        if row is not None:
            boards[name] = (row.id, read_snapshot(row.path).table)
    return list(boards), category_overview(boards)


@router.get("/leaderboard/categories", response_class=HTMLResponse)
def categories_page(request: Request, state: StateDep, db: SessionDep) -> HTMLResponse:
    names, overview = _overview(db)
    cells: dict[str, dict[str, dict[Hashable, Any]]] = {}
    for rec in overview.to_dict(orient="records"):
        cells.setdefault(str(rec["model"]), {})[str(rec["board"])] = rec
    context = {"boards": names, "cells": cells, "unpublished": unpublished_boards(db)}
    return state.templates.TemplateResponse(request=request, name="pages/categories.html", context=context)


@router.get("/leaderboard/categories.csv")
def categories_file(db: SessionDep) -> Response:
    _, overview = _overview(db)
    return Response(
        overview_csv(overview),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="categories.csv"'},
    )
