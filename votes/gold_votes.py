"""Votes on gold battles: written apart from votes, so that no fit and no live rating ever counts them.

A served gold travels in the same encrypted battle token as any battle; its ``gold`` field reads
``"<gold id>:<right winner as shown>"`` with ``":q<N>"`` appended while the annotator takes the onboarding
quiz of ``N`` golds. :func:`record_gold_votes` is called by :func:`votes.recording.record_votes` for the
gold requests of a batch, inside the same transaction and after the same locks and reads, so a gold vote
takes the same path and time as any other. It writes the battle row (``source == "gold"``, so the reveal
and its battle id look like every battle's) and a :class:`~votes.models.GoldVote`, never a
:class:`~votes.models.Vote`. The answer looks like a live vote's: the vote id shown is taken from the
votes' own numbering (:func:`reserve_vote_id`), and the rating change shown is the step a live vote on the
two named models would make (the same rater, the same flags), never applied. An annotator who ends the
quiz below :data:`QUIZ_PASS` right is flagged: a flagged annotator's votes never count
(:mod:`votes.recording`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, insert, or_, text
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from leaderboard.data import Outcome, parse_outcome
from votes.battles import AlreadyVotedError, RepeatJudgementError, VoteError, VoteRequest, VoteResult
from votes.models import Annotator, GoldVote, utcnow
from votes.tables import battle_t, goldvote_t, vote_t

__all__ = [
    "QUIZ_FLAG_REASON",
    "QUIZ_PASS",
    "GoldTicket",
    "gold_correct",
    "next_free_vote_id",
    "record_gold_votes",
    "reserve_vote_id",
]

#: Share of the quiz's golds an annotator must vote right for their votes to count.
QUIZ_PASS = 0.75
#: How the flag reason of an annotator who failed the quiz begins.
QUIZ_FLAG_REASON = "failed the onboarding quiz"

_TIES = {Outcome.TIE, Outcome.BOTHBAD}


@dataclass(frozen=True)
class GoldTicket:
    """What a gold battle's token carries about the gold (see :attr:`votes.battles.IssuedBattle.gold`)."""

    gold_id: int
    expected: str  # "model_a", "model_b" or "tie"
    quiz: int = 0  # the quiz's length while this gold is part of it, else 0

    def encode(self) -> str:
        return f"{self.gold_id}:{self.expected}" + (f":q{self.quiz}" if self.quiz else "")

    @classmethod
    def decode(cls, text: str) -> GoldTicket:
        """Read :meth:`encode`'s form; raises ``ValueError`` (the token is ours, so only on a bug)."""
        parts = text.split(":")
        if len(parts) not in (2, 3) or parts[1] not in ("model_a", "model_b", "tie"):
            raise ValueError(f"not a gold ticket: {text!r}")
        quiz = int(parts[2][1:]) if len(parts) == 3 and parts[2].startswith("q") else 0
        return cls(int(parts[0]), parts[1], quiz)


def gold_correct(winner: str, expected: str) -> bool:
    """Whether a vote is right: the expected side, or either tie when the right answer is a tie."""
    outcome = parse_outcome(winner)
    if expected == "tie":
        return outcome in _TIES
    return outcome == parse_outcome(expected)


def _result(
    gold_vote: dict[str, Any], *, vote_id: int, battle_id: int, names: tuple[str, str], replayed: bool
) -> VoteResult:
    return VoteResult.from_live_elo(
        gold_vote.get("live_elo"),
        vote_id=vote_id,
        battle_id=battle_id,
        winner=str(gold_vote["winner"]),
        model_a=names[0],
        model_b=names[1],
        replayed=replayed,
    )


