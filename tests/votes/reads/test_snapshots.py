"""The snapshot store on SQLite and PostgreSQL: insert and read only, the database refuses changes."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, select

import votes.reads.snapshots as store
from leaderboard.snapshot.folder import write_snapshot
from tests.factories import handmade_leaderboard, simulated_counts
from votes.db import session_scope
from votes.models import Snapshot


def publish_folder(tmp_path: Path, engine: Engine, *, day: int, category: str | None = None) -> str:
    counts = simulated_counts(n_models=4, n_votes=400, seed=day)
    manifest = write_snapshot(
        tmp_path / f"s{day}",
        handmade_leaderboard(counts),
        counts,
        created_at=datetime(2026, 1, day, tzinfo=UTC),
        category=category,
        plots=False,
    )
    with session_scope(engine) as session:
        store.insert_snapshot(session=session, manifest=manifest)
    return manifest.id


def test_insert_list_latest(engine: Engine, tmp_path: Path) -> None:
    first = publish_folder(tmp_path, engine, day=1)
    second = publish_folder(tmp_path, engine, day=2)
    coding = publish_folder(tmp_path, engine, day=3, category="coding")
    with Session(engine) as session:
        assert [s.id for s in store.list_snapshots(session=session)] == [coding, second, first]
        assert [s.id for s in store.list_snapshots(session=session, slice="all")] == [second, first]
        latest = store.latest_snapshot(session=session)
        assert latest is not None and latest.id == second
        latest_coding = store.latest_snapshot(session=session, slice="category=coding")
        assert latest_coding is not None and latest_coding.id == coding
        assert store.list_slices(session=session) == ["all", "category=coding"]
        row = store.get_snapshot(session=session, snapshot_id=first)
        assert row is not None
        manifest = store.snapshot_manifest(row)
        assert manifest["n_votes"] == 400
        assert "leaderboard.csv" in manifest["files"] and len(manifest["files"]["leaderboard.csv"]) == 64


@pytest.mark.parametrize(
    "statement",
    ["UPDATE snapshot SET method = 'forged'", "DELETE FROM snapshot", "UPDATE snapshot SET n_votes = 0"],
)
def test_database_refuses_changes(engine: Engine, tmp_path: Path, statement: str) -> None:
    publish_folder(tmp_path, engine, day=1)
    with pytest.raises(DBAPIError, match="immutable"), engine.begin() as conn:
        conn.execute(text(statement))
    with Session(engine) as session:
        row = session.exec(select(Snapshot)).one()
        assert row.method == "bt" and row.n_votes == 400


def test_orm_changes_fail_too(engine: Engine, tmp_path: Path) -> None:
    snapshot_id = publish_folder(tmp_path, engine, day=1)
    with pytest.raises(DBAPIError, match="immutable"), session_scope(engine) as session:
        row = session.get(Snapshot, snapshot_id)
        assert row is not None
        row.method = "forged"
    with pytest.raises(DBAPIError, match="immutable"), session_scope(engine) as session:
        row = session.get(Snapshot, snapshot_id)
        session.delete(row)


def test_guards_are_idempotent(engine: Engine) -> None:
    store.ensure_snapshot_guards(engine)
    store.ensure_snapshot_guards(engine)


def test_no_update_or_delete_path_in_the_store() -> None:
    names = {name for name, _ in inspect.getmembers(store, inspect.isfunction)}
    assert not {n for n in names if any(w in n for w in ("update", "delete", "remove", "edit", "replace"))}
