"""Votes that never count, written apart from votes: on gold battles and on repeat battles.

A gold (:mod:`votes.gold_votes`) and a repeat (:mod:`votes.repeat_votes`) travel in the same encrypted
battle token as any battle and are voted through the same writer: :func:`votes.recording.record_votes`
hands the requests whose battle is not :attr:`~votes.battles.IssuedBattle.counted` to
:func:`record_apart_votes`, inside the same transaction and after the same locks, so they take the same
path and time as any other vote. Each writes its battle row (``source`` ``"gold"`` or ``"repeat"``, so
the reveal and its ids look like every battle's) and a row of its own table (``goldvote``,
``repeatvote``), never a :class:`~votes.models.Vote`. The reveal shows each named model's live rating
and the change an Elo step would have made, as for any vote, but nothing is applied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, insert, or_
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from leaderboard.data import parse_outcome
from leaderboard.elo import EloConfig, update_elo
from votes.battles import AlreadyVotedError, RepeatJudgementError, VoteError, VoteRequest, VoteResult
from votes.gold_votes import after_gold_vote, gold_vote_row
from votes.live import LiveConfig, shown
from votes.models import utcnow
from votes.repeat_votes import repeat_vote_row
from votes.tables import battle_t, goldvote_t, liverating_t, model_t, repeatvote_t

__all__ = ["record_apart_votes"]


@dataclass(frozen=True)
class _Kind:
    """One kind of vote kept apart: its battle rows' ``source``, its table, the fields of its own row
    (or a refusal), whether its battle row names the answers' outputs, and what follows a new vote."""

    source: str
    table: Table
    row: Callable[[Session, VoteRequest], dict[str, Any] | VoteError]
    outputs: bool
    after: Callable[[Session, VoteRequest], None] | None = None


_GOLD = _Kind("gold", goldvote_t, gold_vote_row, outputs=False, after=after_gold_vote)
_REPEAT = _Kind("repeat", repeatvote_t, repeat_vote_row, outputs=True)


def _result(
    vote: dict[str, Any], *, vote_id: int, battle_id: int, names: tuple[str, str], replayed: bool
) -> VoteResult:
    return VoteResult.from_live_elo(
        vote.get("live_elo"),
        vote_id=vote_id,
        battle_id=battle_id,
        winner=str(vote["winner"]),
        model_a=names[0],
        model_b=names[1],
        replayed=replayed,
    )


def _previous(
    session: Session, request: VoteRequest, names: tuple[str, str], table: Table
) -> VoteResult | VoteError | None:
    """An earlier vote of this token or idempotency key in ``table`` (one query): its result, or a refusal
    if it disagrees."""
    token = request.battle.token_id
    match = battle_t.c.token_id == token
    if request.idempotency_key is not None:
        match = or_(match, table.c.idempotency_key == request.idempotency_key)
    stmt = (
        sa_select(battle_t.c.id, battle_t.c.token_id, table.c.id, table.c.winner, table.c.live_elo)
        .select_from(battle_t.join(table, table.c.battle_id == battle_t.c.id))
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


def record_apart_votes(
    session: Session, requests: Sequence[VoteRequest], *, config: LiveConfig
) -> list[VoteResult | VoteError]:
    """Write each gold or repeat vote with its battle row, each in a savepoint; the caller commits.

    A retry (same token and winner, or same idempotency key) is answered with the first result; the same
    token with another winner is refused, and so is a second vote of one annotator on one gold or a
    second repeat of one vote. A repeat whose token names a vote that is not the annotator's own battle
    with the sides swapped is refused (:func:`votes.repeat_votes.repeat_vote_row`).
    """
    names, ratings = _sides(session, requests, config)
    results: list[VoteResult | VoteError] = []
    for request in requests:
        b = request.battle
        if b.counted:
            raise ValueError("a counted vote was handed to the writer of votes kept apart")
        kind = _GOLD if b.gold is not None else _REPEAT
        shown_names = (names[b.model_a_id], names[b.model_b_id])
        previous = _previous(session, request, shown_names, kind.table)
        if previous is not None:
            results.append(previous)
            continue
        own = kind.row(session, request)
        if isinstance(own, VoteError):
            results.append(own)
            continue
        voted_at = request.voted_at or utcnow()
        row: dict[str, Any] = {
            **own,
            "annotator_id": b.annotator_id,
            "winner": request.winner,
            "created_at": voted_at,
            "seconds_to_vote": max(0.0, (voted_at - b.issued_at).total_seconds()),
            "client_hash": request.client_hash,
            "address_hash": request.address_hash,
            "idempotency_key": request.idempotency_key,
            "live_elo": _shown_ratings(request, config, ratings),
        }
        battle = {
            "prompt_id": b.prompt_id,
            "output_a_id": b.output_a_id if kind.outputs else None,
            "output_b_id": b.output_b_id if kind.outputs else None,
            "model_a_id": b.model_a_id,
            "model_b_id": b.model_b_id,
            "annotator_id": b.annotator_id,
            "issued_at": b.issued_at,
            "pair_probability": b.pair_probability,
            "source": kind.source,
            "token_id": b.token_id,
        }
        try:
            with session.begin_nested():
                conn = session.connection()
                battle_id = int(conn.execute(insert(battle_t).returning(battle_t.c.id), battle).scalar_one())
                vote_id = int(
                    conn.execute(
                        insert(kind.table).returning(kind.table.c.id), {**row, "battle_id": battle_id}
                    ).scalar_one()
                )
        except IntegrityError:
            session.expunge_all()
            previous = _previous(session, request, shown_names, kind.table)
            results.append(previous or RepeatJudgementError())
            continue
        if kind.after is not None:
            kind.after(session, request)
        results.append(_result(row, vote_id=vote_id, battle_id=battle_id, names=shown_names, replayed=False))
    return results
