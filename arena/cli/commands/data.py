"""`arena import`, `arena export`, `arena demo` and `arena db upgrade`: data in and out of the store."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from arena.cli.commands.battle_files import (
    AnonyOnlyOpt,
    BaselineOpt,
    ExcludeModelsOpt,
    JudgeOpt,
    ModelsOpt,
    ReportOpt,
    SinceOpt,
    SkipInvalidOpt,
    UntilOpt,
    battle_filter,
    write_report,
)
from arena.cli.options import DatabaseUrlOption, open_store, settings_for
from arena.settings import live_config
from votes.files.formats import SOURCE_FORMATS, SourceFormat

if TYPE_CHECKING:
    from votes.files.records import FileFormat

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
    ledger = "ledger"


def import_command(
    files: Annotated[
        list[Path], typer.Argument(help="Catalog or battles files (JSONL, JSON, CSV, Parquet; .gz ok).")
    ],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help=f"File format (jsonl, json, csv, parquet) or battles shape ({', '.join(SOURCE_FORMATS)}); "
            "default: from the name, content and columns. Repeat to give both.",
        ),
    ] = None,
    kind: Annotated[
        KindChoice | None, typer.Option("--kind", help="catalog or battles (default: from the columns).")
    ] = None,
    database_url: DatabaseUrlOption = None,
    skip_invalid: SkipInvalidOpt = False,
    report_file: ReportOpt = None,
    anony_only: AnonyOnlyOpt = False,
    models: ModelsOpt = None,
    exclude_models: ExcludeModelsOpt = None,
    judge: JudgeOpt = None,
    baseline: BaselineOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    max_expanded: Annotated[
        int | None,
        typer.Option(
            "--max-expanded-bytes",
            min=1,
            help="Most bytes a gzipped file may expand to (default: ARENA_MAX_EXPANDED_BYTES, 1 GiB).",
        ),
    ] = None,
) -> None:
    """Import files, each all-or-nothing in one transaction; importing a file again adds nothing.

    With --skip-invalid the valid rows are imported and the refused ones listed in a report file.
    """
    from votes.files.records import InputError
    from votes.imports.files import import_file

    file_format, shape = _split_format(fmt)
    selection = battle_filter(
        since=since,
        until=until,
        anony_only=anony_only,
        models=models,
        exclude_models=exclude_models,
        judge=judge,
    )
    settings = settings_for(database_url)
    engine = open_store(settings, create=True)
    try:
        for path in files:
            try:
                report = import_file(
                    engine,
                    path,
                    fmt=file_format,
                    kind=kind.value if kind else None,
                    elo_config=live_config(settings),
                    source_format=shape,
                    skip_invalid=skip_invalid,
                    filters=selection,
                    baseline=baseline,
                    max_expanded=max_expanded if max_expanded is not None else settings.max_expanded_bytes,
                )
            except InputError as exc:
                typer.echo(f"error: {exc}", err=True)
                typer.echo("nothing was imported from this file.", err=True)
                raise typer.Exit(1) from None
            if report.note:
                typer.echo(f"{report.path}: {report.source_format}: {report.note}")
            typer.echo(
                f"{report.path}: {report.kind} ({report.format}), {report.n_rows} rows, "
                f"{report.n_added} added, {report.n_skipped} already present; "
                f"new: {report.n_models_added} models, {report.n_prompts_added} prompts, "
                f"{report.n_outputs_added} outputs ({report.seconds:.2f} s)"
            )
            for new, existing in report.name_collisions:
                typer.echo(
                    f"{report.path}: warning: new model {new!r} differs only in case from {existing!r}"
                )
            if report.n_filtered:
                typer.echo(f"{report.path}: {report.n_filtered} battles left out by the filters")
            if skip_invalid:
                target = write_report(path, report.refused, report_file if len(files) == 1 else None)
                typer.echo(f"{report.path}: {len(report.refused)} rows refused, listed in {target}")
    finally:
        engine.dispose()


def _split_format(value: str | None) -> tuple[FileFormat | None, SourceFormat | None]:
    if value is None:
        return None, None
    if value in FormatChoice.__members__:
        return cast("FileFormat", value), None
    if value in SOURCE_FORMATS:
        return None, value
    raise typer.BadParameter(
        f"{value!r} is neither a file format (jsonl, json, csv, parquet) nor a battles shape "
        f"({', '.join(SOURCE_FORMATS)})",
        param_hint="--format",
    )


def export_command(
    what: Annotated[
        ExportWhat,
        typer.Argument(
            help="votes (Chatbot Arena battles), catalog, or ledger (the votes as the CSV whose sha256 a "
            "published snapshot records as votes_sha256; --format does not apply)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="File to write.")],
    fmt: Annotated[FormatChoice, typer.Option("--format", help="File format.")] = FormatChoice.jsonl,
    category: Annotated[str | None, typer.Option(help="Votes: only this prompt category.")] = None,
    language: Annotated[str | None, typer.Option(help="Votes: only this language.")] = None,
    exclude_flagged: Annotated[bool, typer.Option(help="Votes: leave out flagged annotators.")] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Export deterministically (export -> import into an empty store -> export gives the same bytes)."""
    from votes.reads.exports import export_catalog, export_votes
    from votes.reads.filters import VoteFilter
    from votes.reads.ledger import write_ledger

    engine = open_store(settings_for(database_url))
    try:
        if what is ExportWhat.ledger:
            filters = VoteFilter(category=category, language=language, exclude_flagged=exclude_flagged)
            n, digest = write_ledger(engine, out, filters=filters)
            typer.echo(f"{out}: {n} votes (ledger CSV), sha256 {digest}")
            return
        if what is ExportWhat.votes:
            filters = VoteFilter(category=category, language=language, exclude_flagged=exclude_flagged)
            n = export_votes(engine, out, fmt=fmt.value, filters=filters)
        else:
            n = export_catalog(engine, out, fmt=fmt.value)
    finally:
        engine.dispose()
    typer.echo(f"{out}: {n} {what.value} rows ({fmt.value})")


