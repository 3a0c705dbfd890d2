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


def test_read_session_does_not_block_writers(tmp_path: object) -> None:
    """A long read (publishing hashes every vote) must not hold SQLite's write lock."""
    from votes.db import make_engine, read_session

    eng = make_engine(f"sqlite:///{tmp_path}/r.db")
    from sqlmodel import SQLModel

    SQLModel.metadata.create_all(eng)
    with read_session(eng) as reader:
        assert reader.exec(select(func.count()).select_from(Model)).one() == 0
        # While the read transaction is open, a writer commits at once (busy timeout not needed).
        writer_engine = make_engine(f"sqlite:///{tmp_path}/r.db")
        with writer_engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA busy_timeout=0")
            conn.exec_driver_sql("INSERT INTO model (name, active, created_at) VALUES ('w', 1, '2026-01-01')")
            conn.commit()
        writer_engine.dispose()
        # The reader keeps its snapshot.
        assert reader.exec(select(func.count()).select_from(Model)).one() == 0
    with read_session(eng) as reader:
        assert reader.exec(select(func.count()).select_from(Model)).one() == 1
    eng.dispose()


def test_default_session_takes_write_lock(tmp_path: object) -> None:
    """Ordinary sessions start with BEGIN IMMEDIATE: a second writer waits instead of failing mid-way."""
    import sqlite3

    from votes.db import make_engine

    eng = make_engine(f"sqlite:///{tmp_path}/w.db")
    from sqlmodel import SQLModel

    SQLModel.metadata.create_all(eng)
    with session_scope(eng) as session:
        session.exec(select(func.count()).select_from(Model)).one()
        other = sqlite3.connect(f"{tmp_path}/w.db", timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            raise AssertionError("second writer got the lock while a session held it")
        except sqlite3.OperationalError as exc:
            assert "locked" in str(exc)
        finally:
            other.close()
    eng.dispose()
