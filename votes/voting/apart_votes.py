"""Votes that never count, written apart from votes: on gold battles and on repeat battles.

A gold (:mod:`votes.voting.gold_votes`) and a repeat (:mod:`votes.voting.repeat_votes`) travel in the same
encrypted battle token as any battle and are voted through the same writer:
:func:`votes.voting.recording.record_votes` hands the requests whose battle is not
:attr:`~votes.voting.battles.IssuedBattle.counted` to :func:`record_apart_votes`, inside the same transaction
and after the same locks and reads, so they take the same path and time as any other vote. Each writes its
battle row (``source`` ``"gold"`` or ``"repeat"``, so the reveal and its battle id look like every battle's)
and a row of its own table (``goldvote``, ``repeatvote``), never a :class:`~votes.models.Vote`. The answer
looks like a live vote's: the vote id shown is taken from the votes' own numbering (:func:`reserve_vote_id`),
and the rating change shown is the step a live vote on the two named models would make (the same rater, the
same flags: :func:`votes.voting.recording.apart_shown_step`), never applied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, func, insert, or_
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from votes.dialects import dialect_of
from votes.models import utcnow
from votes.tables import battle_t, goldvote_t, repeatvote_t, vote_t
from votes.voting.battles import AlreadyVotedError, RepeatJudgementError, VoteError, VoteRequest, VoteResult
from votes.voting.gold_votes import after_gold_vote, gold_vote_row
from votes.voting.repeat_votes import repeat_vote_row

__all__ = ["next_free_vote_id", "record_apart_votes", "reserve_vote_id"]


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
        sa_select(
            battle_t.c.id,
            battle_t.c.token_id,
            func.coalesce(table.c.shown_vote_id, table.c.id),
            table.c.winner,
            table.c.live_elo,
        )
        .select_from(battle_t.join(table, table.c.battle_id == battle_t.c.id))
        .where(match)
    )
    rows = session.connection().execute(stmt).all()
    if not rows:
        return None
    # the idempotency key's vote answers first, as for any vote
    battle_id, battle_token, vote_id, winner, live_elo = next((r for r in rows if r[1] != token), rows[0])
    if battle_token == token and winner != request.winner.label:
        return AlreadyVotedError(int(battle_id))
    shown = {"winner": winner, "live_elo": live_elo}
    return _result(shown, vote_id=int(vote_id), battle_id=int(battle_id), names=names, replayed=True)


def _last_shown(table: Table) -> object:
    """The id the newest row of ``table`` showed: the largest it showed, each being the largest so far
    plus one (one step down the primary key)."""
    newest = sa_select(table.c.shown_vote_id).order_by(table.c.id.desc()).limit(1).scalar_subquery()
    return func.coalesce(newest, 0)


# The highest vote id given out so far, counting the ids gold and repeat votes showed (SQLite: no
# sequence to draw on).
_LAST_SHOWN_ID = sa_select(
    func.max(
        func.coalesce(sa_select(func.max(vote_t.c.id)).scalar_subquery(), 0),
        _last_shown(goldvote_t),
        _last_shown(repeatvote_t),
    )
)


def next_free_vote_id(conn: Connection) -> int:
    """SQLite: the largest vote id given out (votes' and the ids gold and repeat votes showed) plus one.

    SQLite has no sequence: left to itself it numbers a vote as the largest stored id plus one, which is
    the id a gold vote just showed. :func:`votes.voting.recording.record_votes` numbers site votes with this
    instead, so no two answers ever show the same id. Call it inside the write transaction.
    """
    return int(conn.execute(_LAST_SHOWN_ID).scalar_one() or 0) + 1


def reserve_vote_id(conn: Connection) -> int:
    """An id from the votes' own ids, for a gold or repeat vote's answer to show: the ids an annotator
    sees go up with the site's votes whatever the battle. On PostgreSQL one value of the vote table's
    sequence (no vote ever gets it); on SQLite :func:`next_free_vote_id`."""
    dialect = dialect_of(conn)
    if dialect.has_sequences:
        return dialect.next_in_sequence(conn, "vote", "id")
    return next_free_vote_id(conn)


# Built once, as the live votes' statements are (building one per vote costs more than running it).
_INSERT_BATTLE = insert(battle_t).returning(battle_t.c.id)
_INSERT_APART = {t.name: insert(t) for t in (goldvote_t, repeatvote_t)}


def _write(conn: Connection, table: Table, battle: dict[str, Any], row: dict[str, Any]) -> tuple[int, int]:
    """Insert the battle and its vote with the vote id the answer shows: (battle id, shown id)."""
    shown_id = reserve_vote_id(conn)
    battle_id = int(conn.execute(_INSERT_BATTLE, battle).scalar_one())
    conn.execute(_INSERT_APART[table.name], {**row, "battle_id": battle_id, "shown_vote_id": shown_id})
    return battle_id, shown_id


def record_apart_votes(
    session: Session,
    requests: Sequence[VoteRequest],
    *,
    shown: Callable[[VoteRequest], dict[str, float]],
    names: dict[int, str],
    look_up: bool = True,
) -> list[VoteResult | VoteError]:
    """Write each gold or repeat vote with its battle row; the caller commits.

    :func:`votes.voting.recording.record_votes` has locked the named models' live rows and read the flags as
    for any vote; ``shown`` gives the rating change the vote shows, ``names`` the models' names.

    With ``look_up`` each vote is looked up first and written in a savepoint: a retry (same token and
    winner, or same idempotency key) is answered with the first result; the same token with another
    winner is refused, and so is a second vote of one annotator on one gold or a second repeat of one
    vote. Without it (the optimistic path of :func:`votes.voting.recording.record_votes`, as for live votes) a
    retry collides on a unique key and the ``IntegrityError`` goes to the caller, who starts over with
    ``look_up``. A repeat whose token names a vote that is not the annotator's own battle with the sides
    swapped is refused (:func:`votes.voting.repeat_votes.repeat_vote_row`).
    """
    results: list[VoteResult | VoteError] = []
    for request in requests:
        b = request.battle
        if b.counted:
            raise ValueError("a counted vote was handed to the writer of votes kept apart")
        kind = _GOLD if b.gold is not None else _REPEAT
        shown_names = (names[b.model_a_id], names[b.model_b_id])
        if look_up:
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
            **request.recorded(voted_at),
            "live_elo": shown(request),
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
        if not look_up:
            battle_id, vote_id = _write(session.connection(), kind.table, battle, row)
        else:
            try:
                with session.begin_nested():
                    battle_id, vote_id = _write(session.connection(), kind.table, battle, row)
            except IntegrityError:
                session.expunge_all()
                previous = _previous(session, request, shown_names, kind.table)
                results.append(previous or RepeatJudgementError())
                continue
        if kind.after is not None:
            kind.after(session, request)
        results.append(_result(row, vote_id=vote_id, battle_id=battle_id, names=shown_names, replayed=False))
    return results
