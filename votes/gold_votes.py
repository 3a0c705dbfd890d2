"""Votes on gold battles: written apart from votes, so that no fit and no live rating ever counts them.

A served gold travels in the same encrypted battle token as any battle; its ``gold`` field reads
``"<gold id>:<right winner as shown>"`` with ``":q<N>"`` appended while the annotator takes the onboarding
quiz of ``N`` golds. :func:`record_gold_votes` is called by :func:`votes.recording.record_votes` for the
gold requests of a batch, inside the same transaction and after the same locks, so a gold vote takes the
same path and time as any other. It writes the battle row (``source == "gold"``, so the reveal and its
ids look like every battle's) and a :class:`~votes.models.GoldVote`, never a :class:`~votes.models.Vote`.
The reveal shows each named model's live rating and the change an Elo step would have made, as for any
vote, but nothing is applied. An annotator who ends the quiz below :data:`QUIZ_PASS` right is flagged:
a flagged annotator's votes never count (:mod:`votes.recording`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, or_
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from leaderboard.data import Outcome, parse_outcome
from leaderboard.elo import EloConfig, update_elo
from votes.battles import AlreadyVotedError, RepeatJudgementError, VoteError, VoteRequest, VoteResult
from votes.live import LiveConfig, shown
from votes.models import Annotator, GoldVote, utcnow
from votes.tables import battle_t, goldvote_t, liverating_t, model_t

__all__ = ["QUIZ_PASS", "GoldTicket", "gold_correct", "record_gold_votes"]

#: Share of the quiz's golds an annotator must vote right for their votes to count.
QUIZ_PASS = 0.75

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


def _previous(
    session: Session, request: VoteRequest, names: tuple[str, str]
) -> VoteResult | VoteError | None:
    """An earlier gold vote of this token or idempotency key (one query): its result, or a refusal if it
    disagrees."""
    token = request.battle.token_id
    match = battle_t.c.token_id == token
    if request.idempotency_key is not None:
        match = or_(match, goldvote_t.c.idempotency_key == request.idempotency_key)
    stmt = (
        sa_select(
            battle_t.c.id, battle_t.c.token_id, goldvote_t.c.id, goldvote_t.c.winner, goldvote_t.c.live_elo
        )
        .select_from(battle_t.join(goldvote_t, goldvote_t.c.battle_id == battle_t.c.id))
        .where(match)
    )
    rows = session.connection().execute(stmt).all()
    if not rows:
        return None
    # the idempotency key's vote answers first, as for any vote
    battle_id, battle_token, vote_id, winner, live_elo = next((r for r in rows if r[1] != token), rows[0])
    if battle_token == token and winner != request.winner:
        return AlreadyVotedError(int(battle_id))
    shown = {"winner": winner, "live_elo": live_elo}
    return _result(shown, vote_id=int(vote_id), battle_id=int(battle_id), names=names, replayed=True)


def _shown_ratings(
    request: VoteRequest, config: LiveConfig, ratings: dict[int, tuple[float, int]]
) -> dict[str, float]:
    """Each side's live rating and the Elo step the vote would make: shown, never applied."""
    b = request.battle
    (ra, ga), (rb, gb) = ratings[b.model_a_id], ratings[b.model_b_id]
    if isinstance(config, EloConfig):
        after_a, after_b = update_elo(
            ra, rb, parse_outcome(request.winner), config=config, games_a=ga, games_b=gb
        )
    else:
        after_a, after_b = ra, rb
    return {"a_before": ra, "a_after": after_a, "b_before": rb, "b_after": after_b}


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
        annotator.flag_reason = f"failed the onboarding quiz: {int(right)} of {int(n)} golds right"
        session.add(annotator)
        session.flush()


def _sides(
    session: Session, requests: Sequence[VoteRequest], config: LiveConfig
) -> tuple[dict[int, str], dict[int, tuple[float, int]]]:
    """Names and live ratings (rating, games) of the named models; a model without a live row shows the
    rater's initial rating. Read without a lock and without creating rows: nothing here is written."""
    ids = sorted({m for r in requests for m in (r.battle.model_a_id, r.battle.model_b_id)})
    stmt = (
        sa_select(model_t.c.id, model_t.c.name, liverating_t.c.rating, liverating_t.c.games)
        .select_from(model_t.outerjoin(liverating_t, liverating_t.c.model_id == model_t.c.id))
        .where(model_t.c.id.in_(ids))
    )
    rows = session.connection().execute(stmt).all()
    names = {int(m): str(n) for m, n, _, _ in rows}
    initial = config.initial if isinstance(config, EloConfig) else shown(config, config.initial())[0]
    ratings = {m: (float(initial), 0) for m in ids}
    ratings.update({int(m): (float(r), int(g)) for m, _, r, g in rows if r is not None})
    return {m: names.get(m, f"model #{m}") for m in ids}, ratings


def record_gold_votes(
    session: Session, requests: Sequence[VoteRequest], *, config: LiveConfig
) -> list[VoteResult | VoteError]:
    """Write each gold vote with its battle row, each in a savepoint; the caller commits.

    A retry (same token and winner, or same idempotency key) is answered with the first result; the same
    token with another winner is refused, and so is a second vote of one annotator on one gold.
    """
    names, ratings = _sides(session, requests, config)
    results: list[VoteResult | VoteError] = []
    for request in requests:
        b = request.battle
        assert b.gold is not None  # nosec B101 # the caller routes gold requests only
        ticket = GoldTicket.decode(b.gold)
        shown_names = (names[b.model_a_id], names[b.model_b_id])
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
            "live_elo": _shown_ratings(request, config, ratings),
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
        try:
            with session.begin_nested():
                conn = session.connection()
                battle_id = int(conn.execute(insert(battle_t).returning(battle_t.c.id), battle).scalar_one())
                vote_id = int(
                    conn.execute(
                        insert(goldvote_t).returning(goldvote_t.c.id), {**row, "battle_id": battle_id}
                    ).scalar_one()
                )
        except IntegrityError:
            session.expunge_all()
            previous = _previous(session, request, shown_names)
            results.append(previous or RepeatJudgementError())
            continue
        if ticket.quiz:
            _check_quiz(session, b.annotator_id, ticket.quiz)
        results.append(_result(row, vote_id=vote_id, battle_id=battle_id, names=shown_names, replayed=False))
    return results
