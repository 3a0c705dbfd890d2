"""How a batch of votes is written under its locks: one multi-row insert per table, or vote by vote.

:func:`votes.voting.recording.record_votes` takes the locks and reads the live ratings; the votes are then
written here, in order, each with the live rating step it makes (:func:`elo_step`). The batch path
(:func:`record_batch`) finds retries in one query and writes every new battle and vote in one
multi-row insert per table; the careful path (:func:`record_one_by_one`) writes each vote in a
savepoint of its own, so a unique-key race fails only that vote. Both write the same rows
(:func:`new_rows`) and answer a retry with the stored vote's result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from sqlalchemy import bindparam, insert, or_
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from leaderboard.online.elo import EloConfig, update_elo
from votes.dialects import dialect_of
from votes.models import Battle, Model, Vote, utcnow
from votes.tables import battle_t, vote_t
from votes.voting.apart_votes import next_free_vote_id
from votes.voting.battles import AlreadyVotedError, RepeatJudgementError, VoteError, VoteRequest, VoteResult
from votes.voting.live import LiveConfig
from votes.voting.live_book import LiveBook, RaterStep, rate_vote

__all__ = [
    "EloStep",
    "elo_step",
    "judgement_key",
    "known_votes",
    "new_rows",
    "record_batch",
    "record_one_by_one",
]


# Statements of the batch path, built once: building and hashing a statement per batch costs more Python
# time than SQLite takes to run it.
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
    if battle.token_id == request.battle.token_id and vote.winner != request.winner.label:
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
class EloStep:
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


def elo_step(
    request: VoteRequest,
    config: LiveConfig,
    ratings: dict[int, tuple[float, int]],
    flagged: set[int],
    book: LiveBook | None = None,
) -> EloStep:
    b = request.battle
    counted = b.annotator_id not in flagged  # a flagged annotator's votes are kept but do not count
    (ra, ga), (rb, gb) = ratings[b.model_a_id], ratings[b.model_b_id]
    if book is not None:
        r = rate_vote(request, book, counted=counted)
        return EloStep(b.model_a_id, b.model_b_id, ra, r.rating_a, ga, rb, r.rating_b, gb, counted, r)
    elo = cast(EloConfig, config)
    new_a, new_b = (
        update_elo(ra, rb, request.winner, config=elo, games_a=ga, games_b=gb) if counted else (ra, rb)
    )
    return EloStep(b.model_a_id, b.model_b_id, ra, new_a, ga, rb, new_b, gb, counted)


def new_rows(request: VoteRequest, step: EloStep) -> tuple[dict[str, Any], dict[str, Any]]:
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
    vote_id: int, battle_id: int, request: VoteRequest, step: EloStep, names: dict[int, str]
) -> VoteResult:
    return VoteResult.from_live_elo(
        step.live_elo(),
        vote_id=vote_id,
        battle_id=battle_id,
        winner=request.winner.label,
        model_a=names[request.battle.model_a_id],
        model_b=names[request.battle.model_b_id],
    )


def record_one_by_one(
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
        step = elo_step(request, config, ratings, flagged, book)
        battle_row, vote_row = new_rows(request, step)
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


def known_votes(
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


def record_batch(
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
    by_token, by_key = known_votes(session, requests, names) if look_up else ({}, {})
    decisions: list[_Known | tuple[_Known, str]] = []  # a vote to answer with, or (vote, "conflict")
    battle_rows: list[dict[str, Any]] = []
    vote_rows: list[dict[str, Any]] = []
    elo: list[EloStep] = []
    new_requests: list[VoteRequest] = []
    touched: set[int] = set()
    for request in requests:
        b = request.battle
        known = by_key.get(request.idempotency_key) if request.idempotency_key is not None else None
        known = known or by_token.get(b.token_id)
        if known is not None:
            same_token_other_winner = known.token_id == b.token_id and known.winner != request.winner.label
            decisions.append((known, "conflict") if same_token_other_winner else known)
            continue
        step = elo_step(request, config, ratings, flagged, book)
        step.apply(ratings, touched, book)
        battle_row, vote_row = new_rows(request, step)
        battle_rows.append(battle_row)
        vote_rows.append(vote_row)
        elo.append(step)
        new_requests.append(request)
        known = _Known(b.token_id, request.winner.label, index=len(vote_rows) - 1)
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
