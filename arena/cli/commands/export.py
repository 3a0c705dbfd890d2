"""`arena export`: the store's votes, catalog or ledger written to a file, deterministically.

It reads the store through :mod:`votes.reads`, imported at the top; the import machinery, which `arena
import` and `arena demo` load (:mod:`arena.cli.commands.data`), stays out of it.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from arena.cli.options import DatabaseUrlOption, FormatChoice, examples, settings_for, written_format
from arena.cli.store import open_store
from votes.reads.exports import export_catalog, export_votes
from votes.reads.filters import VoteFilter
from votes.reads.ledger import write_ledger

__all__ = ["register"]


class ExportWhat(StrEnum):
    votes = "votes"
    catalog = "catalog"
    ledger = "ledger"


def export_command(
    what: Annotated[
        ExportWhat,
        typer.Argument(
            help="votes (Chatbot Arena battles), catalog, or ledger (the votes as the CSV whose sha256 a "
            "published snapshot records as votes_sha256; --format does not apply)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="File to write.")],
    fmt: Annotated[
        FormatChoice | None,
        typer.Option("--format", help="File format (default: from the --out name's suffix, else jsonl)."),
    ] = None,
    category: Annotated[str | None, typer.Option(help="Votes: only this prompt category.")] = None,
    language: Annotated[str | None, typer.Option(help="Votes: only this language.")] = None,
    exclude_flagged: Annotated[bool, typer.Option(help="Votes: leave out flagged annotators.")] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Export deterministically (export -> import into an empty store -> export gives the same bytes)."""
    file_format = written_format(out, None if what is ExportWhat.ledger else fmt)
    engine = open_store(settings_for(database_url))
    try:
        if what is ExportWhat.ledger:
            filters = VoteFilter(category=category, language=language, exclude_flagged=exclude_flagged)
            n, digest = write_ledger(engine, out, filters=filters)
            typer.echo(f"{out}: {n} votes (ledger CSV), sha256 {digest}")
            return
        if what is ExportWhat.votes:
            filters = VoteFilter(category=category, language=language, exclude_flagged=exclude_flagged)
            n = export_votes(engine, out, fmt=file_format.value, filters=filters)
        else:
            n = export_catalog(engine, out, fmt=file_format.value)
    finally:
        engine.dispose()
    typer.echo(f"{out}: {n} {what.value} rows ({file_format.value})")


def register(app: typer.Typer) -> None:
    app.command(
        "export",
        epilog=examples(
            "arena export votes --out votes.jsonl", "arena export ledger --out votes.csv --category coding"
        ),
    )(export_command)
