"""Import keys found by two integers: digests that share their first 64 bits are still told apart (within
a run, against stored battles, and when another run takes the slot mid-import), and the migration that
brought the integers fills them from the keys a store already holds. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import event, func, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

import votes.imports.files
import votes.imports.runs
from tests.factories import WINNERS
from tests.votes.conftest import small_import_steps
from votes.db import make_engine
from votes.files.battle_rows import BattleRecord
from votes.imports.clean_columns import CleanBatch
from votes.imports.files import import_file
from votes.imports.keys import key_parts
from votes.migrate import alembic_config, head_revision, upgrade_database
from votes.tables import battle_t, import_row_t, import_run_t, vote_t

SHARED = "0123456789abcdef"  # the first 64 bits every digest gets below


@pytest.fixture(autouse=True)
def small_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    small_import_steps(monkeypatch, batch=20, merge=15, alone=15)


@pytest.fixture
def one_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row's digest starts with the same 64 bits (and keeps the rest of its own digest): what two
    rows in four million would share by chance, here for every row."""
    digests = votes.imports.runs._digests

    def shared(records: Sequence[BattleRecord] | CleanBatch) -> list[str]:
        return [SHARED + d[16:] for d in digests(records)]

    monkeypatch.setattr(votes.imports.runs, "_digests", shared)


def battles_file(path: Path, n: int, *, seed: int, repeats: int = 0, bad_line: int | None = None) -> Path:
    """``n`` rows, the first ``repeats`` of them written a second time at the end (identical rows)."""
    rng = random.Random(seed)
    lines = []
    for i in range(1, n + 1):
        a, b = rng.sample(range(6), 2)
        row = {
            "model_a": f"m{a}",
            "model_b": f"m{b}",
            "winner": "left" if i == bad_line else rng.choice(WINNERS),
            "judge": f"judge-{seed}-{i % 5}",
            "tstamp": 1_700_000_000.0 + seed * 10_000 + i,
        }
        lines.append(json.dumps(row) + "\n")
    path.write_text("".join(lines + lines[:repeats]), encoding="utf-8")
    return path


def _battles(engine: Engine) -> list[tuple[str, int | None, int | None]]:
    stmt = select(battle_t.c.import_key, battle_t.c.import_digest, battle_t.c.import_copy).order_by(
        battle_t.c.id
    )
    with engine.connect() as conn:
        return [(str(k), d, c) for k, d, c in conn.execute(stmt)]


def _count(engine: Engine, table: object) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(table)) or 0)  # type: ignore[arg-type]


def test_a_stored_key_is_found_by_its_digest_and_occurrence(engine: Engine, tmp_path: Path) -> None:
    """Without collisions every key has its slot: the digest's first 64 bits, signed, and its copy."""
    report = import_file(engine, battles_file(tmp_path / "b.jsonl", 30, seed=1, repeats=4))
    assert report.n_added == 34
    stored = _battles(engine)
    assert [(d, c) for _, d, c in stored] == key_parts([k for k, _, _ in stored])
    assert sorted(c for _, _, c in stored if c) == [1, 1, 1, 1]  # the four rows written twice
    assert any(d is not None and d < 0 for _, d, _ in stored)  # the top bit set: a negative 64-bit number
    assert import_file(engine, tmp_path / "b.jsonl").n_added == 0


@pytest.mark.usefixtures("one_prefix")
def test_digests_sharing_64_bits_are_stored_apart_and_found_again(engine: Engine, tmp_path: Path) -> None:
    """In one run the first digest keeps the slots of its prefix and every other is found by its text;
    a later file meets the stored slots and goes apart too; importing either again adds nothing."""
    first = battles_file(tmp_path / "first.jsonl", 40, seed=2, repeats=3)
    assert import_file(engine, first).n_added == 43
    stored = _battles(engine)
    slotted = [(d, c) for _, d, c in stored if d is not None]
    assert len(slotted) == len(set(slotted)) >= 1
    assert {d for d, _ in slotted} == {int.from_bytes(bytes.fromhex(SHARED), "big", signed=True)}
    assert len(stored) - len(slotted) >= 40 - 2  # all but the first digest's rows are apart

    second = battles_file(tmp_path / "second.jsonl", 25, seed=3)
    assert import_file(engine, second).n_added == 25
    assert [r for r in _battles(engine) if r[1] is not None] == [r for r in stored if r[1] is not None]
    assert import_file(engine, first).n_added == 0
    assert import_file(engine, second).n_added == 0
    assert _count(engine, battle_t) == _count(engine, vote_t) == 68


@pytest.mark.usefixtures("one_prefix")
def test_a_failed_run_removes_the_battles_it_stored_apart(engine: Engine, tmp_path: Path) -> None:
    """A run stopped mid-merge finds its battles by their text as well as by their slots."""
    import_file(engine, battles_file(tmp_path / "kept.jsonl", 10, seed=4))
    before = _count(engine, battle_t)
    calls = 0

    def stop() -> None:
        nonlocal calls
        calls += 1
        if calls == 60 // 20 + 3:  # staged, three merge steps done
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        import_file(engine, battles_file(tmp_path / "stopped.jsonl", 60, seed=5), between_batches=stop)
    assert _count(engine, battle_t) == _count(engine, vote_t) == before
    assert _count(engine, import_row_t) == _count(engine, import_run_t) == 0


