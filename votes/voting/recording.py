"""The vote transaction: votes written with their battles and their live Elo updates, in order.

Live ratings equal a replay of all votes in vote-id order because every transaction that inserts votes
first locks the ``LiveRating`` rows of the models involved, in model-id order (``SELECT ... FOR UPDATE``
on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` takes the whole-database write lock). Votes are inserted after
the locks are held, so two transactions that touch a common model are ordered the same way by their vote
ids and by their Elo updates, and votes on disjoint models commute.

An annotator judges a prompt for an unordered pair of models once: the battle row carries a unique
``judgement_key`` (annotator, prompt, lower and higher model id), so a second vote through another token
collides in the store, on every path and across workers, and is refused with
:class:`~votes.voting.battles.RepeatJudgementError`; nothing of it reaches the live ratings.

Under the locks the votes are written by :mod:`votes.voting.vote_writes`: the batch path, one multi-row
insert per table, or the careful vote-by-vote path, each vote in a savepoint of its own.

The live rating is the plain Elo (the fast path) or any online rater, run by :mod:`votes.voting.live_book` on
the states of the locked rows. A rater with a clock (Glicko-2) locks the whole table, so that its clock,
the running maximum of the vote times, is the one the replay computes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from sqlalchemy import bindparam, update
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from leaderboard.online.elo import EloConfig
from votes.dialects import dialect_of
from votes.models import LiveRating, utcnow
from votes.tables import annotator_t, liverating_t, model_t
from votes.voting.apart_votes import record_apart_votes
from votes.voting.battles import VoteError, VoteRequest, VoteResult
from votes.voting.live import LiveConfig, has_clock, rater_identity
from votes.voting.live_book import LOCK_STATES, LiveBook, open_book, write_states
from votes.voting.vote_writes import elo_step, record_batch, record_one_by_one

__all__ = ["apart_shown_step", "record_vote", "record_votes"]


def _ensure_live_rows(session: Session, model_ids: Sequence[int], initial: dict[str, Any]) -> None:
    """Create missing LiveRating rows (in model-id order) so that every involved row can be locked."""
    rows = [{"model_id": m, **initial, "updated_at": utcnow()} for m in model_ids]
    if not rows:
        return
    session.execute(dialect_of(session).insert_or_skip(LiveRating, rows, unique=["model_id"]))


# Statements of the vote transaction, built once: building and hashing a statement per batch costs more
# Python time than SQLite takes to run it.
_LOCK_RATINGS = (
    sa_select(liverating_t.c.model_id, liverating_t.c.rating, liverating_t.c.games, model_t.c.name)
    .join(model_t, model_t.c.id == liverating_t.c.model_id)
    .where(liverating_t.c.model_id.in_(bindparam("ids", expanding=True)))
    .order_by(liverating_t.c.model_id)
    .with_for_update(of=liverating_t)
)


_FLAGGED = sa_select(annotator_t.c.id).where(
    annotator_t.c.id.in_(bindparam("ids", expanding=True)), annotator_t.c.flagged.is_(True)
)


_UPDATE_RATINGS = (
    update(liverating_t)
    .where(liverating_t.c.model_id == bindparam("m"))
    .values(rating=bindparam("r"), games=bindparam("g"), updated_at=bindparam("t"))
)


def record_votes(
    *,
    session: Session,
    requests: Sequence[VoteRequest],
    config: LiveConfig,
    live_rows: set[int] | None = None,
    conflicts: Literal["savepoint", "raise", "one-by-one"] = "savepoint",
) -> list[VoteResult | VoteError]:
    """Write votes (and their battles) with their live rating updates, in order, in the session's transaction.

    Votes on gold and repeat battles are handed to :func:`votes.voting.apart_votes.record_apart_votes` (stored
    apart, no rating moves) after the same locks and reads as any vote, with the rating change a live vote
    would show (:func:`apart_shown_step`): such a vote takes the same path, time and answer as a live one.

    ``config`` is the plain Elo's or another online rater (:data:`votes.voting.live.LiveConfig`).

    The caller commits. A retry (same token and winner, or same idempotency key) is answered with the
    first vote's result and writes nothing; the same token with another winner is refused.
    The batch is written with one multi-row insert per table. If a unique key collides anyway (another
    worker wrote the same token or key meanwhile), what happens depends on ``conflicts``: ``"savepoint"``
    rolls the batch back to a savepoint taken before it and writes it again vote by vote, each in a
    savepoint of its own. ``"raise"`` is optimistic: no savepoint, and no query for earlier votes of the
    batch's tokens and keys (three round trips fewer per batch); a retry of a stored vote then collides on
    a unique key and the ``IntegrityError`` goes to the caller, who owns the transaction: it rolls back
    and calls again with ``"one-by-one"``, which looks each vote up and writes it in a savepoint.
    ``live_rows``, when given, remembers the models whose ``LiveRating`` row is known to exist (a writer
    keeps it across batches), which saves an insert per batch.
    """
    if not isinstance(config, EloConfig):  # an online rater: the vote times are its clock
        now = utcnow()
        requests = [r if r.voted_at is not None else replace(r, voted_at=now) for r in requests]
    apart = [i for i, r in enumerate(requests) if not r.battle.counted]
    rest = [r for r in requests if r.battle.counted]
    locked = _lock(session, requests, rest, config, live_rows)
    if not apart:
        return _record_counted(session, requests, config, conflicts, locked)
    apart_results = record_apart_votes(
        session,
        [requests[i] for i in apart],
        shown=lambda request: apart_shown_step(request, config, locked),
        names=locked.names,
        look_up=conflicts != "raise",
    )
    counted = _record_counted(session, rest, config, conflicts, locked) if rest else []
    session.expunge_all()
    by_index: dict[int, VoteResult | VoteError] = dict(zip(apart, apart_results, strict=True))
    others = iter(counted)
    return [by_index[i] if i in by_index else next(others) for i in range(len(requests))]


@dataclass(frozen=True)
class _Locked:
    """What a vote transaction read under its locks: each model's (rating, games) and name, the online
    rater's states (None for the plain Elo) and the batch's flagged annotators."""

    ratings: dict[int, tuple[float, int]]
    names: dict[int, str]
    book: LiveBook | None
    flagged: set[int]


def _lock(
    session: Session,
    requests: Sequence[VoteRequest],
    counted: Sequence[VoteRequest],
    config: LiveConfig,
    live_rows: set[int] | None,
) -> _Locked:
    """Lock the live rows of every model of the batch in model-id order and read the flags.

    Rows are created for the models of ``counted`` (the votes that move ratings) only: a gold naming a
    model without a live row shows the rater's initial rating, and adds no row to the live board.
    """
    model_ids = sorted({m for r in requests for m in (r.battle.model_a_id, r.battle.model_b_id)})
    counted_ids = sorted({m for r in counted for m in (r.battle.model_a_id, r.battle.model_b_id)})
    conn = session.connection()
    if isinstance(config, EloConfig):
        initial: dict[str, Any] = {"rating": config.initial, "games": 0}
        lock = _LOCK_RATINGS
    else:
        if has_clock(config):
            dialect_of(conn).lock_tables(conn, ("liverating",), "SHARE ROW EXCLUSIVE")
        rating, deviation = config.shown(config.initial())
        initial = {"rating": rating, "games": 0, "deviation": deviation, "rater": rater_identity(config)}
        lock = LOCK_STATES
    if counted_ids and (live_rows is None or not live_rows.issuperset(counted_ids)):
        _ensure_live_rows(session, counted_ids, initial)
    locked_rows = conn.execute(lock, {"ids": model_ids}).all()
    if len({int(r[0]) for r in locked_rows} & set(counted_ids)) < len(counted_ids):
        # a row was deleted since (a ratings rebuild): create it again
        _ensure_live_rows(session, counted_ids, initial)
        locked_rows = conn.execute(lock, {"ids": model_ids}).all()
    if live_rows is not None:
        live_rows.update(counted_ids)
    ratings = {int(row[0]): (float(row[1]), int(row[2])) for row in locked_rows}
    names = {int(row[0]): str(row[3]) for row in locked_rows}
    missing = [m for m in model_ids if m not in names]
    if missing:  # only a gold's model without a live row
        names.update(
            (int(m), str(n))
            for m, n in conn.execute(sa_select(model_t.c.id, model_t.c.name).where(model_t.c.id.in_(missing)))
        )
        names.update((m, f"model #{m}") for m in missing if m not in names)
    book = None if isinstance(config, EloConfig) else open_book(conn, config, locked_rows)
    annotator_ids = sorted({r.battle.annotator_id for r in requests})
    flagged = {int(a) for (a,) in conn.execute(_FLAGGED, {"ids": annotator_ids})}
    return _Locked(ratings, names, book, flagged)


def apart_shown_step(request: VoteRequest, config: LiveConfig, locked: _Locked) -> dict[str, float]:
    """The live rating change a gold or repeat vote shows: the step a live vote on the same two models
    would make now (:func:`~votes.voting.vote_writes.elo_step`, the same rater and the same flags: a
    flagged annotator sees no change, as on their live votes), never applied. A model without a live row
    shows the rater's initial rating."""
    b = request.battle
    book = locked.book
    if book is not None and not {b.model_a_id, b.model_b_id} <= book.states.keys():
        rating = book.rater.shown(book.rater.initial())[0]
        return {"a_before": rating, "a_after": rating, "b_before": rating, "b_after": rating}
    ratings = locked.ratings
    if book is None and not {b.model_a_id, b.model_b_id} <= ratings.keys():
        initial = (float(cast(EloConfig, config).initial), 0)
        ratings = {b.model_a_id: initial, b.model_b_id: initial, **ratings}
    return elo_step(request, config, ratings, locked.flagged, book).live_elo()


