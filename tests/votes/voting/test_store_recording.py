"""The group writer's batch: one multi-row insert per table, retries inside a batch, the careful fallback."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

import votes.voting.recording as recording
import votes.voting.vote_writes as vote_writes
import votes.voting.writer.group_commit as group_commit
from leaderboard.data import Outcome, parse_outcome
from leaderboard.online.elo import EloConfig
from votes.models import Battle, Vote
from votes.voting.annotators import create_annotator
from votes.voting.battles import AlreadyVotedError, VoteError, VoteRequest, VoteResult, issue_battle
from votes.voting.ratings import replay_live_ratings
from votes.voting.recording import record_votes
from votes.voting.views import live_standings, load_pairing_catalog

CONFIG = EloConfig(k=4.0)


def _requests(
    engine: Engine, tokens: list[str], winners: list[str], keys: list[str | None]
) -> list[VoteRequest]:
    with Session(engine) as s:
        catalog = load_pairing_catalog(session=s)
        annotator = create_annotator(session=s)
        s.commit()
        assert annotator.id is not None
        annotator_id = annotator.id
    by_prompt: dict[int, list[Any]] = {}
    for row in catalog:
        by_prompt.setdefault(row.prompt_id, []).append(row)
    prompts = sorted(by_prompt)
    out = []
    for i, (token, winner, key) in enumerate(zip(tokens, winners, keys, strict=True)):
        rows = by_prompt[prompts[i % len(prompts)]]
        a, b = rows[i % len(rows)], rows[(i + 1) % len(rows)]
        battle = issue_battle(
            token_id=token,
            annotator_id=annotator_id,
            prompt_id=a.prompt_id,
            output_a=a,
            output_b=b,
            pair_probability=0.5,
        )
        out.append(VoteRequest(battle=battle, winner=parse_outcome(winner), idempotency_key=key))
    return out


def _write(engine: Engine, requests: list[VoteRequest]) -> list[VoteResult | VoteError]:
    with Session(engine) as s:
        results = record_votes(session=s, requests=requests, config=CONFIG)
        s.commit()
    return results


def _rows(engine: Engine) -> tuple[int, int]:
    with Session(engine) as s:
        n_votes = s.execute(select(func.count()).select_from(Vote)).scalar_one()
        n_battles = s.execute(select(func.count()).select_from(Battle)).scalar_one()
    return int(n_votes), int(n_battles)


def _assert_live_equals_replay(engine: Engine) -> None:
    with Session(engine) as s:
        live = {x.model: (round(x.rating, 9), x.games) for x in live_standings(session=s) if x.games}
        replay = {m: (round(r, 9), g) for m, (r, g) in replay_live_ratings(session=s, config=CONFIG).items()}
    assert live == replay


def test_batch_with_retries_inside_uses_the_fast_path(
    seeded: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def careful_path(*_args: Any) -> Any:
        raise AssertionError("a clean batch must not fall back to vote-by-vote writes")

    monkeypatch.setattr(recording, "record_one_by_one", careful_path)
    requests = _requests(
        seeded,
        tokens=["t1", "t2", "t1", "t1", "t3", "t4"],
        winners=["model_a", "tie", "model_a", "model_b", "model_b", "tie"],
        keys=[None, "k2", None, None, "k2", None],
    )
    results = _write(seeded, requests)
    first, second, retry, conflict, keyed_retry, fourth = results
    assert isinstance(first, VoteResult) and not first.replayed
    assert isinstance(second, VoteResult) and not second.replayed
    assert isinstance(retry, VoteResult) and retry.replayed and retry.vote_id == first.vote_id
    assert retry.rating_a_after == first.rating_a_after
    assert isinstance(conflict, AlreadyVotedError) and conflict.battle_id == first.battle_id
    assert isinstance(keyed_retry, VoteResult) and keyed_retry.replayed
    assert keyed_retry.vote_id == second.vote_id
    assert isinstance(fourth, VoteResult) and not fourth.replayed
    assert _rows(seeded) == (3, 3)
    _assert_live_equals_replay(seeded)


def test_unique_key_collision_falls_back_vote_by_vote(
    seeded: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker's commit of the same token is only seen by the insert: the batch is redone carefully."""
    first = _requests(seeded, tokens=["same"], winners=["model_a"], keys=[None])
    (original,) = _write(seeded, first)
    assert isinstance(original, VoteResult)
    # Hide the earlier vote from the batch's look-up, as a concurrent commit would be hidden.
    monkeypatch.setattr(vote_writes, "known_votes", lambda *_args: ({}, {}))
    again = [first[0], *_requests(seeded, tokens=["other"], winners=["tie"], keys=[None])]
    replayed, fresh = _write(seeded, again)
    assert isinstance(replayed, VoteResult) and replayed.replayed and replayed.vote_id == original.vote_id
    assert isinstance(fresh, VoteResult) and not fresh.replayed
    assert _rows(seeded) == (2, 2)
    _assert_live_equals_replay(seeded)


