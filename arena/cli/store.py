"""The store on the command line: opening it on an up-to-date schema, and the one line a command that
failed on it prints instead of a traceback.

Only what opens a store imports this module (the commands that read or write one, and
:mod:`arena.cli.main` once a command failed), so SQLAlchemy and the store's engine are imported at its
top: a recompute from a file or `arena convert` never loads them. Alembic is imported only where a schema
needs work, or a server database's revision is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

import typer
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import OperationalError

from votes.db import is_sqlite, make_engine, sqlite_file, storage_failure_line
from votes.schema_head import at_newest_revision

if TYPE_CHECKING:
    from arena.settings import Settings

__all__ = ["failure_line", "open_store", "unreachable_line"]


def unreachable_line(url: str | None, exc: BaseException) -> str:
    """One line for a database that cannot be reached: which one (its password hidden) when known, the
    driver's own first line, and what to check."""
    shown = f" {make_url(url).render_as_string(hide_password=True)}" if url else ""
    first = next((line.strip() for line in str(getattr(exc, "orig", exc)).splitlines() if line.strip()), "")
    return (
        f"cannot reach the database{shown}: {first} (check that the server runs, the host, port, user and "
        "password, and that the database exists: `arena db upgrade` makes the schema)"
    )


def _connecting(exc: BaseException) -> bool:
    """Whether a database error happened while connecting (no server, refused, unknown host, a file
    SQLite cannot open), not inside a statement of a connection that worked."""
    text = str(getattr(exc, "orig", exc)).lower()
    return any(
        sign in text
        for sign in (
            "connection refused", "could not connect", "connection failed", "unable to open database",
            "could not translate host", "name or service not known", "password authentication",
        )
    )  # fmt: skip


def failure_line(exc: BaseException) -> str | None:
    """What a command that failed says instead of a traceback, or None to let the error through: a write
    that found no room (:func:`votes.db.storage_failure_line`), or a database that could not be reached."""
    line = storage_failure_line(exc)
    if line is None and isinstance(exc, OperationalError) and _connecting(exc):
        line = unreachable_line(None, exc)
    return line


def _refuse(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def open_store(settings: Settings, *, create: bool = False) -> Engine:
    """An engine on an up-to-date schema: the embedded SQLite store is migrated on the spot; any other
    database must have been upgraded with ``arena db upgrade`` (a clear error otherwise).

    A SQLite file that does not exist is made only by a command that fills a store (``create``: import,
    demo, registering models); any other command says there is no database there and makes nothing, so a
    mistyped path is not answered with an empty board. A database that cannot be reached is one line
    naming it (the password hidden) and what to check."""
    url = settings.database_url
    if is_sqlite(url):
        path = sqlite_file(url)
        if path is not None and not path.exists():
            if not create:
                _refuse(
                    f"no database at {path}: check the path (--database-url or ARENA_DATABASE_URL), or make "
                    "one with `arena db upgrade`, `arena import` or `arena demo`"
                )
            if not path.parent.is_dir():
                _refuse(f"no folder {path.parent} for the database {path}: create it or check the path")
        # checked on an engine of its own, as the upgrade uses its own: the store's engine starts unused
        checked = make_engine(url)
        try:
            current = at_newest_revision(checked)
        finally:
            checked.dispose()
        if not current:
            from votes.migrate import upgrade_database  # Alembic: only when the schema needs work

            upgrade_database(url)
        return make_engine(url)
    from votes.migrate import current_revision, head_revision  # Alembic: a server database's revision

    engine = make_engine(url)
    try:
        revision = current_revision(engine)
    except OperationalError as exc:  # no server, refused, wrong password, no such database
        engine.dispose()
        _refuse(unreachable_line(url, exc))
    except Exception:
        engine.dispose()
        raise
    if revision != head_revision():
        engine.dispose()
        typer.echo(
            f"error: the database schema is at {revision or 'nothing'}, not {head_revision()}; "
            "run `arena db upgrade` first.",
            err=True,
        )
        raise typer.Exit(2)
    return engine