def _record_counted(
    session: Session,
    requests: Sequence[VoteRequest],
    config: LiveConfig,
    conflicts: Literal["savepoint", "raise", "one-by-one"],
    locked_state: _Locked,
) -> list[VoteResult | VoteError]:
    """:func:`record_votes` for votes that count (none on a gold), under the locks of :func:`_lock`."""
    locked, names, book, flagged = (
        locked_state.ratings,
        locked_state.names,
        locked_state.book,
        locked_state.flagged,
    )
    ratings = dict(locked)
    work = book.copy() if book is not None else None
    if conflicts == "one-by-one":
        results, touched = record_one_by_one(session, requests, config, ratings, names, flagged, work)
    elif conflicts == "raise":  # optimistic: a retry of a stored vote collides, and the caller starts over
        results, touched = record_batch(
            session, requests, config, ratings, names, flagged, work, look_up=False
        )
    else:
        try:
            with session.begin_nested():
                results, touched = record_batch(session, requests, config, ratings, names, flagged, work)
        except IntegrityError:
            session.expunge_all()
            ratings = dict(locked)
            work = book.copy() if book is not None else None
            results, touched = record_one_by_one(session, requests, config, ratings, names, flagged, work)
    if touched and work is not None:
        write_states(session.connection(), work, ratings, touched)
    elif touched:  # one executemany for all the batch's models
        now = utcnow()
        rows = [{"m": m, "r": ratings[m][0], "g": ratings[m][1], "t": now} for m in sorted(touched)]
        session.connection().execute(_UPDATE_RATINGS, rows)
    session.expunge_all()
    return results


def record_vote(*, session: Session, request: VoteRequest, config: LiveConfig) -> VoteResult:
    """One vote in the session's transaction (the caller commits); raises :class:`VoteError`."""
    (result,) = record_votes(session=session, requests=[request], config=config)
    if isinstance(result, VoteError):
        raise result
    return result
