"""`arena import` as a run of short transactions: all or nothing on a late bad row, a crash or a dead
process, and live votes written between its batches. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

import votes.imports.files
import votes.imports.run_cleanup
import votes.imports.runs
from leaderboard.data import Outcome
from leaderboard.online.elo import EloConfig
from tests.factories import WINNERS, battles_for, live_ratings, row_counts
from tests.votes.conftest import small_import_steps
from votes.dialects import dialect_of
from votes.files.records import InputError
from votes.imports.files import import_file
from votes.models import utcnow
from votes.tables import battle_t, import_created_t, import_row_t, import_run_t, vote_t
from votes.voting.annotators import create_annotator
from votes.voting.battles import IssuedBattle, VoteRequest
from votes.voting.ratings import replay_live_ratings
from votes.voting.writer import GroupCommitWriter

CONFIG = EloConfig()
BATCH = 40  # rows per batch in these tests, so a small file spans many batches


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    small_import_steps(monkeypatch, batch=BATCH, merge=25, alone=25)  # as many steps alone as not


def battles_file(path: Path, n: int, *, bad_line: int | None = None, seed: int = 0) -> Path:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(1, n + 1):
            a, b = rng.sample(range(8), 2)
            row = {
                "question_id": f"q{i}",
                "model_a": f"imported-{a}",
                "model_b": f"imported-{b}",
                "winner": "left" if i == bad_line else rng.choice(WINNERS),
                "judge": f"judge-{i % 7}",
                "tstamp": 1_700_000_000.0 + i,
            }
            fh.write(json.dumps(row) + "\n")
    return path


def _store(engine: Engine) -> dict[str, int]:
    """Rows per store table, the import runs' own tables included."""
    counts = row_counts(engine)
    with engine.connect() as conn:
        for table in (import_run_t, import_row_t, import_created_t):
            counts[table.name] = int(conn.scalar(select(func.count()).select_from(table)) or 0)
    return counts


def test_a_bad_row_in_a_late_batch_leaves_nothing(engine: Engine, tmp_path: Path) -> None:
    before = _store(engine)
    path = battles_file(tmp_path / "late.jsonl", 400, bad_line=390)
    with pytest.raises(InputError, match=r"late\.jsonl: line 390: unknown winner 'left'"):
        import_file(engine, path)
    assert _store(engine) == before  # no model, judge, battle, vote or staging row left behind


class Crash(RuntimeError):
    pass


@pytest.mark.parametrize(
    ("crash_at", "error"),
    [(3, Crash), (14, Crash), (20, KeyboardInterrupt)],
    ids=["crash-while-staging", "crash-while-merging", "ctrl-c-while-merging"],
)
def test_a_crash_mid_import_removes_every_row_of_the_run(
    engine: Engine, tmp_path: Path, crash_at: int, error: type[BaseException]
) -> None:
    """400 rows: 10 staged batches, then 16 merge steps; the crash comes during one phase or the other."""
    battles_file(tmp_path / "first.jsonl", 50, seed=1)
    import_file(engine, tmp_path / "first.jsonl")
    before, ratings = _store(engine), live_ratings(engine)
    calls = 0

    def crash() -> None:
        nonlocal calls
        calls += 1
        if calls == crash_at:
            raise error("power cut")

    with pytest.raises(error):
        import_file(engine, battles_file(tmp_path / "big.jsonl", 400, seed=2), between_batches=crash)
    assert calls == crash_at
    assert _store(engine) == before
    assert live_ratings(engine) == ratings
    again = import_file(engine, tmp_path / "big.jsonl")  # the same file then imports whole
    assert again.n_added == 400


def _merge_in_steps(monkeypatch: pytest.MonkeyPatch, engine: Engine) -> None:
    """Runs merge in short transactions after their staging on PostgreSQL too, as the versions before
    the merge beside the staging did (the leftovers of their dead runs are what these tests make)."""
    monkeypatch.setattr(dialect_of(engine), "merges_beside", False)


