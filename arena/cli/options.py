"""Command modules of `arena` (see :mod:`arena.cli.main`), and the options they share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # the database stack is imported when a store is opened: not by a file's recompute
    from sqlalchemy.engine import Engine

    from arena.settings import Settings

__all__ = ["DatabaseUrlOption", "echo_failures", "open_store", "settings_for"]

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


def settings_for(database_url: str | None = None) -> Settings:
    """Settings from the environment, with ``--database-url`` taking precedence when given."""
    # imported here: pydantic-settings and the live raters' configuration (scipy.special) cost a file's
    # recompute, which reads no settings, a tenth of a second
    from arena.settings import Settings

    return Settings(database_url=database_url) if database_url else Settings()


def open_store(settings: Settings) -> Engine:
    """An engine on an up-to-date schema: the embedded SQLite store is migrated on the spot; any other
    database must have been upgraded with ``arena db upgrade`` (a clear error otherwise)."""
    from votes.db import is_sqlite, make_engine
    from votes.schema_head import at_newest_revision

    url = settings.database_url
    if is_sqlite(url):
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