_PREVIOUS_COLUMNS = (
    battle_t.c.id,
    battle_t.c.token_id,
    func.coalesce(goldvote_t.c.shown_vote_id, goldvote_t.c.id),
    goldvote_t.c.winner,
    goldvote_t.c.live_elo,
)
_PREVIOUS_JOIN = battle_t.join(goldvote_t, goldvote_t.c.battle_id == battle_t.c.id)
_PREVIOUS_BY_TOKEN = (
    sa_select(*_PREVIOUS_COLUMNS).select_from(_PREVIOUS_JOIN).where(battle_t.c.token_id == bindparam("token"))
)
_PREVIOUS_BY_TOKEN_OR_KEY = (
    sa_select(*_PREVIOUS_COLUMNS)
    .select_from(_PREVIOUS_JOIN)
    .where(or_(battle_t.c.token_id == bindparam("token"), goldvote_t.c.idempotency_key == bindparam("key")))
)
_INSERT_BATTLE = insert(battle_t).returning(battle_t.c.id)
_INSERT_GOLD_VOTE = insert(goldvote_t).returning(goldvote_t.c.id)
# The highest vote id given out so far, counting the ids gold votes showed (SQLite: no sequence to draw
# on). Each shown id is the largest so far plus one, so the newest gold vote holds the largest: both reads
# are one step down an index.
_LAST_SHOWN_ID = sa_select(
    func.max(
        func.coalesce(sa_select(func.max(vote_t.c.id)).scalar_subquery(), 0),
        func.coalesce(
            sa_select(goldvote_t.c.shown_vote_id).order_by(goldvote_t.c.id.desc()).limit(1).scalar_subquery(),
            0,
        ),
    )
)
_NEXT_VOTE_ID_PG = text("SELECT nextval(pg_get_serial_sequence('vote', 'id'))")


def next_free_vote_id(conn: Connection) -> int:
    """SQLite: the largest vote id given out (votes' and the ids gold votes showed) plus one.

    SQLite has no sequence: left to itself it numbers a vote as the largest stored id plus one, which is
    the id a gold vote just showed. :func:`votes.recording.record_votes` numbers site votes with this
    instead, so no two answers ever show the same id. Call it inside the write transaction.
    """
    return int(conn.execute(_LAST_SHOWN_ID).scalar_one() or 0) + 1


def reserve_vote_id(conn: Connection) -> int:
    """An id from the votes' own ids, for a gold vote's answer to show: the ids an annotator sees go up
    with the site's votes whatever the battle. On PostgreSQL one value of the vote table's sequence (no
    vote ever gets it); on SQLite :func:`next_free_vote_id`."""
    if conn.dialect.name == "postgresql":
        return int(conn.execute(_NEXT_VOTE_ID_PG).scalar_one())
    return next_free_vote_id(conn)


def _previous(
    session: Session, request: VoteRequest, names: tuple[str, str]
) -> VoteResult | VoteError | None:
    """An earlier gold vote of this token or idempotency key (one query): its result, or a refusal if it
    disagrees."""
    token = request.battle.token_id
    conn = session.connection()
    if request.idempotency_key is None:
        rows = conn.execute(_PREVIOUS_BY_TOKEN, {"token": token}).all()
    else:
        rows = conn.execute(_PREVIOUS_BY_TOKEN_OR_KEY, {"token": token, "key": request.idempotency_key}).all()
    if not rows:
        return None
    # the idempotency key's vote answers first, as for any vote
    battle_id, battle_token, vote_id, winner, live_elo = next((r for r in rows if r[1] != token), rows[0])
    if battle_token == token and winner != request.winner:
        return AlreadyVotedError(int(battle_id))
    shown = {"winner": winner, "live_elo": live_elo}
    return _result(shown, vote_id=int(vote_id), battle_id=int(battle_id), names=names, replayed=True)


