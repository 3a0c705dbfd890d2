"""The shared vote writer process: two workers' votes in one writer, fallbacks when it is away, and the
wire format. The writer runs in a thread here (same code as `arena vote-writer`), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import random
import socket
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from leaderboard.data import Outcome, parse_outcome
from leaderboard.online.elo import EloConfig
from tests.factories import WINNERS, battles_for, live_ratings
from votes.db import make_engine
from votes.models import Vote
from votes.voting.annotators import create_annotator
from votes.voting.battles import AlreadyVotedError, IssuedBattle, VoteError, VoteRequest, VoteResult
from votes.voting.ratings import replay_live_ratings
from votes.voting.writer import (
    GroupCommitWriter,
    RemoteVoteWriter,
    VoteWriterError,
    database_fingerprint,
    serve_vote_writer,
    writer_identity,
)
from votes.voting.writer.wire import outcome_to_wire, settle

CONFIG = EloConfig(k=16.0)  # a large K makes an ordering mistake visible in the ratings


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # Unix socket paths are limited to ~100 bytes: pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="arena-test-") as folder:
        yield Path(folder)


@contextmanager
def running_writer(engine: Engine, path: Path, config: EloConfig = CONFIG) -> Iterator[threading.Event]:
    """The writer service in a thread; stopped (gracefully) on exit."""
    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=serve_vote_writer,
        args=(engine, path),
        kwargs={"config": config, "max_wait_ms": 1.0, "stop": stop, "on_ready": ready.set},
        daemon=True,
    )
    thread.start()
    assert ready.wait(30), "the vote writer did not start"
    try:
        yield stop
    finally:
        stop.set()
        thread.join(30)
        assert not thread.is_alive()


def _client(engine: Engine, path: Path, **kwargs: float) -> RemoteVoteWriter:
    fallback = GroupCommitWriter(engine, config=CONFIG, max_wait_ms=1.0)
    return RemoteVoteWriter(path, fallback=fallback, expect=writer_identity(engine, CONFIG), **kwargs)


def new_annotator(engine: Engine) -> int:
    with Session(engine) as s:
        annotator = create_annotator(session=s).id
        s.commit()
    assert annotator is not None
    return annotator


def _count_votes(engine: Engine) -> int:
    with Session(engine) as s:
        return int(s.exec(select(func.count()).select_from(Vote)).one())


def _assert_live_equals_replay(engine: Engine) -> None:
    with Session(engine) as s:
        replay = replay_live_ratings(session=s, config=CONFIG)
    live = live_ratings(engine)
    assert live.keys() == replay.keys()
    for name, (rating, games) in replay.items():
        assert live[name][1] == games
        assert live[name][0] == pytest.approx(rating, abs=1e-9)


# --------------------------------------------------------------------------------------------------
# Wire format


def test_vote_request_survives_the_wire() -> None:
    battle = IssuedBattle(
        token_id="tok",
        annotator_id=3,
        prompt_id=4,
        output_a_id=5,
        output_b_id=6,
        model_a_id=7,
        model_b_id=8,
        issued_at=datetime(2026, 11, 22, 1, 2, 3, 456789, tzinfo=UTC),
        pair_probability=0.125,
    )
    for request in (
        VoteRequest(battle=battle, winner=Outcome.TIE),
        VoteRequest(
            battle=battle,
            winner=Outcome.MODEL_B,
            client_hash="c" * 32,
            idempotency_key="3:key",
            voted_at=datetime(2026, 11, 22, 1, 2, 9, tzinfo=UTC),
        ),
    ):
        line = json.dumps(request.to_dict())
        assert VoteRequest.from_dict(json.loads(line)) == request


def test_outcomes_survive_the_wire() -> None:
    result = VoteResult(
        vote_id=1,
        battle_id=2,
        winner="model_a",
        model_a="m-a",
        model_b="m-b",
        rating_a_before=1000.0,
        rating_a_after=1008.0,
        rating_b_before=1000.0,
        rating_b_after=992.0,
        replayed=True,
    )
    cases: list[tuple[Future[VoteResult], type[BaseException] | None]] = []
    for outcome in (
        result,
        AlreadyVotedError(42),
        VoteError("no such battle"),
        ValueError("unknown winner"),
        OSError("disk full"),
    ):
        sent: Future[VoteResult] = Future()
        if isinstance(outcome, VoteResult):
            sent.set_result(outcome)
        else:
            sent.set_exception(outcome)
        cases.append((sent, None if isinstance(outcome, VoteResult) else type(outcome)))
    for sent, kind in cases:
        received: Future[VoteResult] = Future()
        settle(received, json.loads(json.dumps({"id": 1, **outcome_to_wire(sent)})))
        if kind is None:
            assert received.result() == result
        else:
            error = received.exception()
            expected = VoteWriterError if kind is OSError else kind
            assert type(error) is expected
            if isinstance(error, AlreadyVotedError):
                assert error.battle_id == 42
            assert "disk full" in str(error) if kind is OSError else str(error) == str(sent.exception())


def test_fingerprint_names_the_database_not_its_password(tmp_path: Path) -> None:
    a = make_engine(f"sqlite:///{tmp_path}/a.db")
    b = make_engine(f"sqlite:///{tmp_path}/b.db")
    try:
        assert database_fingerprint(a) != database_fingerprint(b)
        assert database_fingerprint(a) == database_fingerprint(make_engine(f"sqlite:///{tmp_path}/a.db"))
    finally:
        a.dispose()
        b.dispose()
    x = make_engine("postgresql+psycopg://u:secret1@127.0.0.1:5432/arena")
    y = make_engine("postgresql+psycopg://u:secret2@127.0.0.1:5432/arena")
    assert database_fingerprint(x) == database_fingerprint(y)
    assert writer_identity(x, CONFIG) != writer_identity(x, EloConfig(k=4.0))


# --------------------------------------------------------------------------------------------------
# Two workers, one writer


@pytest.mark.usefixtures("seeded")
def test_two_workers_share_one_writer(engine: Engine, socket_dir: Path) -> None:
    """Eight voters through two worker handles: every vote goes through the one writer, in shared
    transactions, one vote per battle, and the live ratings equal the replay."""
    path = socket_dir / "votes.sock"
    n_voters, votes_each = 8, 30
    with running_writer(engine, path):
        workers = [_client(engine, path), _client(engine, path)]
        for w in workers:
            w.start()
            assert w.connected
        voters = [(new_annotator(engine), random.Random(i)) for i in range(n_voters)]
        plans = [battles_for(engine, rng, annotator, votes_each) for annotator, rng in voters]
        errors: list[BaseException] = []

        def vote(index: int) -> None:
            try:
                for i, battle in enumerate(plans[index]):
                    request = VoteRequest(battle=battle, winner=parse_outcome(WINNERS[(index + i) % 4]))
                    result = workers[(index + i) % 2].submit(request).result(timeout=60)
                    assert not result.replayed
                    # A retry through the other worker finds the same vote.
                    again = workers[(index + i + 1) % 2].submit(request).result(timeout=60)
                    assert again.replayed and again.vote_id == result.vote_id
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=vote, args=(i,)) for i in range(n_voters)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for w in workers:
            w.stop()
    assert errors == []
    assert _count_votes(engine) == n_voters * votes_each
    assert sum(w.n_remote for w in workers) == 2 * n_voters * votes_each
    assert sum(w.n_local for w in workers) == 0
    _assert_live_equals_replay(engine)


@pytest.mark.usefixtures("seeded")
def test_refusals_come_back_as_the_same_errors(engine: Engine, socket_dir: Path) -> None:
    path = socket_dir / "votes.sock"
    with running_writer(engine, path):
        worker = _client(engine, path)
        worker.start()
        (battle,) = battles_for(engine, random.Random(1), new_annotator(engine), 1)
        first = worker.submit(VoteRequest(battle=battle, winner=Outcome.MODEL_A)).result(timeout=30)
        with pytest.raises(AlreadyVotedError) as refused:
            worker.submit(VoteRequest(battle=battle, winner=Outcome.MODEL_B)).result(timeout=30)
        assert refused.value.battle_id == first.battle_id
        # A vote carries its winner as an Outcome, so an unknown one cannot be handed to the writer: it is
        # refused where it comes in, the wire's reading of a vote included.
        wire = VoteRequest(battle=battle, winner=Outcome.TIE).to_dict()
        with pytest.raises(ValueError, match="unknown winner"):
            VoteRequest.from_dict({**wire, "winner": "left"})
        worker.stop()
    assert worker.n_local == 0
    assert _count_votes(engine) == 1


# --------------------------------------------------------------------------------------------------
# When the writer is away


@pytest.mark.usefixtures("seeded")
def test_without_a_writer_votes_are_written_in_process(engine: Engine, socket_dir: Path) -> None:
    path = socket_dir / "votes.sock"
    worker = _client(engine, path, retry_s=0.0)
    worker.start()
    assert not worker.connected
    battles = battles_for(engine, random.Random(2), new_annotator(engine), 6)
    for battle in battles[:3]:
        worker.submit(VoteRequest(battle=battle, winner=Outcome.MODEL_A)).result(timeout=30)
    assert worker.n_local == 3
    with running_writer(engine, path):  # the writer comes up: the next vote reconnects
        for battle in battles[3:]:
            worker.submit(VoteRequest(battle=battle, winner=Outcome.TIE)).result(timeout=30)
        assert worker.connected and worker.n_remote == 3
        worker.stop()
    assert _count_votes(engine) == 6
    _assert_live_equals_replay(engine)


@pytest.mark.usefixtures("seeded")
def test_a_writer_of_another_database_is_refused(engine: Engine, socket_dir: Path, tmp_path: Path) -> None:
    other = make_engine(f"sqlite:///{tmp_path}/other.db")
    path = socket_dir / "votes.sock"
    try:
        with running_writer(other, path):
            worker = _client(engine, path)
            worker.start()
            assert not worker.connected
            (battle,) = battles_for(engine, random.Random(3), new_annotator(engine), 1)
            worker.submit(VoteRequest(battle=battle, winner=Outcome.MODEL_B)).result(timeout=30)
            worker.stop()
    finally:
        other.dispose()
    assert worker.n_local == 1 and worker.n_remote == 0
    assert _count_votes(engine) == 1


@pytest.mark.usefixtures("seeded")
def test_a_writer_of_another_elo_is_refused(engine: Engine, socket_dir: Path) -> None:
    path = socket_dir / "votes.sock"
    with running_writer(engine, path, config=EloConfig(k=32.0)):
        worker = _client(engine, path)
        worker.start()
        assert not worker.connected
        worker.stop()


@contextmanager
def _vanishing_writer(path: Path, engine: Engine, *, commit: bool) -> Iterator[list[int]]:
    """A writer that takes one vote and dies before answering; with ``commit`` it commits the vote first."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    taken: list[int] = []

    def run() -> None:
        conn, _ = server.accept()
        conn.sendall((json.dumps({"hello": writer_identity(engine, CONFIG)}) + "\n").encode())
        request = VoteRequest.from_dict(json.loads(conn.makefile("rb").readline())["vote"])
        if commit:
            writer = GroupCommitWriter(engine, config=CONFIG, max_wait_ms=0.0)
            writer.start()
            taken.append(writer.submit(request).result(timeout=30).vote_id)
            writer.stop()
        conn.close()  # gone without a word

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield taken
    finally:
        thread.join(30)
        server.close()


