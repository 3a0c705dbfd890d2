"""Writing votes with their live Elo update, and the queries the voting site needs.

A battle is issued without touching the database: everything about it travels in a signed battle token
(see ``arena.security``) and is written, together with its vote, in one transaction. The token's id is
unique on ``battle.token_id``, so a token buys exactly one vote.

Live ratings equal a replay of all votes in vote-id order because every transaction that inserts votes
first locks the ``LiveRating`` rows of the models involved, in model-id order (``SELECT ... FOR UPDATE``
on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` takes the whole-database write lock). Votes are inserted after
the locks are held, so two transactions that touch a common model are ordered the same way by their vote
ids and by their Elo updates, and votes on disjoint models commute.

``GroupCommitWriter`` is the durable fast path: one thread takes the votes that arrived together and
writes them (each with its Elo update, in order) in one transaction, one fsync; each caller is answered only
after that commit.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from sqlalchemy import bindparam, func, insert, or_, update
from sqlalchemy import select as sa_select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from leaderboard.data import parse_outcome
from leaderboard.elo import EloConfig, replay_elo, update_elo
from votes.metrics import (
    WRITER_BATCH_VOTES,
    WRITER_COMMIT_SECONDS,
    WRITER_VOTES_WRITTEN,
    WRITER_WRITE_SECONDS,
)
from votes.models import Annotator, Battle, LiveRating, Model, Output, Prompt, Vote, utcnow
from votes.ratings import counted_votes_condition
from votes.tables import annotator_t, battle_t, liverating_t, model_t, vote_t

__all__ = [
    "AlreadyVotedError",
    "BattleView",
    "CatalogRow",
    "GroupCommitWriter",
    "IssuedBattle",
    "Standing",
    "VoteError",
    "VoteRequest",
    "VoteResult",
    "VoteWriter",
    "annotator_battles_since",
    "annotator_seen_pairs",
    "count_annotator_votes",
    "create_annotator",
    "find_annotator_by_token_hash",
    "flag_annotator",
    "get_battle_view",
    "get_outputs",
    "issue_battle",
    "live_standings",
    "load_pairing_catalog",
    "pair_vote_counts",
    "record_vote",
    "record_votes",
    "replay_live_ratings",
]

log = logging.getLogger(__name__)


class VoteError(Exception):
    """A vote that cannot be recorded; the message is meant for the annotator."""


class AlreadyVotedError(VoteError):
    """The battle already has a (different) vote: a battle token buys exactly one vote."""

    def __init__(self, battle_id: int) -> None:
        super().__init__("This battle has already been voted on; a battle takes one vote only.")
        self.battle_id = battle_id


@dataclass(frozen=True)
class IssuedBattle:
    """Everything about an issued battle; it lives in the signed token until its vote writes it."""

    token_id: str
    annotator_id: int
    prompt_id: int
    output_a_id: int
    output_b_id: int
    model_a_id: int
    model_b_id: int
    issued_at: datetime
    pair_probability: float | None


@dataclass(frozen=True)
class VoteRequest:
    battle: IssuedBattle
    winner: str
    client_hash: str | None = None
    # Scoped to the annotator by the caller, so two annotators can never collide on a key.
    idempotency_key: str | None = None
    voted_at: datetime | None = None


@dataclass(frozen=True)
class VoteResult:
    """The answer to a vote: the names revealed and each side's live rating before and after."""

    vote_id: int
    battle_id: int
    winner: str
    model_a: str
    model_b: str
    rating_a_before: float
    rating_a_after: float
    rating_b_before: float
    rating_b_after: float
    # True when this answer repeats an earlier vote (a retry), which recorded nothing new.
    replayed: bool = False


@dataclass(frozen=True)
class Standing:
    model: str
    rating: float
    games: int
    updated_at: datetime | None


@dataclass(frozen=True)
class CatalogRow:
    prompt_id: int
    output_id: int
    model_id: int


@dataclass(frozen=True)
class BattleView:
    """A recorded battle as the reveal page shows it."""

    battle_id: int
    annotator_id: int | None
    prompt: Prompt
    output_a: Output | None
    output_b: Output | None
    model_a: str
    model_b: str
    result: VoteResult | None