def test_group_writer_starts_over_carefully_when_its_optimistic_batch_collides(seeded: Engine) -> None:
    """The writer's batch does not look earlier votes up: a retry of a stored vote collides, the whole
    transaction is rolled back and written vote by vote; every answer is as if looked up, nothing twice."""
    stored = _requests(seeded, tokens=["s1", "s2"], winners=["model_a", "tie"], keys=[None, "ks"])
    first_s1, first_s2 = _write(seeded, stored)
    assert isinstance(first_s1, VoteResult) and isinstance(first_s2, VoteResult)
    fresh = _requests(seeded, tokens=["n1", "n2"], winners=["model_b", "tie (bothbad)"], keys=[None, None])
    batch = [
        fresh[0],
        stored[0],
        stored[1],
        VoteRequest(battle=stored[0].battle, winner=Outcome.MODEL_B),
        fresh[1],
    ]
    writer = group_commit.GroupCommitWriter(seeded, config=CONFIG, max_wait_ms=50.0)
    pending = [group_commit._Pending(r) for r in batch]
    writer._write(pending)  # one batch, as the writer thread would take them together
    outcomes = [p.future.exception() or p.future.result() for p in pending]
    new_1, retry_s1, retry_s2, conflict, new_2 = outcomes
    assert isinstance(new_1, VoteResult) and not new_1.replayed
    assert isinstance(retry_s1, VoteResult) and retry_s1.replayed and retry_s1.vote_id == first_s1.vote_id
    assert isinstance(retry_s2, VoteResult) and retry_s2.replayed and retry_s2.vote_id == first_s2.vote_id
    assert isinstance(conflict, AlreadyVotedError) and conflict.battle_id == first_s1.battle_id
    assert isinstance(new_2, VoteResult) and not new_2.replayed and new_2.vote_id > new_1.vote_id
    assert writer.n_batches == 1
    writer.stop()
    assert _rows(seeded) == (4, 4)
    _assert_live_equals_replay(seeded)


def test_group_writer_clean_batch_takes_no_look_up_and_no_savepoint(
    seeded: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def forbidden(*_args: Any) -> Any:
        raise AssertionError("a clean batch of new votes needs neither the look-up nor the careful path")

    monkeypatch.setattr(vote_writes, "known_votes", forbidden)
    monkeypatch.setattr(recording, "record_one_by_one", forbidden)
    requests = _requests(
        seeded, tokens=["c1", "c2", "c3"], winners=["model_a", "tie", "model_b"], keys=[None] * 3
    )
    writer = group_commit.GroupCommitWriter(seeded, config=CONFIG)
    pending = [group_commit._Pending(r) for r in requests]
    writer._write(pending)
    assert all(isinstance(p.future.result(), VoteResult) for p in pending)
    writer.stop()
    assert _rows(seeded) == (3, 3)
    _assert_live_equals_replay(seeded)
