"""Admin review API: anomalous annotators (list, review, flag, with gold accuracy and self-agreement), gold
battles and identity leaks. Behind the admin token."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel
from sqlmodel import Session

from arena.web.routes.admin import require_admin
from arena.web.routes.deps import StateDep
from votes.review.gold_review import gold_item_rows
from votes.review.leak_review import find_leaks

router = APIRouter(prefix="/api/admin", tags=["admin"], dependencies=[Depends(require_admin)])


class AnnotatorReviewOut(BaseModel):
    annotator_id: int
    kind: str
    label: str | None
    n_votes: int
    left_share: float | None
    median_seconds: float | None
    agreement_q: float | None
    favouritism_q: float | None
    favourite: str | None
    side_q: float | None
    flagged: bool
    flag_reason: str | None
    suspicious: bool
    reason: str | None
    address_group: int
    n_seen: int
    skip_q: float | None
    favours: float | None
    tie_share: float | None
    agreement_share: float | None
    honest_weight: float | None
    n_gold: int
    gold_right: int
    gold_accuracy: float | None
    gold_low: float | None
    gold_high: float | None
    n_repeat: int = 0
    repeat_agreed: int = 0
    self_agreement: float | None = None
    self_agreement_low: float | None = None
    self_agreement_high: float | None = None
    discrimination: float | None = None


class GoldOut(BaseModel):
    gold_id: int
    kind: str
    detail: str | None
    source: str
    right: str
    n_votes: int
    n_right: int
    retired: bool
    retired_reason: str | None


class LeakOut(BaseModel):
    output_id: int
    prompt: str | None
    model: str
    aliases: list[str]
    self_reference: bool
    excerpt: str
    n_votes: int


def _finite(row: Any) -> dict[str, Any]:
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v)
        for k, v in dataclasses.asdict(row).items()
    }


@router.get("/annotators", response_model=list[AnnotatorReviewOut], summary="Review annotators")
def admin_annotators(
    state: StateDep,
    apply: bool = Query(False, description="Flag the suspicious annotators (their votes stop counting)."),
    show_all: bool = Query(
        False, alias="all", description="Every annotator, not only suspicious or flagged."
    ),
    alpha: float = Query(0.01, gt=0.0, lt=1.0),
    min_votes: int = Query(20, ge=1, le=1_000_000),
) -> list[AnnotatorReviewOut]:
    """Per-annotator statistics against the current fit; flagged and suspicious annotators first."""
    from leaderboard.quality.annotators import FlagRule  # the fitting stack: on the first review
    from votes.review.voters import review_annotators  # the fitting stack: on the first review

    rows = review_annotators(
        state.engine, rule=FlagRule(alpha=alpha, min_votes=min_votes), apply=apply, elo_config=state.live
    )
    if apply:
        state.pairing.refresh(force=True)
    return [AnnotatorReviewOut(**_finite(r)) for r in rows if show_all or r.suspicious or r.flagged]


@router.get("/golds", response_model=list[GoldOut], summary="Gold battles")
def admin_golds(state: StateDep) -> list[GoldOut]:
    """Every gold battle with its votes, how many were right, and whether (and why) it is retired."""
    with Session(state.engine) as session:
        return [GoldOut(**r.as_dict()) for r in gold_item_rows(session)]


@router.get("/leaks", response_model=list[LeakOut], summary="Answers that leak a model name")
def admin_leaks(state: StateDep) -> list[LeakOut]:
    """Outputs that name their own model or maker (kept out of battles)."""
    with state.engine.connect() as conn:
        return [LeakOut(**_finite(r)) for r in find_leaks(conn)]
