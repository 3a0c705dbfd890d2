"""Command modules of `arena` (see :mod:`arena.cli.main`), and the options they share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:  # the database stack is imported when a store is opened: not by a file's recompute
    from sqlalchemy.engine import Engine

    from arena.settings import Settings

__all__ = ["DatabaseUrlOption", "echo_failures", "open_store", "settings_for", "unreachable_line"]

DatabaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="SQLAlchemy URL of the store (default: ARENA_DATABASE_URL, else sqlite:///arena.db).",
        show_default=False,
    ),
]


#: The pairs (or answers) named under each failure reason before the rest are counted.
FAILURES_NAMED = 3


def _natural(text: str) -> list[str | int]:
    """A sort key that orders the numbers in ``text`` by value."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def echo_failures(failures: Sequence[tuple[str, str]], *, total: int) -> None:
    """Failed requests on standard error, one line per distinct reason: how many of ``total`` failed so,
    and the first few of them (``failures`` holds (what, why) pairs)."""
    by_reason: dict[str, list[str]] = {}
    for what, why in failures:
        by_reason.setdefault(why, []).append(what)
    for why, whats in by_reason.items():
        whats.sort(key=_natural)  # requests finish in any order; the names are listed in one (p2 before p10)
        named = ", ".join(whats[:FAILURES_NAMED])
        more = f" and {len(whats) - FAILURES_NAMED} more" if len(whats) > FAILURES_NAMED else ""
        typer.echo(f"{len(whats)} of {total} requests failed: {why} ({named}{more})", err=True)


def unreachable_line(url: str | None, exc: BaseException) -> str:
    """One line for a database that cannot be reached: which one (its password hidden) when known, the
    driver's own first line, and what to check."""
    from sqlalchemy.engine import make_url  # the database stack only once a store failed to open

    shown = f" {make_url(url).render_as_string(hide_password=True)}" if url else ""
    first = next((line.strip() for line in str(getattr(exc, "orig", exc)).splitlines() if line.strip()), "")
    return (
        f"cannot reach the database{shown}: {first} (check that the server runs, the host, port, user and "
        "password, and that the database exists: `arena db upgrade` makes the schema)"
    )


def settings_for(database_url: str | None = None) -> Settings:
    """Settings from the environment, with ``--database-url`` taking precedence when given."""
    # imported here: pydantic-settings and the live raters' configuration (scipy.special) cost a file's
    # recompute, which reads no settings, a tenth of a second
    from arena.settings import Settings

    return Settings(database_url=database_url) if database_url else Settings()


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
    from sqlalchemy.exc import OperationalError  # the database stack only once a store is opened

    from votes.db import is_sqlite, make_engine, sqlite_file
    from votes.schema_head import at_newest_revision

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
        if not current:  # Alembic (and its import) only when there is work
            from votes.migrate import upgrade_database

            upgrade_database(url)
        return make_engine(url)
    from votes.migrate import current_revision, head_revision

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
