"""Live standings with any online rater: the vote transaction's states equal the replay's, on each path."""

from __future__ import annotations

import random
import tempfile
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from leaderboard.data import parse_outcome
from leaderboard.online.elo import EloConfig
from leaderboard.online.glicko2 import Glicko2Rater
from leaderboard.online.raters import OnlineRater
from leaderboard.online.trueskill import TrueSkillRater
from tests.factories import WINNERS, battles_for, live_rows, seed_catalog
from votes.voting.annotators import create_annotator, flag_annotator
from votes.voting.battles import VoteRequest, VoteResult
from votes.voting.live import LiveConfig, decode_state, encode_state, rater_identity
from votes.voting.ratings import ensure_live_rater, rebuild_live_ratings, replay_live_rows
from votes.voting.recording import record_votes
from votes.voting.writer import GroupCommitWriter, RemoteVoteWriter, serve_vote_writer, writer_identity

# Periods of 90 s with votes 40 s apart: votes share periods, and some periods pass without a vote.
GLICKO = Glicko2Rater(period_length=90.0)
RATERS: dict[str, OnlineRater[Any]] = {
    "glicko2": GLICKO,
    "glicko2-ignore-ties": Glicko2Rater(period_length=90.0, ties="ignore"),
    "trueskill": TrueSkillRater(),
}
START = datetime(2026, 1, 1, tzinfo=UTC)
N_VOTES = 60


def _requests(engine: Engine, *, seed: int = 3) -> list[VoteRequest]:
    """Votes of two annotators (the second one flagged later) at times that go back now and then."""
    with Session(engine) as s:
        first = create_annotator(session=s)
        second = create_annotator(session=s)
        s.commit()
        assert first.id is not None and second.id is not None
        ids = (first.id, second.id)
    rng = random.Random(seed)
    out = []
    for i in range(N_VOTES):
        (battle,) = battles_for(engine, rng, ids[i % 3 == 0], 1)
        # Every seventh vote arrives stamped earlier than the one before it (a slower worker's clock).
        late = timedelta(seconds=-100 if i % 7 == 6 else 0)
        when = START + timedelta(seconds=40 * i) + late
        out.append(VoteRequest(battle=battle, winner=parse_outcome(rng.choice(WINNERS)), voted_at=when))
    return out


def _write(
    engine: Engine,
    requests: list[VoteRequest],
    config: LiveConfig,
    conflicts: Literal["savepoint", "one-by-one"] = "savepoint",
) -> list[VoteResult]:
    results: list[VoteResult] = []
    with Session(engine) as s:
        out = record_votes(session=s, requests=requests, config=config, conflicts=conflicts)
        s.commit()
    for r in out:
        assert isinstance(r, VoteResult)
        results.append(r)
    return results


@pytest.mark.parametrize("name", sorted(RATERS))
def test_batches_and_vote_by_vote_agree_and_equal_the_replay(
    fresh_engine: Callable[[], Engine], name: str
) -> None:
    rater = RATERS[name]
    batch, careful = fresh_engine(), fresh_engine()
    for engine in (batch, careful):
        seed_catalog(engine, n_prompts=10)
    requests = _requests(batch)
    _requests(careful)  # the same annotators in the second store
    # The batch path in batches of various sizes; the careful path one savepoint per vote.
    batch_results = []
    for lo, hi in ((0, 1), (1, 17), (17, 18), (18, 45), (45, N_VOTES)):
        batch_results += _write(batch, requests[lo:hi], rater)
    careful_results = _write(careful, requests, rater, conflicts="one-by-one")
    strip = [(r.rating_a_after, r.rating_b_after, r.deviation_a, r.deviation_b) for r in batch_results]
    assert strip == [
        (r.rating_a_after, r.rating_b_after, r.deviation_a, r.deviation_b) for r in careful_results
    ]
    assert all(r.deviation_a is not None and r.deviation_b is not None for r in batch_results)
    assert live_rows(batch) == live_rows(careful)
    with Session(batch) as s:
        assert live_rows(batch) == replay_live_rows(session=s, config=rater)
    assert {row["rater"] for row in live_rows(batch).values()} == {rater_identity(rater)}


