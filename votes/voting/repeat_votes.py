"""Repeat battles: an annotator's own earlier battle shown again, sides swapped, to measure self-agreement.

A served repeat (:meth:`arena.voting.pairing_service.PairingService.pick_repeat`) carries the id of the vote
it repeats in the battle token's ``repeat`` field, encrypted like the rest. Its vote is written by
:func:`votes.voting.apart_votes.record_apart_votes` (a battle row with ``source == "repeat"`` and a
:class:`~votes.models.RepeatVote`, never a :class:`~votes.models.Vote`), so the rule of one counted
judgement per annotator, prompt and pair, and the rule against showing answers whose models were
revealed, are about counted battles only: a repeat is neither.

Agreement: the repeat agrees when both votes prefer the same model, or both are ties (``tie`` and
``tie (bothbad)`` are one class, as in ``arena agreement``). Each annotator's self-agreement is the share
of their repeats that agree, with a 95% Wilson interval (:func:`leaderboard.quality.gold.wilson_shares`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlmodel import Session

from leaderboard.data import Outcome, parse_outcome
from leaderboard.quality.gold import wilson_shares
from votes.tables import battle_t, repeatvote_t, vote_t
from votes.voting.battles import VoteError, VoteRequest

__all__ = [
    "REPEATABLE_SOURCES",
    "SelfAgreement",
    "SelfAgreementRule",
    "annotator_self_agreement",
    "overall_self_agreement",
    "repeat_agrees",
    "repeat_vote_row",
]

#: Battle sources whose votes can be repeated: the site's pre-generated answers. Never a gold, an import or
#: a repeat; nor a live battle, whose prompt the annotator wrote: shown again as a site battle, it would
#: tell.
REPEATABLE_SOURCES = ("site",)

#: What a vote says for self-agreement: the left answer, the right one, or a tie (both bad is a tie).
_CLASS = {
    Outcome.MODEL_A: Outcome.MODEL_A,
    Outcome.MODEL_B: Outcome.MODEL_B,
    Outcome.TIE: Outcome.TIE,
    Outcome.BOTHBAD: Outcome.TIE,
}
#: The same, with the sides swapped.
_SWAPPED = {Outcome.MODEL_A: Outcome.MODEL_B, Outcome.MODEL_B: Outcome.MODEL_A, Outcome.TIE: Outcome.TIE}


def repeat_agrees(original_winner: str, winner: Outcome) -> bool:
    """Whether a repeat's ``winner`` (sides as the repeat showed them, swapped from the first time)
    names the same model as the stored ``original_winner``, or a tie as it did; raises ``ValueError`` on
    an unknown stored winner."""
    return _CLASS[parse_outcome(original_winner)] == _SWAPPED[_CLASS[winner]]


class _Refused(VoteError):
    """A repeat token that does not name the annotator's own battle with the sides swapped. The message
    is any refused battle's: the answer must not tell a repeat from another battle."""

    def __init__(self) -> None:
        super().__init__("This battle cannot be voted on.")


def repeat_vote_row(session: Session, request: VoteRequest) -> dict[str, object] | VoteError:
    """The repeat's own fields of a repeat vote's row, or a refusal.

    The token is ours (encrypted and authenticated), but what it names is checked against the store all
    the same: the vote repeated must be a counted vote by this annotator on this prompt, with the same two
    answers and models in swapped sides.
    """
    b = request.battle
    if b.repeat is None:
        raise ValueError("not a repeat battle")
    stmt = (
        select(
            vote_t.c.winner,
            battle_t.c.annotator_id,
            battle_t.c.prompt_id,
            battle_t.c.model_a_id,
            battle_t.c.model_b_id,
            battle_t.c.output_a_id,
            battle_t.c.output_b_id,
            battle_t.c.source,
        )
        .select_from(vote_t.join(battle_t, battle_t.c.id == vote_t.c.battle_id))
        .where(vote_t.c.id == b.repeat)
    )
    found = session.connection().execute(stmt).first()
    if found is None:
        return _Refused()
    winner, annotator, prompt, model_a, model_b, out_a, out_b, source = found
    if (
        annotator != b.annotator_id
        or prompt != b.prompt_id
        or (model_a, model_b) != (b.model_b_id, b.model_a_id)
        or (out_a, out_b) != (b.output_b_id, b.output_a_id)
        or source not in REPEATABLE_SOURCES
    ):
        return _Refused()
    return {
        "original_vote_id": b.repeat,
        "original_winner": str(winner),
        "agreed": repeat_agrees(str(winner), request.winner),
    }


@dataclass(frozen=True)
class SelfAgreementRule:
    """Low self-agreement is a review reason only with at least ``min_repeats`` repeats and a 95% Wilson
    upper bound below ``max_high``: an honest annotator agrees with themselves far more often than a coin
    (one half) or a random click among left, right and tie (one third); one who always clicks the same
    side agrees never, since the sides are swapped."""

    min_repeats: int = 10
    max_high: float = 0.6


@dataclass(frozen=True)
class SelfAgreement:
    """Repeats voted, repeats that agreed, the share and its 95% Wilson interval (NaN without repeats)."""

    n_repeat: int
    n_agreed: int
    share: float
    low: float
    high: float

    def is_low(self, rule: SelfAgreementRule | None = None) -> bool:
        rule = rule or SelfAgreementRule()
        return self.n_repeat >= rule.min_repeats and self.high < rule.max_high

    def reason(self) -> str:
        return (
            f"self-agreement {self.n_agreed} of {self.n_repeat} repeats "
            f"({self.share:.0%}, 95% {self.low:.0%}-{self.high:.0%}), below an honest annotator's"
        )

    def as_dict(self) -> dict[str, float | int | None]:
        return {k: (None if isinstance(v, float) and v != v else v) for k, v in vars(self).items()}


def _repeats(conn: Connection) -> list[tuple[int, bool]]:
    """(annotator, agreed) of every repeat vote, in time (id) order."""
    stmt = select(repeatvote_t.c.annotator_id, repeatvote_t.c.agreed).order_by(repeatvote_t.c.id)
    return [(int(a), bool(g)) for a, g in conn.execute(stmt).all()]


def annotator_self_agreement(conn: Connection) -> dict[int, SelfAgreement]:
    """Every annotator with repeat votes: their :class:`SelfAgreement`."""
    rows = _repeats(conn)
    ids = sorted({a for a, _ in rows})
    index = {a: i for i, a in enumerate(ids)}
    who = np.array([index[a] for a, _ in rows], dtype=np.int64)
    agreed = np.array([g for _, g in rows], dtype=bool)
    n, k, share, low, high = wilson_shares(who, agreed, len(ids))
    return {
        a: SelfAgreement(int(n[i]), int(k[i]), float(share[i]), float(low[i]), float(high[i]))
        for a, i in index.items()
    }


def overall_self_agreement(conn: Connection) -> SelfAgreement:
    """Every repeat vote pooled: the share that agreed and its 95% Wilson interval. Repeats of one
    annotator are not independent, so with a few heavy annotators the interval is too narrow; the
    per-annotator figures (:func:`annotator_self_agreement`) show who weighs."""
    agreed = np.array([g for _, g in _repeats(conn)], dtype=bool)
    n, k, share, low, high = wilson_shares(np.zeros(agreed.size, dtype=np.int64), agreed, 1)
    return SelfAgreement(int(n[0]), int(k[0]), float(share[0]), float(low[0]), float(high[0]))
