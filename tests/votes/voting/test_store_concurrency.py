"""Concurrent voters through group-commit writers (two, as two app workers would run): no error, one vote
per battle, and live ratings equal to a replay of the votes in commit order. SQLite and PostgreSQL."""

from __future__ import annotations

import random
import threading

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from leaderboard.data import Outcome, parse_outcome
from leaderboard.online.elo import EloConfig
from leaderboard.online.glicko2 import Glicko2Rater
from leaderboard.online.trueskill import TrueSkillRater
from tests.factories import WINNERS, battles_for
from votes.db import make_engine
from votes.models import Battle, LiveRating, Model, Vote
from votes.voting.annotators import create_annotator
from votes.voting.battles import VoteRequest
from votes.voting.live import LiveConfig
from votes.voting.ratings import replay_live_ratings
from votes.voting.writer import GroupCommitWriter

N_VOTERS = 8
VOTES_EACH = 30
CONFIG = EloConfig(k=16.0)  # a larger K makes any ordering mistake visible in the ratings


def _live(engine: Engine) -> dict[str, tuple[float, int]]:
    with Session(engine) as s:
        rows = s.exec(select(Model.name, LiveRating.rating, LiveRating.games).join(LiveRating)).all()
    return {name: (rating, games) for name, rating, games in rows if games > 0}


# Every live rater: Glicko-2 with periods short enough that the votes cross many of them.
LIVE_CONFIGS: dict[str, LiveConfig] = {
    "elo": CONFIG,
    "glicko2": Glicko2Rater(period_length=0.01),
    "trueskill": TrueSkillRater(),
}


@pytest.mark.parametrize("rater", sorted(LIVE_CONFIGS))
@pytest.mark.parametrize("n_writers", [1, 2])
def test_concurrent_voters_keep_live_equal_to_replay(
    seeded: Engine, db_url: str, n_writers: int, rater: str
) -> None:
    config = LIVE_CONFIGS[rater]
    engines = [seeded] + [make_engine(db_url) for _ in range(n_writers - 1)]
    writers = [GroupCommitWriter(e, config=config, max_wait_ms=1.0, max_batch=64) for e in engines]
    for w in writers:
        w.start()
    with Session(seeded) as s:
        annotators = [create_annotator(session=s).id for _ in range(N_VOTERS)]
        s.commit()
    errors: list[BaseException] = []
    start = threading.Barrier(N_VOTERS)

    def voter(index: int) -> None:
        rng = random.Random(index)
        annotator = annotators[index]
        assert annotator is not None
        battles = battles_for(seeded, rng, annotator, VOTES_EACH)
        start.wait()
        try:
            for i, battle in enumerate(battles):
                writer = writers[(index + i) % n_writers]
                request = VoteRequest(battle=battle, winner=parse_outcome(rng.choice(WINNERS)))
                result = writer.submit(request).result(timeout=60)
                assert not result.replayed
                # A duplicate submission (a client retry) right after: answered, not recorded twice.
                if i % 10 == 0:
                    again = writers[(index + i + 1) % n_writers].submit(request).result(timeout=60)
                    assert again.replayed and again.vote_id == result.vote_id
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=voter, args=(i,)) for i in range(N_VOTERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in writers:
        w.stop()
    for e in engines[1:]:
        e.dispose()
    assert errors == []
    with Session(seeded) as s:
        n_votes = s.exec(select(func.count()).select_from(Vote)).one()
        n_battles = s.exec(select(func.count()).select_from(Battle)).one()
        n_distinct = s.exec(select(func.count(func.distinct(Vote.battle_id)))).one()
        replay = replay_live_ratings(session=s, config=config)
    assert n_votes == n_battles == n_distinct == N_VOTERS * VOTES_EACH
    live = _live(seeded)
    assert live.keys() == replay.keys()
    for name, (rating, games) in replay.items():
        assert live[name][1] == games
        assert live[name][0] == pytest.approx(rating, abs=1e-9)
    assert sum(w.n_votes for w in writers) >= N_VOTERS * VOTES_EACH
    # Group commit really grouped: fewer transactions than votes.
    assert sum(w.n_batches for w in writers) < sum(w.n_votes for w in writers)


def test_same_token_sent_concurrently_records_one_vote(seeded: Engine, db_url: str) -> None:
    engines = [seeded, make_engine(db_url)]
    writers = [GroupCommitWriter(e, config=CONFIG, max_wait_ms=0.0) for e in engines]
    for w in writers:
        w.start()
    with Session(seeded) as s:
        annotator = create_annotator(session=s).id
        s.commit()
    assert annotator is not None
    battles = battles_for(seeded, random.Random(5), annotator, 20)
    futures = []
    for battle in battles:
        request = VoteRequest(battle=battle, winner=Outcome.MODEL_A)
        futures.append([w.submit(request) for w in writers])
    for pair in futures:
        results = [f.result(timeout=60) for f in pair]
        assert len({r.vote_id for r in results}) == 1
        assert sorted(r.replayed for r in results) == [False, True]
    for w in writers:
        w.stop()
    engines[1].dispose()
    with Session(seeded) as s:
        assert s.exec(select(func.count()).select_from(Vote)).one() == 20
