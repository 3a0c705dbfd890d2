"""`arena import`, `arena demo` and `arena db upgrade`: data into the store, and its schema.

Import and demo open the store and write through the import machinery (:mod:`votes.imports`), which each
imports when it runs; Alembic is imported only by `arena db upgrade` (and by a store that needs an
upgrade). So none of the three loads what only another needs. Data out of the store is
:mod:`arena.cli.commands.export`'s, and a battles file converted without a store
:mod:`arena.cli.commands.convert`'s.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

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
    VoteSelection,
    split_format,
    write_report,
)
from arena.cli.options import DatabaseUrlOption, examples, file_error, settings_for
from arena.cli.store import open_store
from arena.settings import live_config
from votes.files.formats import SOURCE_FORMATS
from votes.files.records import InputError

__all__ = ["register"]


class KindChoice(StrEnum):
    catalog = "catalog"
    battles = "battles"


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
    from votes.imports.files import import_file  # the import machinery: `arena db upgrade` needs none

    file_format, shape = split_format(fmt)
    selection = VoteSelection(
        since=since,
        until=until,
        anony_only=anony_only,
        models=models,
        exclude_models=exclude_models,
        judge=judge,
    ).file_filter()
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
                typer.echo(file_error(exc), err=True)
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


def demo_command(
    votes: Annotated[
        int, typer.Option("--votes", min=0, help="Votes to simulate from the ground truth.")
    ] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the simulation.")] = 0,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Load the built-in demo catalog (fictional models) and simulate votes from known strengths."""
    from votes.imports.demo import load_demo  # the import machinery: `arena db upgrade` needs none

    settings = settings_for(database_url)
    engine = open_store(settings, create=True)
    try:
        summary = load_demo(engine, n_votes=votes, seed=seed, elo_config=live_config(settings))
    finally:
        engine.dispose()
    typer.echo(summary)


db_app = typer.Typer(help="Database schema.", epilog=examples("arena db upgrade"), no_args_is_help=True)


@db_app.command(
    "upgrade",
    epilog=examples(
        "arena db upgrade", "arena db upgrade --database-url postgresql://arena@db.internal/arena"
    ),
)
def db_upgrade(database_url: DatabaseUrlOption = None) -> None:
    """Apply pending schema migrations (SQLite is also upgraded automatically on start)."""
    from votes.migrate import upgrade_database  # Alembic: only for the schema, not for import or demo

    url = settings_for(database_url).database_url
    revision = upgrade_database(url)
    typer.echo(f"database at revision {revision}")


def register(app: typer.Typer) -> None:
    app.command(
        "import",
        epilog=examples(
            "arena import catalog.jsonl battles.parquet",
            "arena import battles.jsonl.gz --skip-invalid --report refused.csv",
        ),
    )(import_command)
    app.command("demo", epilog=examples("arena demo --votes 500 --seed 1 --database-url sqlite:///demo.db"))(
        demo_command
    )
    app.add_typer(db_app, name="db")