@pytest.mark.usefixtures("seeded")
@pytest.mark.parametrize("commit", [False, True], ids=["lost-before-commit", "lost-after-commit"])
def test_votes_owed_by_a_vanished_writer_are_retried_in_process(
    engine: Engine, socket_dir: Path, commit: bool
) -> None:
    """The writer dies holding a vote: the worker writes it itself, or finds it there if it was committed;
    either way the voter gets an answer and the vote is in the database once."""
    path = socket_dir / "votes.sock"
    (battle,) = battles_for(engine, random.Random(4), new_annotator(engine), 1)
    with _vanishing_writer(path, engine, commit=commit) as taken:
        worker = _client(engine, path)
        worker.start()
        assert worker.connected
        result = worker.submit(VoteRequest(battle=battle, winner=Outcome.MODEL_B)).result(timeout=30)
    worker.stop()
    assert worker.n_remote == 1 and worker.n_local == 1
    assert _count_votes(engine) == 1
    assert result.replayed == commit
    if commit:
        assert taken == [result.vote_id]
    _assert_live_equals_replay(engine)


@pytest.mark.usefixtures("seeded")
def test_stop_answers_every_vote_in_flight(engine: Engine, socket_dir: Path) -> None:
    path = socket_dir / "votes.sock"
    battles = battles_for(engine, random.Random(6), new_annotator(engine), 30)
    with running_writer(engine, path):
        worker = _client(engine, path)
        worker.start()
        futures = [worker.submit(VoteRequest(battle=b, winner=Outcome.MODEL_A)) for b in battles]
        worker.stop()  # waits for what the writer owes
        assert all(f.done() and f.exception() is None for f in futures)
    assert _count_votes(engine) == 30
    _assert_live_equals_replay(engine)


