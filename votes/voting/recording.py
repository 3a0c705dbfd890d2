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

Two paths write the same rows (built by :func:`_rows`): the batch path, one multi-row insert per table,
and the careful vote-by-vote path, each vote in a savepoint of its own.

The live rating is the plain Elo (the fast path) or any online rater, run by :mod:`votes.voting.live_book` on
the states of the locked rows. A rater with a clock (Glicko-2) locks the whole table, so that its clock,
the running maximum of the vote times, is the one the replay computes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from sqlalchemy import bindparam, insert, or_, update
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from leaderboard.data import parse_outcome
from leaderboard.online.elo import EloConfig, update_elo
from votes.dialects import dialect_of
from votes.models import Battle, LiveRating, Model, Vote, utcnow
from votes.tables import annotator_t, battle_t, liverating_t, model_t, vote_t
from votes.voting.apart_votes import next_free_vote_id, record_apart_votes
from votes.voting.battles import AlreadyVotedError, RepeatJudgementError, VoteError, VoteRequest, VoteResult
from votes.voting.live import LiveConfig, has_clock, rater_identity, shown
from votes.voting.live_book import LOCK_STATES, LiveBook, RaterStep, open_book, rate_vote, write_states

__all__ = ["apart_shown_step", "judgement_key", "record_vote", "record_votes"]


def _ensure_live_rows(session: Session, model_ids: Sequence[int], initial: dict[str, Any]) -> None:
    """Create missing LiveRating rows (in model-id order) so that every involved row can be locked."""
    rows = [{"model_id": m, **initial, "updated_at": utcnow()} for m in model_ids]
    if not rows:
        return
    session.execute(dialect_of(session).insert_or_skip(LiveRating, rows, unique=["model_id"]))


# Statements of the batch path, built once: building and hashing a statement per batch costs more Python
# time than SQLite takes to run it.
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
_KNOWN_COLUMNS = (
    battle_t.c.token_id,
    vote_t.c.idempotency_key,
    battle_t.c.id,
    vote_t.c.id,
    vote_t.c.winner,
    battle_t.c.model_a_id,
    battle_t.c.model_b_id,
    vote_t.c.live_elo,
)
_KNOWN_BY_TOKEN = (
    sa_select(*_KNOWN_COLUMNS)
    .select_from(battle_t.join(vote_t, vote_t.c.battle_id == battle_t.c.id))
    .where(battle_t.c.token_id.in_(bindparam("tokens", expanding=True)))
)
_KNOWN_BY_TOKEN_OR_KEY = (
    sa_select(*_KNOWN_COLUMNS)
    .select_from(battle_t.join(vote_t, vote_t.c.battle_id == battle_t.c.id))
    .where(
        or_(
            battle_t.c.token_id.in_(bindparam("tokens", expanding=True)),
            vote_t.c.idempotency_key.in_(bindparam("keys", expanding=True)),
        )
    )
)
_INSERT_BATTLES = insert(battle_t).returning(battle_t.c.token_id, battle_t.c.id)
_INSERT_VOTES = insert(vote_t).returning(vote_t.c.battle_id, vote_t.c.id)
_UPDATE_RATINGS = (
    update(liverating_t)
    .where(liverating_t.c.model_id == bindparam("m"))
    .values(rating=bindparam("r"), games=bindparam("g"), updated_at=bindparam("t"))
)


def _replayed_result(
    session: Session,
    names: dict[int, str],
    *,
    battle_id: int,
    vote_id: int,
    winner: str,
    model_a_id: int,
    model_b_id: int,
    live_elo: dict[str, float] | None,
) -> VoteResult:
    """The answer to a retry: the stored vote's result, marked as replayed."""
    return VoteResult.from_live_elo(
        live_elo,
        vote_id=vote_id,
        battle_id=battle_id,
        winner=winner,
        model_a=names.get(model_a_id) or _model_name(session, model_a_id),
        model_b=names.get(model_b_id) or _model_name(session, model_b_id),
        replayed=True,
    )


def _model_name(session: Session, model_id: int) -> str:
    model = session.get(Model, model_id)
    return model.name if model else f"model #{model_id}"


def judgement_key(annotator_id: int | None, prompt_id: int | None, model_a: int, model_b: int) -> str | None:
    """The battle's one-judgement key, or None when it has no annotator or prompt (nothing to enforce)."""
    if annotator_id is None or prompt_id is None:
        return None
    return f"{annotator_id}:{prompt_id}:{min(model_a, model_b)}:{max(model_a, model_b)}"


