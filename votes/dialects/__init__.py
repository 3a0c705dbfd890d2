"""The storage's dialects: one module per database, behind one interface (:class:`Dialect`).

Everything in the storage that SQLite and PostgreSQL do differently asks the dialect of its connection
(:func:`dialect_of`): engine settings and pragmas, the bulk insert and streamed reads, table locks and
sequences, the import's merge and its steps' commits, the indexes an import sets aside, how times are
read and formatted, the snapshot table's guards, backups. A third database is one more module here,
one entry in :data:`DIALECTS`, and the tests that run on it. The row locks of the live votes are
SQLAlchemy's own ``with_for_update`` (PostgreSQL takes them; SQLite's writer lock already orders the
votes), and the partial indexes name every dialect here (:func:`partial_index`).

The Alembic revisions (:mod:`votes.migrations`) keep their own branches on the database's name: they
are frozen history, written against the schema and databases of their day, and must not change when
this package does.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import TextClause

from votes.dialects.base import READ_ONLY_OPTION, CopyError, Dialect, LockMode
from votes.dialects.postgresql import POSTGRESQL
from votes.dialects.sqlite import SQLITE

__all__ = [
    "DIALECTS",
    "READ_ONLY_OPTION",
    "CopyError",
    "Dialect",
    "LockMode",
    "dialect_named",
    "dialect_of",
    "partial_index",
]

#: Every database the store runs on, by its name.
DIALECTS: dict[str, Dialect] = {dialect.name: dialect for dialect in (SQLITE, POSTGRESQL)}


def dialect_named(name: str) -> Dialect:
    """The dialect of the database called ``name`` (``"sqlite"``, ``"postgresql"``)."""
    try:
        return DIALECTS[name]
    except KeyError:
        known = ", ".join(sorted(DIALECTS))
        raise NotImplementedError(f"the store runs on {known}, not on {name}") from None


def dialect_of(bind: Engine | Connection | Session | URL | str) -> Dialect:
    """The dialect of an engine, a connection, a session, or a (normalised) URL."""
    if isinstance(bind, str):
        return dialect_named(make_url(bind).get_backend_name())
    if isinstance(bind, URL):
        return dialect_named(bind.get_backend_name())
    if isinstance(bind, Session):
        return dialect_named(bind.get_bind().dialect.name)
    return dialect_named(bind.dialect.name)


def partial_index(where: TextClause) -> dict[str, Any]:
    """The options of an index that holds only the rows ``where`` selects, for every dialect."""
    return {f"{name}_where": where for name in DIALECTS}
