"""Merge step sizes: growing while the run writes alone, short again once another connection commits,
halved when a step outlasts its budget. On SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine

import votes.imports.files
import votes.imports.merging
import votes.imports.runs
from tests.factories import row_counts
from tests.votes.conftest import small_import_steps
from tests.votes.imports.test_import_runs import battles_file
from votes.dialects import dialect_of
from votes.imports.files import import_file
from votes.imports.merge_steps import step_ranges
from votes.models import utcnow
from votes.tables import import_created_t, import_row_t, import_run_t, model_t

NONE: frozenset[int] = frozenset()


def _sizes(ranges: list[tuple[int, int]]) -> list[int]:
    return [hi - lo for lo, hi in ranges]


def _walk(engine: Engine, total: int, *, seconds: float, others_at: frozenset[int] = NONE) -> list[int]:
    """Step sizes over ``total`` rows; another connection commits after the steps listed in ``others_at``."""
    ranges: list[tuple[int, int]] = []
    with engine.connect() as mine:
        for lo, hi in step_ranges(mine, total, shortest=10, longest=80, seconds=seconds):
            ranges.append((lo, hi))
            with mine.begin():  # the run's own step: never counts as someone else's commit
                mine.execute(update(model_t).where(model_t.c.id == -1).values(name="x"))
            if len(ranges) - 1 in others_at:
                with engine.begin() as other:
                    row = {"name": f"live-{lo}", "created_at": utcnow(), "active": True}
                    other.execute(model_t.insert().values(**row))
    assert ranges[0][0] == 0 and ranges[-1][1] == total
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))  # contiguous, no overlap
    return _sizes(ranges)


def test_steps_grow_while_the_run_writes_alone(engine: Engine) -> None:
    assert _walk(engine, 400, seconds=60.0) == [10, 20, 40, 80, 80, 80, 80, 10]


def test_another_connections_commit_brings_steps_back_to_the_shortest(engine: Engine) -> None:
    sizes = _walk(engine, 400, seconds=60.0, others_at=frozenset({3}))
    if engine.dialect.name == "sqlite":  # the only writer lock: the live writer may be waiting
        assert sizes[:6] == [10, 20, 40, 80, 10, 20]
    else:  # writers of other rows never wait for a step on PostgreSQL
        assert sizes[:5] == [10, 20, 40, 80, 80]


def test_a_step_over_its_budget_halves_the_next(engine: Engine) -> None:
    assert set(_walk(engine, 100, seconds=0.0)) == {10}  # every step is over a zero budget


def test_an_import_alone_merges_in_fewer_longer_steps(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole import, alone: its merge steps (recorded as it goes) grow from the shortest, and the
    rows are those of an import in short steps (on PostgreSQL, where a run merges beside its staging
    in one transaction, the steps after the staging as the versions before did)."""
    small_import_steps(monkeypatch, batch=40, merge=25, alone=200)
    monkeypatch.setattr(dialect_of(engine), "merges_beside", False)
    reached: list[int] = []
    original = votes.imports.merging.record_merged

    def spy(conn: object, run_id: int, hi: int) -> None:
        reached.append(hi)
        original(conn, run_id, hi)  # type: ignore[arg-type]

    monkeypatch.setattr(votes.imports.runs, "record_merged", spy)
    counts = import_file(engine, battles_file(tmp_path / "alone.jsonl", 600))
    assert counts.n_added == 600
    assert reached[0] == 0  # merging started
    assert [b - a for a, b in zip(reached, reached[1:], strict=False)] == [25, 50, 100, 200, 200, 25]
    assert row_counts(engine)["vote"] == 600
    with engine.connect() as conn:  # the run is gone, its staged rows and progress markers with it
        for table in (import_run_t, import_row_t, import_created_t):
            assert conn.scalar(select(func.count()).select_from(table)) == 0, table.name
