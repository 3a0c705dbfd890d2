"""`arena import`, `arena export`, `arena demo` and `arena db upgrade`: data in and out of the store."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from arena.commands import DatabaseUrlOption, open_store, settings_for
from arena.settings import live_config

__all__ = ["register"]


class FormatChoice(StrEnum):
    jsonl = "jsonl"
    json = "json"
    csv = "csv"
    parquet = "parquet"


class KindChoice(StrEnum):
    catalog = "catalog"
    battles = "battles"


class ExportWhat(StrEnum):
    votes = "votes"
    catalog = "catalog"


def import_command(
    files: Annotated[
        list[Path], typer.Argument(help="Catalog or battles files (JSONL, JSON, CSV, Parquet; .gz ok).")
    ],
    fmt: Annotated[
        FormatChoice | None,
        typer.Option("--format", help="File format (default: from the name and content)."),
    ] = None,
    kind: Annotated[
        KindChoice | None, typer.Option("--kind", help="catalog or battles (default: from the columns).")
    ] = None,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Import files, each all-or-nothing in one transaction; importing a file again adds nothing."""
    from votes.io import import_file
    from votes.records import InputError

    settings = settings_for(database_url)
    engine = open_store(settings)
    try:
        for path in files:
            try:
                report = import_file(
                    engine,
                    path,
                    fmt=fmt.value if fmt else None,
                    kind=kind.value if kind else None,
                    elo_config=live_config(settings),
                )
            except InputError as exc:
                typer.echo(f"error: {exc}", err=True)
                typer.echo("nothing was imported from this file.", err=True)
                raise typer.Exit(1) from None
            typer.echo(
                f"{report.path}: {report.kind} ({report.format}), {report.n_rows} rows, "
                f"{report.n_added} added, {report.n_skipped} already present; "
                f"new: {report.n_models_added} models, {report.n_prompts_added} prompts, "
                f"{report.n_outputs_added} outputs ({report.seconds:.2f} s)"
            )
    finally:
        engine.dispose()


def export_command(
    what: Annotated[ExportWhat, typer.Argument(help="votes (Chatbot Arena battles) or catalog.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="File to write.")],
    fmt: Annotated[FormatChoice, typer.Option("--format", help="File format.")] = FormatChoice.jsonl,
    category: Annotated[str | None, typer.Option(help="Votes: only this prompt category.")] = None,
    language: Annotated[str | None, typer.Option(help="Votes: only this language.")] = None,
    exclude_flagged: Annotated[bool, typer.Option(help="Votes: leave out flagged annotators.")] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Export deterministically (export -> import into an empty store -> export gives the same bytes)."""
    from votes.io import export_catalog, export_votes
    from votes.queries import VoteFilter

    engine = open_store(settings_for(database_url))
    try:
        if what is ExportWhat.votes:
            filters = VoteFilter(category=category, language=language, exclude_flagged=exclude_flagged)
            n = export_votes(engine, out, fmt=fmt.value, filters=filters)
        else:
            n = export_catalog(engine, out, fmt=fmt.value)
    finally:
        engine.dispose()
    typer.echo(f"{out}: {n} {what.value} rows ({fmt.value})")


def demo_command(
    votes: Annotated[
        int, typer.Option("--votes", min=0, help="Votes to simulate from the ground truth.")
    ] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the simulation.")] = 0,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Load the built-in demo catalog (fictional models) and simulate votes from known strengths."""
    from votes.demo import load_demo

    settings = settings_for(database_url)
    engine = open_store(settings)
    try:
        summary = load_demo(engine, n_votes=votes, seed=seed, elo_config=live_config(settings))
    finally:
        engine.dispose()
    typer.echo(summary)


db_app = typer.Typer(help="Database schema.", no_args_is_help=True)


@db_app.command("upgrade")
def db_upgrade(database_url: DatabaseUrlOption = None) -> None:
    """Apply pending schema migrations (SQLite is also upgraded automatically on start)."""
    from votes.migrate import upgrade_database

    url = settings_for(database_url).database_url
    revision = upgrade_database(url)
    typer.echo(f"database at revision {revision}")


def register(app: typer.Typer) -> None:
    app.command("import")(import_command)
    app.command("export")(export_command)
    app.command("demo")(demo_command)
    app.add_typer(db_app, name="db")