def _already_judged(session: Session, request: VoteRequest) -> bool:
    b = request.battle
    key = judgement_key(b.annotator_id, b.prompt_id, b.model_a_id, b.model_b_id)
    if key is None:
        return False
    return session.exec(select(Battle.id).where(Battle.judgement_key == key)).first() is not None


def _find_previous(
    session: Session, request: VoteRequest, names: dict[int, str]
) -> VoteResult | VoteError | None:
    """An earlier vote for this token or idempotency key: its result, or a refusal if it disagrees."""
    stmt = select(Battle, Vote).join(Vote, col(Vote.battle_id) == col(Battle.id))
    row = None
    if request.idempotency_key is not None:
        row = session.exec(stmt.where(Vote.idempotency_key == request.idempotency_key)).first()
    if row is None:
        row = session.exec(stmt.where(Battle.token_id == request.battle.token_id)).first()
    if row is None:
        return None
    battle, vote = row
    assert battle.id is not None and vote.id is not None  # nosec B101 # type narrowing
    if battle.token_id == request.battle.token_id and vote.winner != request.winner:
        return AlreadyVotedError(battle.id)
    return _replayed_result(
        session,
        names,
        battle_id=battle.id,
        vote_id=vote.id,
        winner=vote.winner,
        model_a_id=battle.model_a_id,
        model_b_id=battle.model_b_id,
        live_elo=vote.live_elo,
    )


@dataclass(frozen=True)
class _EloStep:
    """One vote's live Elo update: computed from the ratings so far, applied once the vote is written."""

    model_a: int
    model_b: int
    a_before: float
    a_after: float
    games_a: int
    b_before: float
    b_after: float
    games_b: int
    counted: bool
    rated: RaterStep | None = None

    def live_elo(self) -> dict[str, float]:
        shown = {
            "a_before": self.a_before,
            "a_after": self.a_after,
            "b_before": self.b_before,
            "b_after": self.b_after,
        }
        if self.rated is not None:
            if self.rated.deviation_a is not None:
                shown["a_deviation"] = self.rated.deviation_a
            if self.rated.deviation_b is not None:
                shown["b_deviation"] = self.rated.deviation_b
        return shown

    def apply(
        self, ratings: dict[int, tuple[float, int]], touched: set[int], book: LiveBook | None = None
    ) -> None:
        if self.counted:
            ratings[self.model_a] = (self.a_after, self.games_a + 1)
            ratings[self.model_b] = (self.b_after, self.games_b + 1)
            touched.update((self.model_a, self.model_b))
            if book is not None and self.rated is not None:
                book.apply(self.model_a, self.model_b, self.rated)


def _elo_step(
    request: VoteRequest,
    config: LiveConfig,
    ratings: dict[int, tuple[float, int]],
    flagged: set[int],
    book: LiveBook | None = None,
) -> _EloStep:
    b = request.battle
    counted = b.annotator_id not in flagged  # a flagged annotator's votes are kept but do not count
    (ra, ga), (rb, gb) = ratings[b.model_a_id], ratings[b.model_b_id]
    if book is not None:
        r = rate_vote(request, book, counted=counted)
        return _EloStep(b.model_a_id, b.model_b_id, ra, r.rating_a, ga, rb, r.rating_b, gb, counted, r)
    elo = cast(EloConfig, config)
    new_a, new_b = (
        update_elo(ra, rb, parse_outcome(request.winner), config=elo, games_a=ga, games_b=gb)
        if counted
        else (ra, rb)
    )
    return _EloStep(b.model_a_id, b.model_b_id, ra, new_a, ga, rb, new_b, gb, counted)


def _rows(request: VoteRequest, step: _EloStep) -> tuple[dict[str, Any], dict[str, Any]]:
    """The battle row and the vote row (without its ``battle_id``) that record one new vote."""
    b = request.battle
    voted_at = request.voted_at or utcnow()
    battle = {
        "prompt_id": b.prompt_id,
        "output_a_id": b.output_a_id,
        "output_b_id": b.output_b_id,
        "model_a_id": b.model_a_id,
        "model_b_id": b.model_b_id,
        "annotator_id": b.annotator_id,
        "issued_at": b.issued_at,
        "pair_probability": b.pair_probability,
        "source": b.source,
        "token_id": b.token_id,
        "judgement_key": judgement_key(b.annotator_id, b.prompt_id, b.model_a_id, b.model_b_id),
    }
    vote = {
        "model_a_id": b.model_a_id,  # the battle's facts, copied for the fit's covering index
        "model_b_id": b.model_b_id,
        **request.recorded(voted_at),
        "live_elo": step.live_elo(),
    }
    return battle, vote


