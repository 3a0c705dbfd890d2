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

from votes.files.records import InputError, RowError

if TYPE_CHECKING:
    from arena.settings import Settings

__all__ = [
    "EXAMPLES_HEADING",
    "DatabaseUrlOption",
    "FormatChoice",
    "echo_failures",
    "examples",
    "file_error",
    "file_read_errors",
    "settings_for",
    "written_format",
]

DatabaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="SQLAlchemy URL of the store (default: ARENA_DATABASE_URL, else sqlite:///arena.db).",
        show_default=False,
    ),
]


#: The heading of the section that ends every command's help (``tests/arena/cli/test_cli_help.py`` checks it).
EXAMPLES_HEADING = "Examples:"


def examples(*lines: str) -> str:
    """A command's Examples, for its ``epilog`` (printed after the options, so the help ends with them):
    one command line each, kept as written (click leaves a paragraph whose first line is a lone ``\\b``
    unwrapped), which ``tests/arena/cli/test_cli_help.py`` parses against the command's own options."""
    return "\n".join(["\b", EXAMPLES_HEADING, *(f"  {line}" for line in lines)])


class FormatChoice(StrEnum):
    """The file formats `arena import`, `arena export` and `arena convert` read and write."""

    jsonl = "jsonl"
    json = "json"
    csv = "csv"
    parquet = "parquet"


def written_format(out: Path, given: FormatChoice | None, *, option: str = "--format") -> FormatChoice:
    """The format a file is written in: the option when given, else the file name's suffix (``.jsonl``,
    ``.json``, ``.csv``, ``.parquet``), else JSON lines. A JSON lines file named ``.parquet`` (what
    `arena export votes --out votes.parquet` wrote before) cannot be read back, so a suffix that names
    another format than the option's is a usage error, and so is ``.gz``: files are written uncompressed."""
    suffix = out.suffix.lower().lstrip(".")
    if suffix == "gz":
        raise typer.BadParameter(
            f"{out}: files are written uncompressed; name it {out.with_suffix('')} and gzip it afterwards",
            param_hint="--out",
        )
    named = FormatChoice(suffix) if suffix in FormatChoice.__members__ else None
    if given is not None and named is not None and given is not named:
        raise typer.BadParameter(
            f"{out} names a {named.value} file, but {option} {given.value} was given", param_hint=option
        )
    return given or named or FormatChoice.jsonl


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


SKIP_HINT = "use --skip-invalid to skip such rows"


def file_error(exc: InputError, *, can_skip: bool = True) -> str:
    """The one line of a file a command refuses: the file, the line or row and what is wrong with it, and,
    when one bad row is at fault and the command can leave such rows out (``can_skip``), how to."""
    hint = f" ({SKIP_HINT}; they are listed in --report)" if can_skip and isinstance(exc, RowError) else ""
    return f"error: {exc}{hint}"


@contextmanager
def file_read_errors(path: Path, *, can_skip: bool = False) -> Iterator[None]:
    """A file refused (:class:`~votes.files.records.InputError`, which names where and why) or unreadable:
    one line on stderr (:func:`file_error`; ``can_skip`` where the command has ``--skip-invalid``) and exit
    status 2, instead of a traceback."""
    try:
        yield
    except InputError as exc:
        typer.echo(file_error(exc, can_skip=can_skip), err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        typer.echo(f"error: {path}: cannot read ({exc.strerror or exc})", err=True)
        raise typer.Exit(2) from None


def settings_for(database_url: str | None = None) -> Settings:
    """Settings from the environment, with ``--database-url`` taking precedence when given."""
    from arena.settings import Settings  # pydantic-settings: a file's recompute reads no settings

    return Settings(database_url=database_url) if database_url else Settings()
