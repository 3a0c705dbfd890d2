"""An import that dwarfs the store merges without the votes' cell index and builds it once after; a failed
or dead run never leaves it missing for long; a small run keeps it. On SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection, Engine

import votes.cell_index
import votes.import_runs
import votes.io
from leaderboard.elo import EloConfig
from tests.factories import live_ratings
from tests.votes.conftest import small_import_steps
from tests.votes.test_import_runs import battles_file
from votes.cell_index import CELLS_INDEX, restore_cells_index, set_cells_aside
from votes.io import import_file
from votes.models import utcnow
from votes.queries import load_pair_counts
from votes.ratings import replay_live_ratings
from votes.tables import import_run_t, vote_t


@pytest.fixture(autouse=True)
def small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    small_import_steps(monkeypatch, batch=40, merge=25, alone=25)
    monkeypatch.setattr(votes.cell_index, "ASIDE_MIN_ROWS", 100)


def _has_cells(conn: Connection) -> bool:
    return bool(conn.dialect.has_index(conn, vote_t.name, CELLS_INDEX))


@pytest.fixture
def merge_sees(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Whether the cell index was there at each merge step."""
    seen: list[bool] = []
    merge = votes.import_runs._merge_step

    def watched(conn: Connection, *args: Any, **kwargs: Any) -> int:
        seen.append(_has_cells(conn))
        return merge(conn, *args, **kwargs)

    monkeypatch.setattr(votes.import_runs, "_merge_step", watched)
    yield seen


def test_a_run_that_dwarfs_the_store_merges_without_the_index_and_builds_it_after(
    engine: Engine, tmp_path: Path, merge_sees: list[bool]
) -> None:
    import_file(engine, battles_file(tmp_path / "first.jsonl", 20, seed=1))  # below the floor: kept
    assert merge_sees and all(merge_sees)
    merge_sees.clear()
    report = import_file(engine, battles_file(tmp_path / "big.jsonl", 400, seed=2))
    assert report.n_added == 400
    assert merge_sees and not any(merge_sees)  # 400 rows over 20 stored: merged without it
    with engine.connect() as conn:
        assert _has_cells(conn)
        counts = load_pair_counts(conn)
        assert counts.n_votes == 420
    # the live ratings were replayed beside the index build, and are those of every vote in id order
    assert live_ratings(engine) == _replayed(engine)


def _replayed(engine: Engine) -> dict[str, tuple[float, int]]:
    with engine.connect() as conn:
        return replay_live_ratings(session=conn, config=EloConfig())


def test_a_run_small_beside_the_store_keeps_the_index(
    engine: Engine, tmp_path: Path, merge_sees: list[bool]
) -> None:
    import_file(engine, battles_file(tmp_path / "first.jsonl", 120, seed=1))
    merge_sees.clear()
    import_file(engine, battles_file(tmp_path / "second.jsonl", 400, seed=2))  # 400 < 4 x 120
    assert merge_sees and all(merge_sees)


class Crash(RuntimeError):
    pass


def test_a_failed_merge_builds_the_index_again_and_leaves_the_store_as_it_was(
    engine: Engine, tmp_path: Path, merge_sees: list[bool]
) -> None:
    steps = 0

    def crash() -> None:
        nonlocal steps
        steps += 1
        if steps == 14:  # 10 staged batches, then some merge steps
            raise Crash("power cut")

    with pytest.raises(Crash):
        import_file(engine, battles_file(tmp_path / "big.jsonl", 400), between_batches=crash)
    assert merge_sees and not any(merge_sees)
    with engine.connect() as conn:
        assert _has_cells(conn)
        assert conn.scalar(select(func.count()).select_from(vote_t)) == 0


def test_a_dead_run_that_set_the_index_aside_has_it_built_by_the_next_import(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merge_sees: list[bool]
) -> None:
    """A process killed mid-merge builds nothing: the next import (or publish) finds the index missing."""
    steps = 0

    def die() -> None:
        nonlocal steps
        steps += 1
        if steps == 14:
            raise Crash("killed")

    with monkeypatch.context() as patch:  # a dead process neither rolls back nor builds the index
        patch.setattr(votes.import_runs, "rollback_run", lambda _engine, _run: None)
        patch.setattr(votes.import_runs, "_restore_cells_quietly", lambda _engine: None)
        with pytest.raises(Crash):
            import_file(engine, battles_file(tmp_path / "dead.jsonl", 400), between_batches=die)
    with engine.begin() as conn:
        assert not _has_cells(conn)
        conn.execute(update(import_run_t).values(heartbeat_at=utcnow() - timedelta(hours=1)))
    merge_sees.clear()
    import_file(engine, battles_file(tmp_path / "small.jsonl", 10, seed=5))
    assert merge_sees and all(merge_sees)  # built when the run started, before its merge
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(vote_t)) == 10


def test_restoring_an_index_that_is_there_does_nothing(engine: Engine) -> None:
    assert restore_cells_index(engine) is False
    with engine.begin() as conn:
        assert set_cells_aside(conn, 1_000) is True  # an empty store: any run above the floor dwarfs it
        assert not _has_cells(conn)
    assert restore_cells_index(engine) is True
    with engine.connect() as conn:
        assert _has_cells(conn)


def test_on_postgresql_a_reader_holding_the_table_keeps_the_index(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merge_sees: list[bool]
) -> None:
    """Dropping takes the strongest lock; a long reader would queue every new one behind it. So the
    drop waits LOCK_WAIT, then the run merges with the index as a small one would."""
    if engine.dialect.name != "postgresql":
        pytest.skip("the lock wait is PostgreSQL's")
    monkeypatch.setattr(votes.cell_index, "LOCK_WAIT", 0.2)
    holding, done = threading.Event(), threading.Event()

    def reader() -> None:
        with engine.connect() as conn, conn.begin():
            conn.execute(select(func.count()).select_from(vote_t)).scalar()  # holds ACCESS SHARE
            holding.set()
            done.wait(30)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        assert holding.wait(10)
        report = import_file(engine, battles_file(tmp_path / "big.jsonl", 400))
    finally:
        done.set()
        thread.join()
    assert report.n_added == 400
    assert merge_sees and all(merge_sees)
    with engine.connect() as conn:
        assert _has_cells(conn)