def convert_command(
    source: Annotated[Path, typer.Argument(help="Battles file of any shape `arena import` reads.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Chatbot Arena battles file to write.")],
    fmt: Annotated[FormatChoice, typer.Option("--to", help="File format written.")] = FormatChoice.jsonl,
    shape: Annotated[
        str | None, typer.Option("--format", help="Shape of the input (default: from its columns).")
    ] = None,
    skip_invalid: SkipInvalidOpt = False,
    report_file: ReportOpt = None,
    anony_only: AnonyOnlyOpt = False,
    models: ModelsOpt = None,
    exclude_models: ExcludeModelsOpt = None,
    judge: JudgeOpt = None,
    baseline: BaselineOpt = None,
) -> None:
    """Write a battles file as Chatbot Arena battles, weights and unknown sides kept (no database)."""
    from votes.files.convert import convert_battles
    from votes.files.records import InputError

    _, source_format = _split_format(shape)
    selection = battle_filter(
        anony_only=anony_only, models=models, exclude_models=exclude_models, judge=judge
    )
    try:
        report = convert_battles(
            source,
            out,
            fmt=fmt.value,
            source_format=source_format,
            skip_invalid=skip_invalid,
            filters=selection,
            baseline=baseline,
        )
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if report.note:
        typer.echo(f"{report.path}: {report.source_format}: {report.note}")
    typer.echo(f"{out}: {report.n_added} battles from {report.n_rows} rows ({fmt.value})")
    if skip_invalid:
        target = write_report(source, report.refused, report_file)
        typer.echo(f"{report.path}: {len(report.refused)} rows refused, listed in {target}")


def demo_command(
    votes: Annotated[
        int, typer.Option("--votes", min=0, help="Votes to simulate from the ground truth.")
    ] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the simulation.")] = 0,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Load the built-in demo catalog (fictional models) and simulate votes from known strengths."""
    from votes.imports.demo import load_demo

    settings = settings_for(database_url)
    engine = open_store(settings, create=True)
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
    app.command("convert")(convert_command)
    app.command("demo")(demo_command)
    app.add_typer(db_app, name="db")
