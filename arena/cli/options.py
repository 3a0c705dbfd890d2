"""Command modules of `arena` (see :mod:`arena.cli.main`), and the options they share.

Opening the store is :mod:`arena.cli.store`'s: this module stays light, so a command that needs no store
(a recompute from a file, `arena convert`) imports no database library through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from votes.files.records import InputError

if TYPE_CHECKING:
    from arena.settings import Settings

__all__ = ["DatabaseUrlOption", "FormatChoice", "echo_failures", "file_read_errors", "settings_for"]

DatabaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="SQLAlchemy URL of the store (default: ARENA_DATABASE_URL, else sqlite:///arena.db).",
        show_default=False,
    ),
]


class FormatChoice(StrEnum):
    """The file formats `arena import`, `arena export` and `arena convert` read and write."""

    jsonl = "jsonl"
    json = "json"
    csv = "csv"
    parquet = "parquet"


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


@contextmanager
def file_read_errors(path: Path) -> Iterator[None]:
    """A file refused (:class:`~votes.files.records.InputError`, which names where and why) or unreadable:
    one line on stderr and exit status 2, instead of a traceback."""
    try:
        yield
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        typer.echo(f"error: {path}: cannot read ({exc.strerror or exc})", err=True)
        raise typer.Exit(2) from None


def settings_for(database_url: str | None = None) -> Settings:
    """Settings from the environment, with ``--database-url`` taking precedence when given."""
    from arena.settings import Settings  # pydantic-settings: a file's recompute reads no settings

    return Settings(database_url=database_url) if database_url else Settings()
