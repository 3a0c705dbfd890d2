from __future__ import annotations

from sqlalchemy import func, text
from sqlalchemy.engine import Engine
from sqlmodel import select

from votes.db import is_sqlite, session_scope
from votes.models import Model


def test_engine_settings(engine: Engine) -> None:
    with engine.connect() as conn:
        if is_sqlite(engine):
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        else:
            assert conn.execute(text("SELECT 1")).scalar() == 1


def test_session_scope_rolls_back(engine: Engine) -> None:
    try:
        with session_scope(engine) as session:
            session.add(Model(name="m1"))
            session.flush()
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    with session_scope(engine) as session:
        assert session.exec(select(func.count()).select_from(Model)).one() == 0