def issue_battle(
    *,
    token_id: str,
    annotator_id: int,
    prompt_id: int,
    output_a: CatalogRow,
    output_b: CatalogRow,
    pair_probability: float | None,
    issued_at: datetime | None = None,
) -> IssuedBattle:
    """Describe a battle for a token; writes nothing (the vote writes the battle row)."""
    if output_a.model_id == output_b.model_id:
        raise ValueError("a battle needs two different models")
    if not (output_a.prompt_id == output_b.prompt_id == prompt_id):
        raise ValueError("both answers must belong to the battle's prompt")
    return IssuedBattle(
        token_id=token_id,
        annotator_id=annotator_id,
        prompt_id=prompt_id,
        output_a_id=output_a.output_id,
        output_b_id=output_b.output_id,
        model_a_id=output_a.model_id,
        model_b_id=output_b.model_id,
        issued_at=issued_at or utcnow(),
        pair_probability=pair_probability,
    )


# --------------------------------------------------------------------------------------------------
# Recording votes


def _ensure_live_rows(session: Session, model_ids: Sequence[int], initial: float) -> None:
    """Create missing LiveRating rows (in model-id order) so that every involved row can be locked."""
    rows = [{"model_id": m, "rating": initial, "games": 0, "updated_at": utcnow()} for m in model_ids]
    if not rows:
        return
    bind = session.get_bind()
    insert = pg_insert if bind.dialect.name == "postgresql" else sqlite_insert
    session.execute(insert(LiveRating).values(rows).on_conflict_do_nothing(index_elements=["model_id"]))


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
    elo = live_elo or {}
    return VoteResult(
        vote_id=vote_id,
        battle_id=battle_id,
        winner=winner,
        model_a=names.get(model_a_id) or _model_name(session, model_a_id),
        model_b=names.get(model_b_id) or _model_name(session, model_b_id),
        rating_a_before=float(elo.get("a_before", float("nan"))),
        rating_a_after=float(elo.get("a_after", float("nan"))),
        rating_b_before=float(elo.get("b_before", float("nan"))),
        rating_b_after=float(elo.get("b_after", float("nan"))),
        replayed=True,
    )


def _existing_result(session: Session, battle: Battle, vote: Vote, names: dict[int, str]) -> VoteResult:
    assert battle.id is not None and vote.id is not None  # nosec B101 # type narrowing
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


def _model_names(session: Session, model_ids: Sequence[int]) -> dict[int, str]:
    stmt = select(Model.id, Model.name).where(col(Model.id).in_(model_ids))
    return {int(m): n for m, n in session.exec(stmt).all() if m is not None}


def _model_name(session: Session, model_id: int) -> str:
    model = session.get(Model, model_id)
    return model.name if model else f"model #{model_id}"


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
    if battle.token_id == request.battle.token_id and vote.winner != request.winner:
        assert battle.id is not None  # nosec B101 # type narrowing
        return AlreadyVotedError(battle.id)
    return _existing_result(session, battle, vote, names)


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

    def live_elo(self) -> dict[str, float]:
        return {
            "a_before": self.a_before,
            "a_after": self.a_after,
            "b_before": self.b_before,
            "b_after": self.b_after,
        }

    def apply(self, ratings: dict[int, tuple[float, int]], touched: set[int]) -> None:
        if self.counted:
            ratings[self.model_a] = (self.a_after, self.games_a + 1)
            ratings[self.model_b] = (self.b_after, self.games_b + 1)
            touched.update((self.model_a, self.model_b))


def _elo_step(
    request: VoteRequest, config: EloConfig, ratings: dict[int, tuple[float, int]], flagged: set[int]
) -> _EloStep:
    b = request.battle
    (ra, ga), (rb, gb) = ratings[b.model_a_id], ratings[b.model_b_id]
    counted = b.annotator_id not in flagged  # a flagged annotator's votes are kept but do not count
    new_a, new_b = (
        update_elo(ra, rb, parse_outcome(request.winner), config=config, games_a=ga, games_b=gb)
        if counted
        else (ra, rb)
    )
    return _EloStep(b.model_a_id, b.model_b_id, ra, new_a, ga, rb, new_b, gb, counted)


