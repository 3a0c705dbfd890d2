"""Engines and sessions from a URL: embedded SQLite (durable, WAL) by default, PostgreSQL (psycopg 3) in
production, each engine made by its dialect (:mod:`votes.dialects`).

SQLite gets `BEGIN IMMEDIATE` for every transaction, so a writer takes the database lock at the start
instead of failing with SQLITE_BUSY half-way through. Work that only reads (pages, fits, publishing) asks
for `read_session`, a deferred transaction: with WAL it sees a consistent snapshot and never waits for, or
holds up, the writers.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session

from votes.dialects import READ_ONLY_OPTION, dialect_of
from votes.dialects.sqlite import SQLITE

__all__ = [
    "make_engine",
    "is_sqlite",
    "session_scope",
    "read_session",
    "read_only",
    "normalise_url",
    "sqlite_file",
    "storage_failure",
    "storage_failure_line",
]


def normalise_url(url: str) -> str:
    """Accept `postgresql://` and `postgres://` and use the psycopg 3 driver for them."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


#: A file write refused for room: no space, quota exceeded, file size limit.
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
#: SQLite's words for a write that found no room; PostgreSQL's SQLSTATE class 53 (insufficient resources).
_SQLITE_NO_ROOM = ("database or disk is full", "disk i/o error")


def storage_failure(exc: BaseException) -> str | None:
    """One line saying why a write found no room (full disk, quota, size limit), or None for any other error.

    Looks through the chain of causes. Only the driver's own message is used, never SQLAlchemy's text of
    the statement, so no row values reach a log or a terminal.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _NO_ROOM:
            where = f": {current.filename}" if current.filename else ""
            return f"{os.strerror(current.errno)}{where}"
        if isinstance(current, DBAPIError) and current.orig is not None:
            driver = current.orig
            message = str(driver.args[0] if driver.args else driver).splitlines()[0]
            if any(words in message.lower() for words in _SQLITE_NO_ROOM):
                return f"the database could not write ({message})"
            if str(getattr(driver, "sqlstate", "") or "").startswith("53"):
                return f"the database server has no room ({message})"
        current = current.__cause__ or current.__context__
    return None


def storage_failure_line(exc: BaseException) -> str | None:
    """What a command or the admin API says when a write found no room (one line, no traceback), or None
    for any other error. Every write is a transaction or a temporary file renamed into place, so nothing
    half-written is left behind."""
    reason = storage_failure(exc)
    if reason is None:
        return None
    return f"{reason}; nothing was written. Free some space and try again."


def is_sqlite(engine_or_url: Engine | str) -> bool:
    url = engine_or_url.url if isinstance(engine_or_url, Engine) else make_url(engine_or_url)
    return url.get_backend_name() == "sqlite"


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite ``url`` names, or None for an in-memory database."""
    return SQLITE.database_file(normalise_url(url))


def make_engine(url: str, *, echo: bool = False, pool_size: int = 10) -> Engine:
    """Create an engine with the store's durability settings, as its dialect makes them
    (:meth:`votes.dialects.Dialect.make_engine`): on SQLite a synced WAL journal and ``BEGIN IMMEDIATE``
    transactions, on PostgreSQL psycopg 3 and a pool of ``pool_size``."""
    url = normalise_url(url)
    return dialect_of(url).make_engine(url, echo=echo, pool_size=pool_size)


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session whose transaction commits on success and rolls back on any error."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def read_only(engine: Engine) -> Engine:
    """The same engine (and pool) with deferred transactions on SQLite: for connections that only read."""
    return engine.execution_options(**{READ_ONLY_OPTION: True})


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """A session for reading only: one consistent snapshot, no write lock taken on SQLite.

    Closing it ends the transaction without a commit, so a write slipped into it by mistake never lands
    (objects read stay usable, detached). On PostgreSQL it is an ordinary session: readers never block
    writers there.
    """
    with Session(read_only(engine), expire_on_commit=False) as session:
        yield session
