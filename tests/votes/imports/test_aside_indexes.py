"""An import that dwarfs the store merges without the indexes it would write all over (the votes' cells,
the unique import slots when it is alone) and builds them once after; a failed or dead run never leaves
them missing for long; a small run keeps them; a run recorded beside one that set the unique index aside
builds it again before placing a key. On SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

import votes.imports.aside_indexes
import votes.imports.files
import votes.imports.keys
import votes.imports.merging
import votes.imports.run_cleanup
import votes.imports.runs
from leaderboard.online.elo import EloConfig
from tests.factories import live_ratings
from tests.votes.conftest import small_import_steps
from tests.votes.imports.test_import_runs import battles_file
from votes.imports.aside_indexes import CELLS_INDEX, SLOT_INDEX, restore_indexes, set_indexes_aside
from votes.imports.files import import_file
from votes.models import utcnow
from votes.reads.cells import load_pair_counts
from votes.tables import battle_t, import_run_t, vote_t
from votes.voting.ratings import replay_live_ratings


@pytest.fixture(autouse=True)
def small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    small_import_steps(monkeypatch, batch=40, merge=25, alone=25)
    monkeypatch.setattr(votes.imports.aside_indexes, "ASIDE_MIN_ROWS", 100)


def _has_cells(conn: Connection) -> bool:
    return bool(conn.dialect.has_index(conn, vote_t.name, CELLS_INDEX))


def _has_slots(conn: Connection) -> bool:
    return bool(conn.dialect.has_index(conn, battle_t.name, SLOT_INDEX))


def _watch(
    monkeypatch: pytest.MonkeyPatch, name: str, original: Any, probe: Callable[[Connection], bool]
) -> list[bool]:
    """``probe`` of the connection at each call of the import runs' ``name`` (``original`` itself)."""
    seen: list[bool] = []

    def watched(conn: Connection, *args: Any, **kwargs: Any) -> Any:
        seen.append(probe(conn))
        return original(conn, *args, **kwargs)

    monkeypatch.setattr(votes.imports.runs, name, watched)
    return seen