def _record_one_by_one(
    session: Session,
    requests: Sequence[VoteRequest],
    config: EloConfig,
    ratings: dict[int, tuple[float, int]],
    names: dict[int, str],
    flagged: set[int],
) -> tuple[list[VoteResult | VoteError], set[int]]:
    """The careful path: each vote in its own savepoint, so a unique-key race fails only that vote."""
    results: list[VoteResult | VoteError] = []
    touched: set[int] = set()
    for request in requests:
        previous = _find_previous(session, request, names)
        if previous is not None:
            results.append(previous)
            continue
        b = request.battle
        step = _elo_step(request, config, ratings, flagged)
        voted_at = request.voted_at or utcnow()
        battle = Battle(
            prompt_id=b.prompt_id,
            output_a_id=b.output_a_id,
            output_b_id=b.output_b_id,
            model_a_id=b.model_a_id,
            model_b_id=b.model_b_id,
            annotator_id=b.annotator_id,
            issued_at=b.issued_at,
            pair_probability=b.pair_probability,
            source="site",
            token_id=b.token_id,
        )
        try:
            with session.begin_nested():
                session.add(battle)
                session.flush()
                assert battle.id is not None  # nosec B101 # type narrowing
                vote = Vote(
                    battle_id=battle.id,
                    model_a_id=b.model_a_id,
                    model_b_id=b.model_b_id,
                    annotator_id=b.annotator_id,
                    winner=request.winner,
                    created_at=voted_at,
                    seconds_to_vote=max(0.0, (voted_at - b.issued_at).total_seconds()),
                    client_hash=request.client_hash,
                    idempotency_key=request.idempotency_key,
                    live_elo=step.live_elo(),
                )
                session.add(vote)
                session.flush()
        except IntegrityError:
            # Another worker wrote this token or key first (PostgreSQL waited for its commit).
            session.expunge_all()
            previous = _find_previous(session, request, names)
            results.append(previous or VoteError("The vote could not be recorded; please try again."))
            continue
        assert vote.id is not None  # nosec B101 # type narrowing
        step.apply(ratings, touched)
        results.append(
            VoteResult(
                vote_id=vote.id,
                battle_id=battle.id,
                winner=request.winner,
                model_a=names[b.model_a_id],
                model_b=names[b.model_b_id],
                rating_a_before=step.a_before,
                rating_a_after=step.a_after,
                rating_b_before=step.b_before,
                rating_b_after=step.b_after,
            )
        )
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
    config: EloConfig,
    ratings: dict[int, tuple[float, int]],
    names: dict[int, str],
    flagged: set[int],
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
    touched: set[int] = set()
    for request in requests:
        b = request.battle
        known = by_key.get(request.idempotency_key) if request.idempotency_key is not None else None
        known = known or by_token.get(b.token_id)
        if known is not None:
            same_token_other_winner = known.token_id == b.token_id and known.winner != request.winner
            decisions.append((known, "conflict") if same_token_other_winner else known)
            continue
        step = _elo_step(request, config, ratings, flagged)
        step.apply(ratings, touched)
        voted_at = request.voted_at or utcnow()
        battle_rows.append(
            {
                "prompt_id": b.prompt_id,
                "output_a_id": b.output_a_id,
                "output_b_id": b.output_b_id,
                "model_a_id": b.model_a_id,
                "model_b_id": b.model_b_id,
                "annotator_id": b.annotator_id,
                "issued_at": b.issued_at,
                "pair_probability": b.pair_probability,
                "source": "site",
                "token_id": b.token_id,
            }
        )
        vote_rows.append(
            {
                "model_a_id": b.model_a_id,  # the battle's facts, copied for the fit's covering index
                "model_b_id": b.model_b_id,
                "annotator_id": b.annotator_id,
                "winner": request.winner,
                "created_at": voted_at,
                "seconds_to_vote": max(0.0, (voted_at - b.issued_at).total_seconds()),
                "client_hash": request.client_hash,
                "idempotency_key": request.idempotency_key,
                "live_elo": step.live_elo(),
            }
        )
        elo.append(step)
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
        for row, battle_id in zip(vote_rows, battle_ids, strict=True):
            row["battle_id"] = battle_id
        vote_id_of: dict[int, int] = dict(conn.execute(_INSERT_VOTES, vote_rows).all())
        vote_ids = [vote_id_of[battle_id] for battle_id in battle_ids]
        for battle, vote, battle_id, vote_id, step in zip(
            battle_rows, vote_rows, battle_ids, vote_ids, elo, strict=True
        ):
            new_results.append(
                VoteResult(
                    vote_id=int(vote_id),
                    battle_id=int(battle_id),
                    winner=vote["winner"],
                    model_a=names[battle["model_a_id"]],
                    model_b=names[battle["model_b_id"]],
                    rating_a_before=step.a_before,
                    rating_a_after=step.a_after,
                    rating_b_before=step.b_before,
                    rating_b_after=step.b_after,
                )
            )
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
    config: EloConfig,
    live_rows: set[int] | None = None,
    conflicts: Literal["savepoint", "raise", "one-by-one"] = "savepoint",
) -> list[VoteResult | VoteError]:
    """Write votes (and their battles) with their live Elo updates, in order, in the session's transaction.

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
    model_ids = sorted({m for r in requests for m in (r.battle.model_a_id, r.battle.model_b_id)})
    conn = session.connection()
    if live_rows is None or not live_rows.issuperset(model_ids):
        _ensure_live_rows(session, model_ids, config.initial)
    locked_rows = conn.execute(_LOCK_RATINGS, {"ids": model_ids}).all()
    if len(locked_rows) < len(model_ids):  # a row was deleted since (a ratings rebuild): create it again
        _ensure_live_rows(session, model_ids, config.initial)
        locked_rows = conn.execute(_LOCK_RATINGS, {"ids": model_ids}).all()
    if live_rows is not None:
        live_rows.update(model_ids)
    locked = {m: (float(r), int(g)) for m, r, g, _name in locked_rows}
    names = {m: str(name) for m, _r, _g, name in locked_rows}
    annotator_ids = sorted({r.battle.annotator_id for r in requests})
    flagged = {int(a) for (a,) in conn.execute(_FLAGGED, {"ids": annotator_ids})}
    ratings = dict(locked)
    if conflicts == "one-by-one":
        results, touched = _record_one_by_one(session, requests, config, ratings, names, flagged)
    elif conflicts == "raise":  # optimistic: a retry of a stored vote collides, and the caller starts over
        results, touched = _record_batch(session, requests, config, ratings, names, flagged, look_up=False)
    else:
        try:
            with session.begin_nested():
                results, touched = _record_batch(session, requests, config, ratings, names, flagged)
        except IntegrityError:
            session.expunge_all()
            ratings = dict(locked)
            results, touched = _record_one_by_one(session, requests, config, ratings, names, flagged)
    if touched:  # one executemany for all the batch's models
        now = utcnow()
        rows = [{"m": m, "r": ratings[m][0], "g": ratings[m][1], "t": now} for m in sorted(touched)]
        session.connection().execute(_UPDATE_RATINGS, rows)
    session.expunge_all()
    return results


def record_vote(*, session: Session, request: VoteRequest, config: EloConfig) -> VoteResult:
    """One vote in the session's transaction (the caller commits); raises :class:`VoteError`."""
    (result,) = record_votes(session=session, requests=[request], config=config)
    if isinstance(result, VoteError):
        raise result
    return result


