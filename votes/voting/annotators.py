"""Annotators: creating them, finding them by session token, flagging them, and their vote history."""

from __future__ import annotations

from sqlalchemy import func, literal, union_all
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from votes.dialects import dialect_of
from votes.models import Annotator, Battle, GoldVote, RepeatVote, Vote, utcnow

__all__ = [
    "APART_SOURCES",
    "address_reveals_since",
    "annotator_battles_since",
    "annotator_golds_and_repeats",
    "count_annotator_votes",
    "annotator_for_session",
    "create_annotator",
    "find_annotator_by_token_hash",
    "flag_annotator",
]

#: Battle sources whose votes are stored apart and never count (:mod:`votes.voting.apart_votes`): not part of
# an : annotator's counted history, and not a skip when the battle has no ``vote`` row.
APART_SOURCES = ("gold", "repeat")


def annotator_battles_since(
    *, session: Session, annotator_id: int, after_id: int = 0
) -> list[tuple[int, int, int, int, int | None, int | None, int | None, str]]:
    """(battle id, prompt, model a, model b, has a vote, output a, output b) of this annotator's battles
    with id > ``after_id``, golds and repeats left out (:func:`annotator_golds_and_repeats`
    has those); "has a vote" is the vote's id, or None; last comes the
    battle's source.

    A caller keeping an annotator's history in memory (pairs seen, votes cast, answers whose models a
    vote revealed) reads only what is new. A session's provisional id (negative: no annotator row yet)
    has none.
    """
    if annotator_id < 0:
        return []
    stmt = (
        sa_select(
            col(Battle.id),
            col(Battle.prompt_id),
            col(Battle.model_a_id),
            col(Battle.model_b_id),
            col(Vote.id),
            col(Battle.output_a_id),
            col(Battle.output_b_id),
            col(Battle.source),
        )
        .join(Vote, col(Vote.battle_id) == col(Battle.id), isouter=True)
        .where(
            col(Battle.annotator_id) == annotator_id,
            col(Battle.id) > after_id,
            col(Battle.source).not_in(APART_SOURCES),
        )
        .order_by(col(Battle.id))
    )
    return [
        (int(b), int(p), int(a), int(m), None if v is None else int(v), oa, ob, str(s))
        for b, p, a, m, v, oa, ob, s in session.execute(stmt).all()
        if b is not None and p is not None
    ]


def address_reveals_since(
    *, session: Session, address_hash: str, after_vote_id: int = 0, limit: int = 100_000
) -> list[tuple[int, int | None, int | None]]:
    """(vote id, output a, output b) of the votes cast from this address hash with id > ``after_vote_id``,
    oldest first, at most ``limit`` of them (the caller reads on from the last id it got).

    Each such vote revealed the models of both outputs to whoever sits at that address, whatever cookie
    they hold; pairing keeps those outputs out of the address's next battles.
    """
    stmt = (
        sa_select(col(Vote.id), col(Battle.output_a_id), col(Battle.output_b_id))
        .join(Battle, col(Battle.id) == col(Vote.battle_id))
        .where(col(Vote.address_hash) == address_hash, col(Vote.id) > after_vote_id)
        .order_by(col(Vote.id))
        .limit(limit)
    )
    return [(int(v), a, b) for v, a, b in session.execute(stmt).all()]


def create_annotator(
    *, session: Session, kind: str = "anonymous", label: str | None = None, token_hash: str | None = None
) -> Annotator:
    annotator = Annotator(kind=kind, label=label, token_hash=token_hash)
    session.add(annotator)
    session.flush()
    return annotator


def annotator_for_session(*, session: Session, session_key: str, kind: str = "anonymous") -> int:
    """The annotator of a session or an account (by its key), written now if this is its first use.

    An anonymous session's row is written at its first vote; a signed-in account's (``kind`` "account",
    keyed by a hash of issuer and subject) at its first sign-in. Two first uses racing here get the same
    row: the insert does nothing on a conflict with the unique key, and the row is read back.
    """
    stmt = select(Annotator.id).where(Annotator.session_key == session_key)
    found = session.exec(stmt).first()
    if found is not None:
        return int(found)
    values = {"kind": kind, "session_key": session_key, "created_at": utcnow(), "flagged": False}
    session.execute(dialect_of(session).insert_or_skip(Annotator, values, unique=["session_key"]))
    written = session.exec(stmt).one()
    assert written is not None  # nosec B101 # type narrowing: a primary key
    return int(written)


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
    """The annotator's votes as shown to them, golds and repeats included (a count that stood still after
    a vote would mark the battle), in one round trip."""
    if annotator_id < 0:  # a session's provisional id: no row and no vote yet
        return 0
    votes = (
        sa_select(func.count(col(Vote.id)))
        .join(Battle, col(Battle.id) == col(Vote.battle_id))
        .where(col(Battle.annotator_id) == annotator_id)
    )
    golds = sa_select(func.count(col(GoldVote.id))).where(col(GoldVote.annotator_id) == annotator_id)
    repeats = sa_select(func.count(col(RepeatVote.id))).where(col(RepeatVote.annotator_id) == annotator_id)
    counts = session.execute(
        sa_select(votes.scalar_subquery(), golds.scalar_subquery(), repeats.scalar_subquery())
    ).one()
    return sum(int(n or 0) for n in counts)


def annotator_golds_and_repeats(*, session: Session, annotator_id: int) -> tuple[list[int], list[int]]:
    """The golds this annotator voted on and their votes already repeated, in one round trip: each gold
    is served to an annotator once, and each vote repeated once."""
    if annotator_id < 0:
        return [], []
    golds = sa_select(col(GoldVote.gold_id), literal(True)).where(col(GoldVote.annotator_id) == annotator_id)
    repeats = sa_select(col(RepeatVote.original_vote_id), literal(False)).where(
        col(RepeatVote.annotator_id) == annotator_id
    )
    rows = session.execute(union_all(golds, repeats)).all()
    return [int(i) for i, gold in rows if gold], [int(i) for i, gold in rows if not gold]