@pytest.fixture
def merge_sees(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Whether the cell index was there at each merge step."""
    yield _watch(monkeypatch, "merge_step", votes.imports.merging.merge_step, _has_cells)


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
        patch.setattr(votes.imports.runs, "rollback_run", lambda _engine, _run: None)
        patch.setattr(votes.imports.runs, "restore_indexes", lambda *_args: ())
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


def test_restoring_indexes_that_are_there_does_nothing(engine: Engine) -> None:
    assert restore_indexes(engine) == ()
    with engine.begin() as conn:
        run = _record_run(conn)
        aside = set_indexes_aside(conn, 1_000, run)  # an empty store: any run above the floor dwarfs it
        assert {CELLS_INDEX, SLOT_INDEX} <= set(aside.names) and aside.slots
        if conn.dialect.name == "postgresql":  # each entry costs a microsecond there even in key order
            assert {"ix_vote_created_at", "ix_battle_language"} <= set(aside.names)
        assert not _has_cells(conn) and not _has_slots(conn)
    assert set(restore_indexes(engine)) == set(aside.names)
    with engine.connect() as conn:
        assert _has_cells(conn) and _has_slots(conn)


def _record_run(conn: Connection, path: str = "other.jsonl") -> int:
    """A run's row, as an import records it when it starts."""
    now = utcnow()
    values = {"path": path, "state": "staging", "started_at": now, "heartbeat_at": now}
    key = conn.execute(insert(import_run_t).values(**values)).inserted_primary_key
    assert key is not None
    return int(key[0])


def test_a_run_beside_another_keeps_the_unique_index(engine: Engine) -> None:
    """The import slots are what keep two runs from storing one key: a run that is not alone merges
    with them, whatever else it sets aside."""
    with engine.begin() as conn:
        other = _record_run(conn)
        run = _record_run(conn, "big.jsonl")
        aside = set_indexes_aside(conn, 1_000, run)
        assert CELLS_INDEX in aside.names and not aside.slots
        assert _has_slots(conn)
        conn.execute(delete(import_run_t).where(import_run_t.c.id.in_([other, run])))
    restore_indexes(engine)


@pytest.mark.parametrize("first_dies", [False, True], ids=["first-finishes", "first-dies"])
def test_a_run_recorded_after_the_unique_index_was_set_aside_waits_for_it_before_placing_a_key(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_dies: bool
) -> None:
    """A run alone sets the import slots aside just after another import looked for missing indexes and
    before it was recorded. That import waits (beating) until the first run builds them again at its end,
    or, if the first run dies, until it is found dead, removed, and the index built; only then are its
    keys placed and merged, against the index, and importing the same file again stores each key once."""
    monkeypatch.setattr(votes.imports.runs, "SLOT_WAIT_SECONDS", 0.05)
    path = battles_file(tmp_path / "twice.jsonl", 150, seed=3)
    import_file(engine, path)
    clean = votes.imports.run_cleanup.clean_dead_runs
    first: list[int] = []

    def first_run_ends() -> None:
        time.sleep(0.5)
        with engine.begin() as conn:
            if first_dies:  # its heartbeat stops: the waiting run finds it dead
                conn.execute(
                    update(import_run_t)
                    .values(heartbeat_at=utcnow() - timedelta(hours=1))
                    .where(import_run_t.c.id == first[0])
                )
            else:  # it builds the index again and is done
                restore_indexes(conn, (SLOT_INDEX,))
                conn.execute(delete(import_run_t).where(import_run_t.c.id == first[0]))

    ending = threading.Thread(target=first_run_ends)

    def clean_then_set_aside(target: Engine, **kwargs: Any) -> list[int]:
        dead = clean(target, **kwargs)
        if not first:  # the other run, alone, merges now without the import slots
            with target.begin() as conn:
                first.append(_record_run(conn, "first.jsonl"))
                assert set_indexes_aside(conn, 1_000, first[0]).slots
            ending.start()
        return dead

    monkeypatch.setattr(votes.imports.runs, "clean_dead_runs", clean_then_set_aside)
    monkeypatch.setattr(votes.imports.aside_indexes, "ASIDE_FACTOR", 0)  # 150 votes stored: dwarfed anyway
    placed = _watch(monkeypatch, "place_keys", votes.imports.keys.place_keys, _has_slots)
    began = time.monotonic()
    report = import_file(engine, path)
    ending.join()
    assert time.monotonic() - began >= 0.5  # it waited for the first run
    assert first and report.n_added == 0 and placed and all(placed)
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(vote_t)) == 150
        assert _has_slots(conn)
        left = conn.scalars(select(import_run_t.c.id)).all()
    assert left == []  # the first run removed (done, or dead and cleaned up), the second finished


def test_a_unique_index_that_cannot_be_built_again_fails_the_run_and_leaves_no_row_of_it(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merge_sees: list[bool]
) -> None:
    """The import slots are built again before the run calls itself done: should that fail (two battles
    in one slot), the run fails and is rolled back, and the indexes are there afterwards."""
    restore = votes.imports.aside_indexes.restore_indexes
    failed: list[str] = []

    def refused(target: Engine | Connection, names: tuple[str, ...] = ()) -> tuple[str, ...]:
        if names == (SLOT_INDEX,) and isinstance(target, Connection) and not failed:
            failed.append(SLOT_INDEX)  # the build before "done", on the merging connection
            raise IntegrityError("CREATE UNIQUE INDEX ix_battle_import_slot", {}, ValueError("duplicated"))
        return restore(target, names) if names else restore(target)

    monkeypatch.setattr(votes.imports.runs, "restore_indexes", refused)
    with pytest.raises(IntegrityError):
        import_file(engine, battles_file(tmp_path / "big.jsonl", 400))
    assert failed and merge_sees and not any(merge_sees)
    with engine.connect() as conn:
        assert _has_slots(conn) and _has_cells(conn)
        assert conn.scalar(select(func.count()).select_from(vote_t)) == 0
        assert conn.scalar(select(func.count()).select_from(battle_t)) == 0
        assert conn.scalar(select(func.count()).select_from(import_run_t)) == 0


def test_on_postgresql_a_reader_holding_the_table_keeps_the_index(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merge_sees: list[bool]
) -> None:
    """Dropping takes the strongest lock; a long reader would queue every new one behind it. So the
    drop waits LOCK_WAIT, then the run merges with the index as a small one would."""
    if engine.dialect.name != "postgresql":
        pytest.skip("the lock wait is PostgreSQL's")
    monkeypatch.setattr(votes.imports.aside_indexes, "LOCK_WAIT", 0.2)
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