def _new_result(
    vote_id: int, battle_id: int, request: VoteRequest, step: _EloStep, names: dict[int, str]
) -> VoteResult:
    return VoteResult.from_live_elo(
        step.live_elo(),
        vote_id=vote_id,
        battle_id=battle_id,
        winner=request.winner,
        model_a=names[request.battle.model_a_id],
        model_b=names[request.battle.model_b_id],
    )


def _record_one_by_one(
    session: Session,
    requests: Sequence[VoteRequest],
    config: LiveConfig,
    ratings: dict[int, tuple[float, int]],
    names: dict[int, str],
    flagged: set[int],
    book: LiveBook | None = None,
) -> tuple[list[VoteResult | VoteError], set[int]]:
    """The careful path: each vote in its own savepoint, so a unique-key race fails only that vote."""
    results: list[VoteResult | VoteError] = []
    touched: set[int] = set()
    for request in requests:
        previous = _find_previous(session, request, names)
        if previous is not None:
            results.append(previous)
            continue
        if _already_judged(session, request):
            results.append(RepeatJudgementError())
            continue
        step = _elo_step(request, config, ratings, flagged, book)
        battle_row, vote_row = _rows(request, step)
        battle = Battle(**battle_row)
        try:
            with session.begin_nested():
                session.add(battle)
                session.flush()
                assert battle.id is not None  # nosec B101 # type narrowing
                if not dialect_of(session).has_sequences:  # past the ids gold votes showed
                    vote_row["id"] = next_free_vote_id(session.connection())
                vote = Vote(battle_id=battle.id, **vote_row)
                session.add(vote)
                session.flush()
        except IntegrityError:
            # Another worker wrote this token, key or judgement first (PostgreSQL waited for its commit).
            session.expunge_all()
            previous = _find_previous(session, request, names)
            if previous is None and _already_judged(session, request):
                previous = RepeatJudgementError()
            results.append(previous or VoteError("The vote could not be recorded; please try again."))
            continue
        assert vote.id is not None  # nosec B101 # type narrowing
        step.apply(ratings, touched, book)
        results.append(_new_result(vote.id, battle.id, request, step, names))
    return results, touched


@dataclass
class _Known:
    """A vote already in the store or earlier in the batch, by token and idempotency key."""

    token_id: str | None
    winner: str
    result: VoteResult | None = None  # None while a new vote of this batch awaits its ids
    index: int = -1  # position of that new vote in the batch


def _known_votes(
    session: Session, requests: Sequence[VoteRequest], names: dict[int, str]
) -> tuple[dict[str, _Known], dict[str, _Known]]:
    """Earlier votes for the batch's tokens or idempotency keys, in one query."""
    tokens = [r.battle.token_id for r in requests]
    keys = [r.idempotency_key for r in requests if r.idempotency_key is not None]
    conn = session.connection()
    if keys:
        rows = conn.execute(_KNOWN_BY_TOKEN_OR_KEY, {"tokens": tokens, "keys": keys}).all()
    else:
        rows = conn.execute(_KNOWN_BY_TOKEN, {"tokens": tokens}).all()
    by_token: dict[str, _Known] = {}
    by_key: dict[str, _Known] = {}
    for token_id, key, battle_id, vote_id, winner, model_a_id, model_b_id, live_elo in rows:
        result = _replayed_result(
            session,
            names,
            battle_id=battle_id,
            vote_id=vote_id,
            winner=winner,
            model_a_id=model_a_id,
            model_b_id=model_b_id,
            live_elo=live_elo,
        )
        known = _Known(token_id, winner, result)
        if token_id is not None:
            by_token[token_id] = known
        if key is not None:
            by_key[key] = known
    return by_token, by_key