@pytest.mark.usefixtures("one_prefix")
def test_a_slot_taken_by_another_run_after_staging_sends_the_row_apart(
    engine: Engine, tmp_path: Path
) -> None:
    """A run staged into an empty store takes its slots as free; another run stores a different digest
    with the same 64 bits before the first merges: that merge step looks again, and both are kept."""
    whole = battles_file(tmp_path / "whole.jsonl", 40, seed=6)
    other = battles_file(tmp_path / "other.jsonl", 10, seed=7)
    calls = 0

    def other_import() -> None:
        nonlocal calls
        calls += 1
        if calls == 40 // 20:  # all staged, nothing merged yet
            assert import_file(engine, other).n_added == 10

    assert import_file(engine, whole, between_batches=other_import).n_added == 40
    assert _count(engine, battle_t) == _count(engine, vote_t) == 50
    stored = _battles(engine)
    assert [k for k, d, _ in stored if d is not None] == [stored[0][0]]  # the other run's first row
    assert import_file(engine, whole).n_added == 0
    assert import_file(engine, other).n_added == 0


def test_the_slot_index_refuses_a_second_battle_in_one_slot(engine: Engine, tmp_path: Path) -> None:
    """The store itself keeps a slot to one battle, whatever writes it."""
    import_file(engine, battles_file(tmp_path / "b.jsonl", 3, seed=8))
    columns = "prompt_id, model_a_id, model_b_id, issued_at, source, import_key, import_digest, import_copy"
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(
            text(
                f"INSERT INTO battle ({columns}) SELECT prompt_id, model_a_id, model_b_id, issued_at,"
                " source, 'another-key', import_digest, import_copy FROM battle"
                " WHERE import_digest IS NOT NULL LIMIT 1"
            )
        )


def test_key_parts_read_only_keys_of_the_numbered_form() -> None:
    digest = "f" * 40
    bad = [
        digest,
        f"{digest}-",
        f"{digest}-01",
        f"{digest}-x",
        f"{'F' * 40}-0",
        "legacy-1",
        f"{digest}-1234567890",
    ]
    good = [f"{digest}-0", f"{'0' * 15}1{'0' * 24}-12"]
    assert key_parts([good[0], *bad, good[1]]) == [(-1, 0), *[None] * len(bad), (1, 12)]
    assert key_parts(bad) == [None] * len(bad)
    assert key_parts([]) == []


def test_the_migration_fills_the_slots_from_the_stored_keys(db_url: str, tmp_path: Path) -> None:
    """A store imported into before the integers existed (here: downgraded to that revision) gets each
    key's slot; a key sharing another's 64 bits and a key of another form are found by their text; the
    same file imported again adds nothing."""
    upgrade_database(db_url)
    engine = make_engine(db_url)
    try:
        path = battles_file(tmp_path / "b.jsonl", 30, seed=9, repeats=2)
        assert import_file(engine, path).n_added == 32
        keys = [k for k, _, _ in _battles(engine)]
        command.downgrade(alembic_config(db_url), "0019_no_battle_pair_index")
        twin = keys[0][:16] + "f" * 24 + "-0"  # another digest with the first one's 64 bits
        with engine.begin() as conn:
            for key in (twin, "legacy-1"):
                conn.execute(
                    text(
                        "INSERT INTO battle (model_a_id, model_b_id, issued_at, source, import_key)"
                        " SELECT model_a_id, model_b_id, issued_at, source, :key FROM battle"
                        " ORDER BY id LIMIT 1"
                    ),
                    {"key": key},
                )
        assert upgrade_database(db_url) == head_revision()
        stored = {k: (d, c) for k, d, c in _battles(engine)}
        assert [stored[k] for k in keys] == key_parts(keys)
        assert stored[twin][0] is None  # the older battle keeps the slot
        assert stored["legacy-1"] == (None, None)
        assert import_file(engine, path).n_added == 0
        with pytest.raises(IntegrityError), engine.begin() as conn:  # the text of a key apart stays unique
            conn.execute(
                text(
                    "INSERT INTO battle (model_a_id, model_b_id, issued_at, source, import_key)"
                    " SELECT model_a_id, model_b_id, issued_at, source, 'legacy-1' FROM battle LIMIT 1"
                )
            )
    finally:
        engine.dispose()


def test_sqlite_finds_keys_through_their_indexes(engine: Engine, tmp_path: Path) -> None:
    """Every look-up of ``battle`` a second import and a stopped run make (slots, keys by their text, the
    battle of a staged row) goes through an index: at ten million battles a scan per batch would be
    minutes."""
    if engine.dialect.name != "sqlite":
        pytest.skip("EXPLAIN QUERY PLAN is SQLite's")
    import_file(engine, battles_file(tmp_path / "first.jsonl", 20, seed=10))
    issued: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, many: bool) -> None:
        if "battle" in statement and statement.lstrip().upper().startswith(("SELECT", "DELETE", "UPDATE")):
            issued.append((statement, None if many else parameters))

    calls = 0

    def stop() -> None:
        nonlocal calls
        calls += 1
        if calls == 3:  # staged, one merge step done
            raise KeyboardInterrupt

    event.listen(engine, "before_cursor_execute", record)
    try:
        with pytest.raises(KeyboardInterrupt):
            import_file(engine, battles_file(tmp_path / "second.jsonl", 40, seed=11), between_batches=stop)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    with engine.connect() as conn:
        driver = conn.connection.driver_connection
        assert driver is not None
        for lookup in ("import_digest IN", "import_key IN", "COALESCE("):
            found = [(s, p) for s, p in issued if lookup in s]
            assert found, f"no statement with {lookup!r} was issued"
            for statement, parameters in found:
                plan = " / ".join(
                    str(r[-1]) for r in driver.execute("EXPLAIN QUERY PLAN " + statement, parameters or ())
                )
                assert "SCAN b " not in plan + " " and "SCAN battle" not in plan, plan
                assert "ix_battle_import_slot" in plan or "ix_battle_import_key_apart" in plan, plan