class VoteWriter(Protocol):
    """What the site needs of a vote writer: in this process (:class:`GroupCommitWriter`) or a process
    shared by several workers (:class:`votes.writer_service.RemoteVoteWriter`)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def submit(self, request: VoteRequest) -> Future[VoteResult]:
        """A future resolved only after the transaction holding the vote has committed."""
        ...


@dataclass
class _Pending:
    request: VoteRequest
    future: Future[VoteResult] = field(default_factory=Future)


class GroupCommitWriter:
    """One writer thread; votes that arrive together share one durable commit.

    ``submit`` returns a future resolved only after the transaction holding the vote has committed.
    The batch waits at most ``max_wait_ms`` for company after its first vote and holds at most
    ``max_batch`` votes. A failed batch is retried vote by vote, so one bad vote fails only itself.
    """

    def __init__(
        self, engine: Engine, *, config: EloConfig, max_wait_ms: float = 2.0, max_batch: int = 256
    ) -> None:
        self.engine = engine
        self.config = config
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_batch = max_batch
        self._queue: queue.Queue[_Pending | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._live_rows: set[int] = set()
        self._conn: Connection | None = None
        self.n_batches = 0
        self.n_votes = 0
        self.busy_s = 0.0  # wall time spent writing and committing batches

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="arena-vote-writer", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Finish the votes already queued, then stop the thread."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        self._drop_connection()

    @property
    def alive(self) -> bool:
        """Whether the writer thread runs (readiness probes ask)."""
        return self._thread is not None and self._thread.is_alive()

    def submit(self, request: VoteRequest) -> Future[VoteResult]:
        if self._thread is None:
            raise RuntimeError("the vote writer is not running")
        pending = _Pending(request)
        self._queue.put(pending)
        return pending.future

    def _collect(self, first: _Pending) -> tuple[list[_Pending], bool]:
        batch = [first]
        deadline = time.monotonic() + self.max_wait_s
        while len(batch) < self.max_batch:
            try:
                timeout = deadline - time.monotonic()
                item = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                break
            batch, stopping = self._collect(first)
            try:
                self._write(batch)
            except Exception:  # noqa: BLE001 - retry one by one so a bad vote fails only itself
                log.exception("vote batch of %d failed; retrying one by one", len(batch))
                for pending in batch:
                    try:
                        self._write([pending])
                    except Exception as exc:  # noqa: BLE001 - handed to the waiting request
                        if not pending.future.done():
                            pending.future.set_exception(exc)

    def _connection(self) -> Connection:
        # One connection kept across batches: a pool checkout per batch costs a pre-ping round trip
        # (PostgreSQL) and Python time; a failed batch drops it, and the next checkout pings again.
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = self.engine.connect()
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _write(self, batch: list[_Pending]) -> None:
        started = time.perf_counter()
        requests = [p.request for p in batch]
        try:
            with Session(bind=self._connection(), expire_on_commit=False) as session:
                try:
                    # Optimistic: this transaction is ours, so a unique-key collision (a retry of a stored
                    # vote, or another worker writing the same token) rolls it all back, and the batch is
                    # written again vote by vote, each looked up first.
                    results = record_votes(
                        session=session,
                        requests=requests,
                        config=self.config,
                        live_rows=self._live_rows,
                        conflicts="raise",
                    )
                except IntegrityError:
                    session.rollback()
                    results = record_votes(
                        session=session, requests=requests, config=self.config, conflicts="one-by-one"
                    )
                written = time.perf_counter()
                session.commit()
        except Exception:
            self._drop_connection()
            raise
        committed = time.perf_counter()
        WRITER_WRITE_SECONDS.observe(written - started)
        WRITER_COMMIT_SECONDS.observe(committed - written)
        WRITER_BATCH_VOTES.observe(len(batch))
        WRITER_VOTES_WRITTEN.inc(len(batch))
        self.busy_s += time.perf_counter() - started
        self.n_batches += 1
        self.n_votes += len(batch)
        for pending, result in zip(batch, results, strict=True):
            if isinstance(result, VoteError):
                pending.future.set_exception(result)
            else:
                pending.future.set_result(result)


# --------------------------------------------------------------------------------------------------
# Live standings and replay


def live_standings(*, session: Session) -> list[Standing]:
    """Online Elo of every active or rated model, best first; unrated models show the initial rating."""
    stmt = (
        select(Model.name, Model.active, LiveRating.rating, LiveRating.games)
        .add_columns(col(LiveRating.updated_at))
        .join(LiveRating, col(LiveRating.model_id) == col(Model.id), isouter=True)
        .order_by(col(Model.name))
    )
    rated: list[Standing] = []
    unrated: list[Standing] = []
    for name, active, rating, games, updated_at in session.execute(stmt).all():
        if rating is not None:
            rated.append(Standing(model=name, rating=float(rating), games=int(games), updated_at=updated_at))
        elif active:
            unrated.append(Standing(model=name, rating=float("nan"), games=0, updated_at=None))
    return sorted(rated, key=lambda s: (-s.rating, s.model)) + unrated


def _votes_in_commit_order(session: Session) -> tuple[list[str], list[str], list[str]]:
    a_model = Model.__table__.alias("ma")  # type: ignore[attr-defined]
    b_model = Model.__table__.alias("mb")  # type: ignore[attr-defined]
    stmt = (
        select(a_model.c.name, b_model.c.name, Vote.winner)
        .select_from(Vote)
        .join(Battle, col(Battle.id) == col(Vote.battle_id))
        .join(a_model, a_model.c.id == col(Battle.model_a_id))
        .join(b_model, b_model.c.id == col(Battle.model_b_id))
        .outerjoin(Annotator, col(Annotator.id) == col(Battle.annotator_id))
        .where(counted_votes_condition())
        .order_by(col(Vote.id))
    )
    rows = session.execute(stmt).all()
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def replay_live_ratings(*, session: Session, config: EloConfig) -> dict[str, tuple[float, int]]:
    """Replay the counted votes (annotator not flagged) in vote-id order: {model: (rating, games)}."""
    model_a, model_b, winner = _votes_in_commit_order(session)
    if not winner:
        return {}
    standings = replay_elo(model_a, model_b, [parse_outcome(w) for w in winner], config=config)
    return {m: (float(standings.rating[i]), int(standings.games[i])) for i, m in enumerate(standings.models)}


# --------------------------------------------------------------------------------------------------
# Pairing inputs, annotators, reveal


def load_pairing_catalog(*, session: Session) -> list[CatalogRow]:
    """Every (prompt, output, model) of an active model; the pairing policy picks from these."""
    stmt = (
        select(Output.prompt_id, Output.id, Output.model_id)
        .join(Model, col(Model.id) == col(Output.model_id))
        .where(col(Model.active))
        .order_by(col(Output.prompt_id), col(Output.model_id))
    )
    return [
        CatalogRow(prompt_id=p, output_id=o, model_id=m)
        for p, o, m in session.exec(stmt).all()
        if o is not None
    ]


def pair_vote_counts(*, session: Session) -> dict[tuple[int, int], int]:
    """Votes per unordered model pair (lower id first), aggregated in SQL."""
    stmt = (
        select(Battle.model_a_id, Battle.model_b_id, func.count(col(Vote.id)))
        .join(Vote, col(Vote.battle_id) == col(Battle.id))
        .group_by(col(Battle.model_a_id), col(Battle.model_b_id))
    )
    counts: dict[tuple[int, int], int] = {}
    for a, b, n in session.exec(stmt).all():
        key = (min(a, b), max(a, b))
        counts[key] = counts.get(key, 0) + int(n)
    return counts


def annotator_seen_pairs(*, session: Session, annotator_id: int) -> set[tuple[int, int, int]]:
    """(prompt, lower model id, higher model id) of every battle this annotator has voted on."""
    stmt = select(Battle.prompt_id, Battle.model_a_id, Battle.model_b_id).where(
        Battle.annotator_id == annotator_id
    )
    return {(p, min(a, b), max(a, b)) for p, a, b in session.exec(stmt).all() if p is not None}


def annotator_battles_since(
    *, session: Session, annotator_id: int, after_id: int = 0
) -> list[tuple[int, int, int, int, bool]]:
    """(battle id, prompt, model a, model b, has a vote) of this annotator's battles with id > ``after_id``.

    The incremental form of :func:`annotator_seen_pairs` and :func:`count_annotator_votes` together, so
    that a caller keeping an annotator's history in memory reads only what is new.
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


def get_battle_view(*, session: Session, battle_id: int) -> BattleView | None:
    battle = session.get(Battle, battle_id)
    if battle is None or battle.prompt_id is None:
        return None
    prompt = session.get(Prompt, battle.prompt_id)
    if prompt is None:
        return None
    vote = session.exec(select(Vote).where(Vote.battle_id == battle_id)).first()
    names = _model_names(session, [battle.model_a_id, battle.model_b_id])
    result = None
    if vote is not None:
        result = _existing_result(session, battle, vote, names)
        result = VoteResult(**{**result.__dict__, "replayed": False})
    return BattleView(
        battle_id=battle_id,
        annotator_id=battle.annotator_id,
        prompt=prompt,
        output_a=session.get(Output, battle.output_a_id) if battle.output_a_id else None,
        output_b=session.get(Output, battle.output_b_id) if battle.output_b_id else None,
        model_a=names[battle.model_a_id],
        model_b=names[battle.model_b_id],
        result=result,
    )


def get_outputs(*, session: Session, ids: Iterable[int]) -> dict[int, Output]:
    return {o.id: o for o in session.exec(select(Output).where(col(Output.id).in_(list(ids)))).all() if o.id}


def to_utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; the store's convention is aware UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)