def test_a_dead_imports_rows_are_removed_by_the_next_import(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process killed mid-merge cannot roll back: its run stops beating and the next import removes it
    (merged in short steps, as on SQLite: on PostgreSQL a run's merge is one transaction, see below)."""
    _merge_in_steps(monkeypatch, engine)
    before = _store(engine)
    calls = 0

    def die() -> None:
        nonlocal calls
        calls += 1
        if calls == 12:  # some merge steps done
            raise Crash("killed")

    with monkeypatch.context() as patch:
        patch.setattr(votes.imports.runs, "rollback_run", lambda _engine, _run: None)  # a dead process
        with pytest.raises(Crash):
            import_file(engine, battles_file(tmp_path / "dead.jsonl", 400), between_batches=die)
    assert _store(engine)["vote"] > before["vote"]  # what the dead run merged is still there
    with engine.begin() as conn:
        conn.execute(update(import_run_t).values(heartbeat_at=utcnow() - timedelta(hours=1)))
    report = import_file(engine, battles_file(tmp_path / "other.jsonl", 10, seed=5))
    assert _store(engine)["vote"] == before["vote"] + report.n_added == before["vote"] + 10
    assert _store(engine)["importrun"] == 0


def test_on_postgresql_a_run_killed_mid_merge_shows_nothing_and_the_next_import_removes_it(
    pg_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge beside the staging is one transaction: a process killed while it merges (the server
    rolls the transaction back when the connection goes) leaves no battle or vote of the run, only its
    staged rows and run, which the next import removes once the run stops beating."""
    monkeypatch.setattr(votes.imports.runs, "BESIDE_AFTER_ROWS", 100)  # the merge follows the staging
    engine = pg_engine
    before = _store(engine)
    merged: list[int] = []

    def die() -> None:
        with engine.connect() as conn:
            merged.append(int(conn.scalar(select(func.count()).select_from(import_row_t)) or 0))
        if len(merged) == 12:  # staging and merging side by side
            raise Crash("killed")

    with monkeypatch.context() as patch:
        patch.setattr(votes.imports.runs, "rollback_run", lambda _engine, _run: None)  # a dead process
        with pytest.raises(Crash):
            import_file(engine, battles_file(tmp_path / "dead.jsonl", 400), between_batches=die)
    after = _store(engine)
    assert after["vote"] == before["vote"] and after["battle"] == before["battle"]  # nothing was seen
    assert after["importrow"] > 0 and after["importrun"] == 1
    with engine.begin() as conn:
        conn.execute(update(import_run_t).values(heartbeat_at=utcnow() - timedelta(hours=1)))
    report = import_file(engine, battles_file(tmp_path / "other.jsonl", 10, seed=5))
    assert _store(engine)["vote"] == before["vote"] + report.n_added == before["vote"] + 10
    assert _store(engine)["importrun"] == 0 and _store(engine)["importrow"] == 0


def test_on_postgresql_the_merge_follows_the_staging_and_is_seen_all_at_once(
    pg_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``BESIDE_AFTER_ROWS`` staged rows the merge runs beside the staging in its own transaction:
    while the file is still being read, no reader sees any of its votes; once done, all of them."""
    monkeypatch.setattr(votes.imports.runs, "BESIDE_AFTER_ROWS", 100)
    engine = pg_engine
    seen: list[int] = []

    def look() -> None:
        with engine.connect() as conn:
            seen.append(int(conn.scalar(select(func.count()).select_from(vote_t)) or 0))

    report = import_file(engine, battles_file(tmp_path / "big.jsonl", 400), between_batches=look)
    assert report.n_added == 400 and len(seen) > 10
    assert set(seen) == {0}
    assert _store(engine)["vote"] == 400
    with engine.connect() as conn:
        assert live_ratings(engine) == replay_live_ratings(session=conn, config=CONFIG)


def test_a_running_import_is_not_taken_for_dead(engine: Engine, tmp_path: Path) -> None:
    seen: list[list[int]] = []

    def other_import_starts() -> None:
        if not seen:
            seen.append(votes.imports.run_cleanup.clean_dead_runs(engine))

    import_file(engine, battles_file(tmp_path / "a.jsonl", 100), between_batches=other_import_starts)
    assert seen == [[]]
    assert _store(engine)["vote"] == 100


@pytest.mark.usefixtures("seeded")
def test_live_votes_are_written_between_batches(engine: Engine, tmp_path: Path) -> None:
    """Between two batches of a running import the real vote writer commits a vote at once (an import
    holding the writer lock would make it wait out the busy timeout and fail), and the staged battles
    stay out of the votes until the run merges them."""
    with Session(engine) as session:
        annotator = create_annotator(session=session).id
        session.commit()
    assert annotator is not None
    plan: Iterator[IssuedBattle] = iter(battles_for(engine, random.Random(3), annotator, 12))
    writer = GroupCommitWriter(engine, config=CONFIG, max_wait_ms=0.0)
    writer.start()
    written: list[int] = []
    votes_seen: list[int] = []

    def vote_now() -> None:
        battle = next(plan, None)
        if battle is None:
            return
        result = writer.submit(VoteRequest(battle=battle, winner=Outcome.MODEL_A)).result(timeout=120)
        written.append(result.vote_id)
        votes_seen.append(_store(engine)["vote"])

    try:
        report = import_file(engine, battles_file(tmp_path / "live.jsonl", 300), between_batches=vote_now)
    finally:
        writer.stop()
    assert len(written) == 12 and report.n_added == 300
    # Eight staged batches: only the live votes are in the vote table while staging.
    assert votes_seen[:8] == list(range(1, 9))
    assert _store(engine)["vote"] == 312
    with engine.connect() as conn:
        assert live_ratings(engine) == replay_live_ratings(session=conn, config=CONFIG)


def test_imported_times_are_stored_as_every_other_row_stores_them(engine: Engine, tmp_path: Path) -> None:
    """The bulk path writes past SQLAlchemy's types: its times must still be SQLite's text form of the
    others (naive UTC with microseconds), or `--since`/`--until` compare text that sorts differently."""
    import_file(engine, battles_file(tmp_path / "b.jsonl", 30))
    with engine.connect() as conn:
        stored = [t for (t,) in conn.execute(select(func.min(vote_t.c.created_at)))]
        if engine.dialect.name == "sqlite":
            raw = conn.exec_driver_sql("SELECT created_at FROM vote ORDER BY id LIMIT 1").scalar_one()
            assert raw == "2023-11-14 22:13:21.000000"
    assert stored[0] is not None and stored[0].isoformat() == "2023-11-14T22:13:21+00:00"


def test_merged_battles_follow_the_file_and_votes_copy_their_battles(engine: Engine, tmp_path: Path) -> None:
    """Across merge steps the battles are numbered in file order (live ratings replay the votes in id
    order), and each vote belongs to the battle of its own row: models, judge and time agree."""
    import_file(engine, battles_file(tmp_path / "b.jsonl", 130))
    stmt = (
        select(
            battle_t.c.id,
            battle_t.c.issued_at,
            battle_t.c.model_a_id,
            battle_t.c.model_b_id,
            battle_t.c.annotator_id,
            vote_t.c.id,
            vote_t.c.created_at,
            vote_t.c.model_a_id,
            vote_t.c.model_b_id,
            vote_t.c.annotator_id,
        )
        .join(vote_t, vote_t.c.battle_id == battle_t.c.id)
        .order_by(battle_t.c.id)
    )
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
    assert len(rows) == 130
    times = [r[1] for r in rows]
    assert times == sorted(times) and len(set(times)) == 130  # the file's tstamps ascend
    vote_ids = [r[5] for r in rows]
    assert vote_ids == sorted(vote_ids)
    for row in rows:
        assert (row[6], row[7], row[8], row[9]) == (row[1], row[2], row[3], row[4])


def test_keys_merged_by_another_run_after_staging_are_not_added_twice(engine: Engine, tmp_path: Path) -> None:
    """A run stages its rows as new; another import merges some of the same rows before this run's merge
    steps: those steps look again, and every row ends up stored once."""
    whole = battles_file(tmp_path / "whole.jsonl", 200, seed=3)
    part = tmp_path / "part.jsonl"
    lines = whole.read_text(encoding="utf-8").splitlines(keepends=True)
    part.write_text("".join(lines[::3]), encoding="utf-8")  # every third row of the same file
    staged = 200 // BATCH
    calls = 0

    def other_import() -> None:
        nonlocal calls
        calls += 1
        if calls == staged:  # all staged (as new), nothing merged yet
            assert import_file(engine, part).n_added == len(lines[::3])

    report = import_file(engine, whole, between_batches=other_import)
    assert report.n_added == 200 - len(lines[::3])
    counts = _store(engine)
    assert counts["battle"] == counts["vote"] == 200
    assert import_file(engine, whole).n_added == 0


def test_a_run_stopped_mid_merge_leaves_another_runs_battles(engine: Engine, tmp_path: Path) -> None:
    """Rows staged as new but not merged when the run stops are not taken for the run's own, even when
    another run stored the same rows meanwhile: the rollback removes only what this run merged."""
    whole = battles_file(tmp_path / "whole.jsonl", 200, seed=4)
    lines = whole.read_text(encoding="utf-8").splitlines(keepends=True)
    tail = tmp_path / "tail.jsonl"
    tail.write_text("".join(lines[150:]), encoding="utf-8")
    staged = 200 // BATCH
    calls = 0

    def interfere() -> None:
        nonlocal calls
        calls += 1
        if calls == staged:
            import_file(engine, tail)  # rows this run staged as new, stored by another run
        if calls == staged + 2:  # two merge steps done
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        import_file(engine, whole, between_batches=interfere)
    counts = _store(engine)
    assert counts["battle"] == counts["vote"] == 50  # the other run's rows, all of them
    assert counts["importrow"] == counts["importrun"] == 0


def test_a_dead_run_from_before_merge_progress_was_recorded_is_removed_whole(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run left by an older version (flags set only on merged rows, no merge progress) loses every
    battle it merged when the next import cleans it up."""
    _merge_in_steps(monkeypatch, engine)
    before = _store(engine)
    calls = 0

    def die() -> None:
        nonlocal calls
        calls += 1
        if calls == 12:
            raise Crash("killed")

    with monkeypatch.context() as patch:
        patch.setattr(votes.imports.runs, "rollback_run", lambda _engine, _run: None)
        with pytest.raises(Crash):
            import_file(engine, battles_file(tmp_path / "dead.jsonl", 400), between_batches=die)
    with engine.begin() as conn:  # what an older version left: no progress rows, unmerged rows unflagged
        progress = import_created_t.c.kind == "merged"
        merged = conn.scalar(select(func.max(import_created_t.c.row_id)).where(progress))
        assert merged is not None and 0 < merged < 400
        conn.execute(import_created_t.delete().where(progress))
        conn.execute(update(import_row_t).where(import_row_t.c.seq >= merged).values(fresh=None))
        conn.execute(update(import_run_t).values(heartbeat_at=utcnow() - timedelta(hours=1)))
    assert _store(engine)["vote"] == before["vote"] + merged
    import_file(engine, battles_file(tmp_path / "other.jsonl", 10, seed=5))
    assert _store(engine)["vote"] == before["vote"] + 10


#: The statements that empty the staging tables whole (no condition): SQLite's and PostgreSQL's.
EMPTY_WHOLE = ("DELETE FROM importrow", "DELETE FROM importcreated", "TRUNCATE importrow, importcreated")


@contextmanager
def _emptying_watched(engine: Engine) -> Iterator[list[int | None]]:
    """The statements that empty the staging tables whole, as they run: on SQLite whether the connection
    then enforces foreign keys (1 or 0), on PostgreSQL None."""
    seen: list[int | None] = []

    def watch(conn: Connection, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.strip() in EMPTY_WHOLE:
            driver = conn.connection.driver_connection
            sqlite = engine.dialect.name == "sqlite"
            seen.append(int(driver.execute("PRAGMA foreign_keys").fetchone()[0]) if sqlite else None)  # type: ignore[union-attr]

    event.listen(engine, "before_cursor_execute", watch)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", watch)


def test_a_run_alone_leaves_every_connection_enforcing_foreign_keys(engine: Engine, tmp_path: Path) -> None:
    """The run alone empties its staging tables with SQLite's foreign keys off on one connection (so the
    pages are freed whole); every connection goes back to the pool enforcing them again."""
    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite's foreign-key switch")
    returned: list[int] = []

    def back_in_pool(dbapi_connection: Any, _record: Any) -> None:
        returned.append(int(dbapi_connection.execute("PRAGMA foreign_keys").fetchone()[0]))

    event.listen(engine, "checkin", back_in_pool)
    try:
        with _emptying_watched(engine) as emptied:
            import_file(engine, battles_file(tmp_path / "b.jsonl", 60))
    finally:
        event.remove(engine, "checkin", back_in_pool)
    assert _store(engine)["importrow"] == 0
    assert emptied == [0, 0]  # both staging tables, with the keys off
    assert returned and set(returned) == {1}


def test_a_run_alone_empties_the_staging_tables_at_once_but_not_beside_another_run(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alone, a finished run empties the staging tables whole (SQLite: a DELETE without WHERE;
    PostgreSQL: TRUNCATE under an exclusive lock); beside another run's staged rows it removes only its
    own, and the other run's rows are all still there."""
    with _emptying_watched(engine) as emptied:
        import_file(engine, battles_file(tmp_path / "alone.jsonl", 60, seed=1))
    assert emptied
    assert _store(engine)["importrow"] == _store(engine)["importcreated"] == 0

    class Stopped(Exception):
        pass

    batches = 0

    def stop_before_merging() -> None:
        nonlocal batches
        batches += 1
        if batches * BATCH >= 90:  # every row staged: the merge would start now
            raise Stopped

    with monkeypatch.context() as patch:  # another run, still staged (its process busy elsewhere)
        patch.setattr(votes.imports.runs, "rollback_run", lambda _engine, _run: None)
        with pytest.raises(Stopped):
            import_file(
                engine,
                battles_file(tmp_path / "other.jsonl", 90, seed=2),
                between_batches=stop_before_merging,
            )
    assert _store(engine)["importrow"] == 90
    with _emptying_watched(engine) as emptied:
        import_file(engine, battles_file(tmp_path / "beside.jsonl", 60, seed=3))
    assert not emptied
    assert _store(engine)["importrow"] == 90  # the other run's rows, every one
