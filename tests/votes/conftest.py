"""Fixtures of the store suites: real data paths and a second fresh database on the same backend."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url

from votes.db import is_sqlite, make_engine
from votes.migrate import upgrade_database


def small_import_steps(monkeypatch: pytest.MonkeyPatch, *, batch: int, merge: int, alone: int) -> None:
    """Import runs read ``batch`` rows a batch and merge ``merge`` rows a step (``alone`` at most while
    they have the store to themselves), so a small file spans many batches and steps."""
    import votes.imports.files
    import votes.imports.merge_steps

    monkeypatch.setattr(votes.imports.files, "BATCH_ROWS", batch)
    monkeypatch.setattr(votes.imports.merge_steps, "MERGE_ROWS", merge)
    monkeypatch.setattr(votes.imports.merge_steps, "MERGE_ROWS_ALONE", alone)


@pytest.fixture
def fresh_engine(db_url: str, tmp_path: Path) -> Iterator[Callable[[], Engine]]:
    """A factory of engines on further fresh, migrated databases of the same backend as ``db_url``."""
    engines: list[Engine] = []
    databases: list[str] = []
    admin_url = make_url(db_url)

    def make() -> Engine:
        if not engines:
            url = db_url  # the fixture's own fresh database
        elif is_sqlite(db_url):
            url = f"sqlite:///{tmp_path}/extra-{len(engines)}.db"
        else:
            name = f"arena_test_{uuid.uuid4().hex[:12]}"
            admin = make_engine(db_url)
            with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            admin.dispose()
            databases.append(name)
            url = admin_url.set(database=name).render_as_string(hide_password=False)
        upgrade_database(url)
        engine = make_engine(url)
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.dispose()
    if databases:
        admin = make_engine(db_url)
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for name in databases:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def store(fresh_engine: Callable[[], Engine]) -> Engine:
    """A fresh database built by the migrations (not create_all), as a deployment would have it."""
    return fresh_engine()
