"""`arena convert`: a battles file of any shape `arena import` reads, written as Chatbot Arena battles.

No store is involved: this module imports the battle-file readers and writers (:mod:`votes.files`) and no
database library, so a conversion starts without them.
"""

from __future__ import annotations

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
    SkipInvalidOpt,
    VoteSelection,
    split_format,
    write_report,
)
from arena.cli.options import FormatChoice, examples, file_error, written_format
from votes.files.convert import convert_battles
from votes.files.records import InputError

__all__ = ["register"]


def convert_command(
    source: Annotated[Path, typer.Argument(help="Battles file of any shape `arena import` reads.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Chatbot Arena battles file to write.")],
    fmt: Annotated[
        FormatChoice | None,
        typer.Option("--to", help="File format written (default: from the --out name's suffix, else jsonl)."),
    ] = None,
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
    _, source_format = split_format(shape)
    file_format = written_format(out, fmt, option="--to")
    selection = VoteSelection(
        anony_only=anony_only, models=models, exclude_models=exclude_models, judge=judge
    ).file_filter()
    try:
        report = convert_battles(
            source,
            out,
            fmt=file_format.value,
            source_format=source_format,
            skip_invalid=skip_invalid,
            filters=selection,
            baseline=baseline,
        )
    except InputError as exc:
        typer.echo(file_error(exc), err=True)
        raise typer.Exit(1) from None
    if report.note:
        typer.echo(f"{report.path}: {report.source_format}: {report.note}")
    typer.echo(f"{out}: {report.n_added} battles from {report.n_rows} rows ({file_format.value})")
    if skip_invalid:
        target = write_report(source, report.refused, report_file)
        typer.echo(f"{report.path}: {len(report.refused)} rows refused, listed in {target}")


def register(app: typer.Typer) -> None:
    app.command(
        "convert",
        epilog=examples(
            "arena convert mt_bench_human_judgments.jsonl --out battles.jsonl",
            "arena convert alpaca_eval.json --out battles.parquet --to parquet",
        ),
    )(convert_command)