@pytest.mark.usefixtures("seeded")
def test_second_engine_url_for_same_database_is_accepted(
    db_url: str, engine: Engine, socket_dir: Path
) -> None:
    """The writer and the workers each open their own engine on the same URL (as separate processes do)."""
    path = socket_dir / "votes.sock"
    own = make_engine(db_url)
    try:
        with running_writer(own, path):
            worker = _client(engine, path)
            worker.start()
            assert worker.connected
            worker.stop()
    finally:
        own.dispose()


@pytest.mark.usefixtures("seeded")
def test_socket_is_private_and_garbage_is_dropped(engine: Engine, socket_dir: Path) -> None:
    """Only the owner may connect; a malformed line is dropped without harming the votes around it."""
    path = socket_dir / "votes.sock"
    (battle,) = battles_for(engine, random.Random(7), new_annotator(engine), 1)
    with running_writer(engine, path):
        assert path.stat().st_mode & 0o777 == 0o600
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.connect(str(path))
            stream = raw.makefile("rb")
            assert json.loads(stream.readline())["hello"] == writer_identity(engine, CONFIG)
            vote = {"id": 2, "vote": VoteRequest(battle=battle, winner=Outcome.TIE).to_dict()}
            raw.sendall(b'{"id": 1, "vote": {"nonsense": true}}\n' + json.dumps(vote).encode() + b"\n")
            answer = json.loads(stream.readline())
        assert answer["id"] == 2 and answer["result"]["winner"] == "tie"
    assert _count_votes(engine) == 1
