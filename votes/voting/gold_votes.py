"""Votes on gold battles: written apart from votes, so that no fit and no live rating ever counts them.

A served gold travels in the same encrypted battle token as any battle; its ``gold`` field reads
``"<gold id>:<right winner as shown>"`` with ``":q<N>"`` appended while the annotator takes the onboarding
quiz of ``N`` golds. Its vote is written by :func:`votes.voting.apart_votes.record_apart_votes` (a battle row
with ``source == "gold"`` and a :class:`~votes.models.GoldVote`, never a :class:`~votes.models.Vote`), with
the fields :func:`gold_vote_row` gives. An annotator who ends the quiz below :data:`QUIZ_PASS` right is
flagged (:func:`after_gold_vote`): a flagged annotator's votes never count (:mod:`votes.voting.recording`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from leaderboard.data import OUTCOME_STRINGS, Outcome, parse_outcome
from votes.models import Annotator, GoldVote
from votes.voting.battles import VoteRequest

__all__ = ["QUIZ_FLAG_REASON", "QUIZ_PASS", "GoldTicket", "after_gold_vote", "gold_correct", "gold_vote_row"]

#: Share of the quiz's golds an annotator must vote right for their votes to count.
QUIZ_PASS = 0.75
#: How the flag reason of an annotator who failed the quiz begins.
QUIZ_FLAG_REASON = "failed the onboarding quiz"

_TIES = {Outcome.TIE, Outcome.BOTHBAD}
#: What a gold can expect: a side, or a tie (never both bad).
_EXPECTED = {OUTCOME_STRINGS[o] for o in (Outcome.MODEL_A, Outcome.MODEL_B, Outcome.TIE)}


@dataclass(frozen=True)
class GoldTicket:
    """What a gold battle's token carries about the gold (see
    :attr:`votes.voting.battles.IssuedBattle.gold`)."""

    gold_id: int
    expected: str  # the winner string of a side, or of a tie
    quiz: int = 0  # the quiz's length while this gold is part of it, else 0

    def encode(self) -> str:
        return f"{self.gold_id}:{self.expected}" + (f":q{self.quiz}" if self.quiz else "")

    @classmethod
    def decode(cls, text: str) -> GoldTicket:
        """Read :meth:`encode`'s form; raises ``ValueError`` (the token is ours, so only on a bug)."""
        parts = text.split(":")
        if len(parts) not in (2, 3) or parts[1] not in _EXPECTED:
            raise ValueError(f"not a gold ticket: {text!r}")
        quiz = int(parts[2][1:]) if len(parts) == 3 and parts[2].startswith("q") else 0
        return cls(int(parts[0]), parts[1], quiz)


def gold_correct(winner: Outcome, expected: str) -> bool:
    """Whether a vote is right: the expected side, or either tie when the right answer is a tie."""
    right = parse_outcome(expected)
    if right is Outcome.TIE:
        return winner in _TIES
    return winner == right


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


def gold_vote_row(_session: Session, request: VoteRequest) -> dict[str, Any]:
    """The gold's own fields of a gold vote's row (:func:`votes.voting.apart_votes.record_apart_votes` adds
    the fields every vote kept apart has)."""
    if request.battle.gold is None:
        raise ValueError("not a gold battle")
    ticket = GoldTicket.decode(request.battle.gold)
    return {
        "gold_id": ticket.gold_id,
        "expected": ticket.expected,
        "correct": gold_correct(request.winner, ticket.expected),
        "quiz": ticket.quiz > 0,
    }


def after_gold_vote(session: Session, request: VoteRequest) -> None:
    """A new gold vote written: flag the annotator once their onboarding quiz ends below the pass mark."""
    if request.battle.gold is None:
        raise ValueError("not a gold battle")
    ticket = GoldTicket.decode(request.battle.gold)
    if ticket.quiz:
        _check_quiz(session, request.battle.annotator_id, ticket.quiz)