def _record_batch(
    session: Session,
    requests: Sequence[VoteRequest],
    config: LiveConfig,
    ratings: dict[int, tuple[float, int]],
    names: dict[int, str],
    flagged: set[int],
    book: LiveBook | None = None,
    *,
    look_up: bool = True,
) -> tuple[list[VoteResult | VoteError], set[int]]:
    """The fast path: retries found in one query, then one multi-row insert of battles and one of votes.

    Without ``look_up`` the query is skipped: a retry of a vote already stored then collides on a unique
    key, and the caller starts over on the careful path.
    """
    by_token, by_key = _known_votes(session, requests, names) if look_up else ({}, {})
    decisions: list[_Known | tuple[_Known, str]] = []  # a vote to answer with, or (vote, "conflict")
    battle_rows: list[dict[str, Any]] = []
    vote_rows: list[dict[str, Any]] = []
    elo: list[_EloStep] = []
    new_requests: list[VoteRequest] = []
    touched: set[int] = set()
    for request in requests:
        b = request.battle
        known = by_key.get(request.idempotency_key) if request.idempotency_key is not None else None
        known = known or by_token.get(b.token_id)
        if known is not None:
            same_token_other_winner = known.token_id == b.token_id and known.winner != request.winner
            decisions.append((known, "conflict") if same_token_other_winner else known)
            continue
        step = _elo_step(request, config, ratings, flagged, book)
        step.apply(ratings, touched, book)
        battle_row, vote_row = _rows(request, step)
        battle_rows.append(battle_row)
        vote_rows.append(vote_row)
        elo.append(step)
        new_requests.append(request)
        known = _Known(b.token_id, request.winner, index=len(vote_rows) - 1)
        by_token[b.token_id] = known
        if request.idempotency_key is not None:
            by_key[request.idempotency_key] = known
        decisions.append(known)
    new_results: list[VoteResult] = []
    if battle_rows:
        # RETURNING rows come back in no promised order (and asking SQLAlchemy for parameter order makes
        # it insert row by row on SQLite), so each id is matched by the row's own unique key.
        conn = session.connection()
        battle_id_of: dict[str, int] = dict(conn.execute(_INSERT_BATTLES, battle_rows).all())
        battle_ids = [battle_id_of[row["token_id"]] for row in battle_rows]
        first_id = None if dialect_of(conn).has_sequences else next_free_vote_id(conn)
        for i, (row, battle_id) in enumerate(zip(vote_rows, battle_ids, strict=True)):
            row["battle_id"] = battle_id
            if first_id is not None:  # past the ids gold votes showed (PostgreSQL: the sequence is)
                row["id"] = first_id + i
        vote_id_of: dict[int, int] = dict(conn.execute(_INSERT_VOTES, vote_rows).all())
        vote_ids = [vote_id_of[battle_id] for battle_id in battle_ids]
        new_results = [
            _new_result(vote_id, battle_id, request, step, names)
            for vote_id, battle_id, request, step in zip(vote_ids, battle_ids, new_requests, elo, strict=True)
        ]
    results: list[VoteResult | VoteError] = []
    answered: set[int] = set()  # new votes already answered once; a later equal request is a retry
    for decision in decisions:
        known, conflict = (decision[0], True) if isinstance(decision, tuple) else (decision, False)
        if known.result is not None:
            first = known.result
        else:
            first = new_results[known.index]
            if not conflict and known.index not in answered:
                answered.add(known.index)
                results.append(first)
                continue
            first = replace(first, replayed=True)
        results.append(AlreadyVotedError(first.battle_id) if conflict else first)
    return results, touched


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
    for r in requests:
        parse_outcome(r.winner)  # refuse unknown outcomes before taking any lock
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
        rating, deviation = shown(config, config.initial())
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
    would make now (:func:`_elo_step`, the same rater and the same flags: a flagged annotator sees no
    change, as on their live votes), never applied. A model without a live row shows the rater's initial
    rating."""
    b = request.battle
    book = locked.book
    if book is not None and not {b.model_a_id, b.model_b_id} <= book.states.keys():
        rating = shown(book.rater, book.rater.initial())[0]
        return {"a_before": rating, "a_after": rating, "b_before": rating, "b_after": rating}
    ratings = locked.ratings
    if book is None and not {b.model_a_id, b.model_b_id} <= ratings.keys():
        initial = (float(cast(EloConfig, config).initial), 0)
        ratings = {b.model_a_id: initial, b.model_b_id: initial, **ratings}
    return _elo_step(request, config, ratings, locked.flagged, book).live_elo()


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
        results, touched = _record_one_by_one(session, requests, config, ratings, names, flagged, work)
    elif conflicts == "raise":  # optimistic: a retry of a stored vote collides, and the caller starts over
        results, touched = _record_batch(
            session, requests, config, ratings, names, flagged, work, look_up=False
        )
    else:
        try:
            with session.begin_nested():
                results, touched = _record_batch(session, requests, config, ratings, names, flagged, work)
        except IntegrityError:
            session.expunge_all()
            ratings = dict(locked)
            work = book.copy() if book is not None else None
            results, touched = _record_one_by_one(session, requests, config, ratings, names, flagged, work)
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
