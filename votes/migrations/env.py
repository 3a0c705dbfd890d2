"""Alembic environment: the schema is `SQLModel.metadata` from votes.models; engines come from votes.db.

Run through :func:`votes.migrate.upgrade_database` or ``arena db upgrade``. A caller may hand in an open
connection as ``config.attributes["connection"]``.

The revisions in ``versions/`` branch on the database's name themselves, where SQLite and PostgreSQL
need different statements: they are frozen history (each runs once, against the schema of its day), so
they keep their own statements rather than ask the live dialects (:mod:`votes.dialects`), which may
change.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

import votes.models  # noqa: F401  (registers the tables)
from votes.db import make_engine
from votes.dialects import dialect_of

config = context.config
target_metadata = SQLModel.metadata


def _configure(connection: Connection) -> None:
    by_copy = dialect_of(connection).alters_by_copy
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=by_copy,  # SQLite alters tables by copying them
        compare_type=True,
    )
    # Copying a table that others refer to drops the original, which SQLite refuses while it enforces
    # foreign keys; its documented procedure is to turn enforcement off (only possible outside a
    # transaction, so not on a connection handed in mid-transaction), alter, then check every reference.
    relax = by_copy and not connection.in_transaction()
    if relax:
        _sqlite_pragma(connection, "PRAGMA foreign_keys=OFF")
    try:
        with context.begin_transaction():
            context.run_migrations()
            if relax:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"migration left broken references: {broken[:5]}")
    finally:
        if relax:
            if connection.in_transaction():
                connection.commit()
            _sqlite_pragma(connection, "PRAGMA foreign_keys=ON")


def _sqlite_pragma(connection: Connection, pragma: str) -> None:
    """Run a PRAGMA on the raw SQLite connection, outside any transaction (where SQLite honours it)."""
    raw = connection.connection.dbapi_connection
    if raw is None:
        raise RuntimeError("no DBAPI connection")
    raw.execute(pragma)


def run_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: set sqlalchemy.url or pass a connection")
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            _configure(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