@pytest.mark.parametrize("name", sorted(RATERS))
def test_flagging_and_rebuild_keep_live_equal_to_replay(store: Engine, name: str) -> None:
    rater = RATERS[name]
    seed_catalog(store, n_prompts=10)
    requests = _requests(store)
    _write(store, requests[:30], rater)
    flagged = requests[0].battle.annotator_id
    with Session(store) as s:  # the second annotator's votes stop counting; the rest goes on from there
        assert flag_annotator(session=s, annotator_id=flagged, reason="test")
        rebuild_live_ratings(s.connection(), config=rater)
        s.commit()
    _write(store, requests[30:], rater)
    with Session(store) as s:
        replayed = replay_live_rows(session=s, config=rater)
    assert live_rows(store) == replayed
    games = sum(int(row["games"]) for row in replayed.values())
    assert games == 2 * sum(1 for r in requests if r.battle.annotator_id != flagged)


def test_glicko_deviation_grows_while_idle_and_shrinks_with_votes(store: Engine) -> None:
    seed_catalog(store, n_prompts=10)
    requests = _requests(store)[:6]
    results = _write(store, requests, GLICKO)
    first = results[0]
    assert first.deviation_a is not None and first.deviation_a < GLICKO.initial_deviation
    state = decode_state(GLICKO, live_rows(store)[first.model_a]["state"])
    later = GLICKO.advance(state, (START + timedelta(days=30)).timestamp())
    assert GLICKO.settle(later).deviation > GLICKO.settle(state).deviation
    assert encode_state(decode_state(GLICKO, encode_state(state))) == encode_state(state)


def test_switching_the_rater_rebuilds_the_table_by_replay(store: Engine) -> None:
    seed_catalog(store, n_prompts=10)
    requests = _requests(store)
    elo = EloConfig(k=16.0)
    _write(store, requests, elo)
    elo_rows = live_rows(store, with_rater=False)
    assert not ensure_live_rater(store, elo)  # nothing to do: the rows are the Elo's
    assert ensure_live_rater(store, GLICKO)
    with Session(store) as s:
        assert live_rows(store) == replay_live_rows(session=s, config=GLICKO)
    assert not ensure_live_rater(store, GLICKO)
    assert ensure_live_rater(store, RATERS["trueskill"])
    assert {row["rater"] for row in live_rows(store).values()} == {rater_identity(RATERS["trueskill"])}
    assert ensure_live_rater(store, elo)  # back to Elo: rows without a rater, the Elo's ratings again
    assert live_rows(store, with_rater=False) == elo_rows
    assert {row["rater"] for row in live_rows(store).values()} == {None}


def test_votes_through_the_writer_process_with_glicko2(store: Engine) -> None:
    """A worker expecting Glicko-2 hands its votes to a Glicko-2 writer; one expecting Elo refuses it."""
    seed_catalog(store, n_prompts=10)
    requests = _requests(store)[:30]
    stop, ready = threading.Event(), threading.Event()
    with tempfile.TemporaryDirectory(prefix="arena-test-") as folder:
        path = Path(folder) / "votes.sock"
        thread = threading.Thread(
            target=serve_vote_writer,
            args=(store, path),
            kwargs={"config": GLICKO, "max_wait_ms": 1.0, "stop": stop, "on_ready": ready.set},
            daemon=True,
        )
        thread.start()
        assert ready.wait(30)
        try:
            elo_worker = RemoteVoteWriter(
                path,
                fallback=GroupCommitWriter(store, config=EloConfig()),
                expect=writer_identity(store, EloConfig()),
            )
            elo_worker.start()
            assert not elo_worker.connected
            elo_worker.stop()
            worker = RemoteVoteWriter(
                path,
                fallback=GroupCommitWriter(store, config=GLICKO),
                expect=writer_identity(store, GLICKO),
            )
            worker.start()
            assert worker.connected
            results = [worker.submit(r).result(timeout=60) for r in requests]
            worker.stop()
        finally:
            stop.set()
            thread.join(30)
    assert worker.n_remote == len(requests) and worker.n_local == 0
    assert all(r.deviation_a is not None for r in results)
    with Session(store) as s:
        assert live_rows(store) == replay_live_rows(session=s, config=GLICKO)


def test_writer_handshake_names_the_rater(store: Engine) -> None:
    names = {
        str(writer_identity(store, config))
        for config in (EloConfig(), GLICKO, Glicko2Rater(period_length=60.0), TrueSkillRater())
    }
    assert len(names) == 4
    assert writer_identity(store, GLICKO) == writer_identity(store, Glicko2Rater(period_length=90.0))