def _check_quiz(session: Session, annotator_id: int, size: int) -> None:
    """Flag the annotator once their quiz is complete with too few right."""
    stmt = select(GoldVote.correct).where(GoldVote.annotator_id == annotator_id, col(GoldVote.quiz).is_(True))
    answers = list(session.exec(stmt).all())
    n, right = len(answers), sum(bool(a) for a in answers)
    if int(n) < size or int(right) >= math.ceil(QUIZ_PASS * size):
        return
    annotator = session.get(Annotator, annotator_id)
    if annotator is not None and not annotator.flagged:
        annotator.flagged = True
        annotator.flag_reason = f"{QUIZ_FLAG_REASON}: {int(right)} of {int(n)} golds right"
        session.add(annotator)
        session.flush()


def record_gold_votes(
    session: Session,
    requests: Sequence[VoteRequest],
    *,
    shown: Callable[[VoteRequest], dict[str, float]],
    names: dict[int, str],
    look_up: bool = True,
) -> list[VoteResult | VoteError]:
    """Write each gold vote with its battle row; the caller commits.

    :func:`votes.recording.record_votes` has locked the named models' live rows and read the flags as
    for any vote; ``shown`` gives the live rating change the vote shows (computed as a live vote's and
    never applied: :func:`votes.recording.gold_shown_step`), ``names`` the models' names.

    With ``look_up`` each vote is looked up first and written in a savepoint: a retry (same token and
    winner, or same idempotency key) is answered with the first result; the same token with another
    winner is refused, and so is a second vote of one annotator on one gold. Without it (the optimistic
    path of :func:`votes.recording.record_votes`, as for live votes) a retry collides on a unique key
    and the ``IntegrityError`` goes to the caller, who starts over with ``look_up``.
    """
    results: list[VoteResult | VoteError] = []
    for request in requests:
        b = request.battle
        if b.gold is None:
            raise ValueError("record_gold_votes takes votes on gold battles only")
        ticket = GoldTicket.decode(b.gold)
        shown_names = (names[b.model_a_id], names[b.model_b_id])
        if look_up:
            previous = _previous(session, request, shown_names)
            if previous is not None:
                results.append(previous)
                continue
        voted_at = request.voted_at or utcnow()
        row: dict[str, Any] = {
            "gold_id": ticket.gold_id,
            "annotator_id": b.annotator_id,
            "winner": request.winner,
            "expected": ticket.expected,
            "correct": gold_correct(request.winner, ticket.expected),
            "quiz": ticket.quiz > 0,
            "created_at": voted_at,
            "seconds_to_vote": max(0.0, (voted_at - b.issued_at).total_seconds()),
            "client_hash": request.client_hash,
            "address_hash": request.address_hash,
            "idempotency_key": request.idempotency_key,
            "live_elo": shown(request),
        }
        battle = {
            "prompt_id": b.prompt_id,
            "model_a_id": b.model_a_id,
            "model_b_id": b.model_b_id,
            "annotator_id": b.annotator_id,
            "issued_at": b.issued_at,
            "pair_probability": b.pair_probability,
            "source": "gold",
            "token_id": b.token_id,
        }
        if look_up:
            try:
                with session.begin_nested():
                    battle_id, vote_id = _write(session.connection(), battle, row)
            except IntegrityError:
                session.expunge_all()
                previous = _previous(session, request, shown_names)
                results.append(previous or RepeatJudgementError())
                continue
        else:
            battle_id, vote_id = _write(session.connection(), battle, row)
        if ticket.quiz:
            _check_quiz(session, b.annotator_id, ticket.quiz)
        results.append(_result(row, vote_id=vote_id, battle_id=battle_id, names=shown_names, replayed=False))
    return results


def _write(conn: Connection, battle: dict[str, Any], row: dict[str, Any]) -> tuple[int, int]:
    """Insert the battle and its gold vote with the vote id the answer shows: (battle id, shown id)."""
    shown_id = reserve_vote_id(conn)
    battle_id = int(conn.execute(_INSERT_BATTLE, battle).scalar_one())
    conn.execute(_INSERT_GOLD_VOTE, {**row, "battle_id": battle_id, "shown_vote_id": shown_id}).scalar_one()
    return battle_id, shown_id
