"""Annotators: creating them, finding them by session token, flagging them, and their vote history."""

from __future__ import annotations

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from votes.models import Annotator, Battle, Vote

__all__ = [
    "annotator_battles_since",
    "count_annotator_votes",
    "create_annotator",
    "find_annotator_by_token_hash",
    "flag_annotator",
]


def annotator_battles_since(
    *, session: Session, annotator_id: int, after_id: int = 0
) -> list[tuple[int, int, int, int, bool]]:
    """(battle id, prompt, model a, model b, has a vote) of this annotator's battles with id > ``after_id``.

    A caller keeping an annotator's history in memory (pairs seen, votes cast) reads only what is new.
    """
    stmt = (
        sa_select(
            col(Battle.id),
            col(Battle.prompt_id),
            col(Battle.model_a_id),
            col(Battle.model_b_id),
            col(Vote.id),
        )
        .join(Vote, col(Vote.battle_id) == col(Battle.id), isouter=True)
        .where(col(Battle.annotator_id) == annotator_id, col(Battle.id) > after_id)
        .order_by(col(Battle.id))
    )
    return [
        (int(b), int(p), int(a), int(m), v is not None)
        for b, p, a, m, v in session.execute(stmt).all()
        if b is not None and p is not None
    ]


def create_annotator(
    *, session: Session, kind: str = "anonymous", label: str | None = None, token_hash: str | None = None
) -> Annotator:
    annotator = Annotator(kind=kind, label=label, token_hash=token_hash)
    session.add(annotator)
    session.flush()
    return annotator


def find_annotator_by_token_hash(*, session: Session, token_hash: str) -> Annotator | None:
    return session.exec(select(Annotator).where(Annotator.token_hash == token_hash)).first()


def flag_annotator(*, session: Session, annotator_id: int, reason: str | None, flagged: bool = True) -> bool:
    """Mark (or clear) an annotator as flagged; False when there is no such annotator."""
    annotator = session.get(Annotator, annotator_id)
    if annotator is None:
        return False
    annotator.flagged = flagged
    annotator.flag_reason = reason if flagged else None
    session.add(annotator)
    session.flush()
    return True


def count_annotator_votes(*, session: Session, annotator_id: int) -> int:
    stmt = (
        select(func.count(col(Vote.id)))
        .join(Battle, col(Battle.id) == col(Vote.battle_id))
        .where(Battle.annotator_id == annotator_id)
    )
    return int(session.exec(stmt).one())
