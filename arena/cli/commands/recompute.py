"""`arena recompute`: a board fitted from a battles file, aggregated cells or the database, written as a
snapshot folder anywhere (nothing is stored).

It writes through :func:`arena.publish.recompute.recompute_snapshot` as `arena publish`
(:mod:`arena.cli.commands.publish`) does, so an export recomputed offline gives the same data files as the
snapshot published from the store with the same options and seed.

Here are its options and help; what it does is :mod:`arena.cli.commands.runs.recompute`'s, imported when
the command runs, so `arena recompute --help` loads no fitting library.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from arena.cli.commands.battle_files import (
    AnnotatorsOpt,
    AnonyOnlyOpt,
    BaselineOpt,
    CategoryOpt,
    EachOpt,
    ExcludeModelsOpt,
    FirstSightOpt,
    FlaggedOpt,
    IpwOpt,
    JudgeOpt,
    LanguageOpt,
    LargestOpt,
    ModelsOpt,
    ReportOpt,
    RobustOpt,
    ShapeOpt,
    SinceOpt,
    SkipInvalidOpt,
    UntilOpt,
    VoteSelection,
)
from arena.cli.commands.fit_options import (
    AnchorOpt,
    BootstrapOpt,
    BothBadOpt,
    ClusterOpt,
    FamilyOpt,
    FitOptions,
    HalfLifeOpt,
    IntervalOpt,
    LevelOpt,
    MethodOpt,
    PriorOpt,
    RectifyOpt,
    SeedOpt,
    StyleOpt,
)
from arena.cli.options import DatabaseUrlOption, examples

__all__ = ["recompute", "register"]


def recompute(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the snapshot files.")],
    source: Annotated[
        Path | None,
        typer.Option("--from", dir_okay=False, help="Battles file (JSON/JSONL/CSV/Parquet, gz)."),
    ] = None,
    counts_file: Annotated[
        Path | None,
        typer.Option(
            "--from-counts",
            exists=True,
            dir_okay=False,
            help="Aggregated cells instead of votes: model_a, model_b, winner, count[, weight, sided, time] "
            "(Parquet/CSV/JSONL; see docs/counts.md).",
        ),
    ] = None,
    database_url: DatabaseUrlOption = None,
    method: MethodOpt = "bt",
    bootstrap: BootstrapOpt = 1000,
    seed: SeedOpt = 0,
    anchor: AnchorOpt = None,
    level: LevelOpt = 0.95,
    interval: IntervalOpt = "bootstrap",
    half_life: HalfLifeOpt = None,
    prior: PriorOpt = None,
    both_bad: BothBadOpt = "tie",
    category: CategoryOpt = None,
    language: LanguageOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    exclude_flagged: FlaggedOpt = True,
    cluster: ClusterOpt = "auto",
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Draw the figures.")] = True,
    style: StyleOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the board and metadata as JSON.")] = False,
    catalog: Annotated[
        Path | None,
        typer.Option(
            "--catalog", exists=True, dir_okay=False, help="Answers for --style when battles lack texts."
        ),
    ] = None,
    annotators: AnnotatorsOpt = None,
    battle_source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="Database: only battles of this source: site (pre-generated), live (own prompts), import.",
        ),
    ] = None,
    shape: ShapeOpt = None,
    skip_invalid: SkipInvalidOpt = False,
    report_file: ReportOpt = None,
    anony_only: AnonyOnlyOpt = False,
    first_sight: FirstSightOpt = False,
    robust: RobustOpt = False,
    ipw: IpwOpt = False,
    models: ModelsOpt = None,
    exclude_models: ExcludeModelsOpt = None,
    judge: JudgeOpt = None,
    baseline: BaselineOpt = None,
    largest_component: LargestOpt = False,
    each_component: EachOpt = False,
    family: FamilyOpt = None,
    rectify: RectifyOpt = None,
) -> None:
    """Fit the leaderboard from a battles file or the database and write a snapshot folder (not stored).

    A file may be in any shape `arena import` reads (Chatbot Arena, Hugging Face preference sets,
    MT-bench pairwise judgments, arena-hard judgments, AlpacaEval annotations); with --each-component
    every part of a comparison graph in parts gets its own folder, component-1, component-2, ...
    """
    from arena.cli.commands.runs.recompute import run_recompute  # the fitting stack: not for --help

    run_recompute(
        out_dir=out_dir,
        source=source,
        counts_file=counts_file,
        database_url=database_url,
        fit=FitOptions(
            method=method,
            bootstrap=bootstrap,
            seed=seed,
            anchor=anchor,
            level=level,
            interval=interval,
            half_life=half_life,
            prior=prior,
            both_bad=both_bad,
            style=style,
            family=family,
            rectify=rectify,
            cluster=cluster,
        ),
        selection=VoteSelection(
            category=category,
            language=language,
            since=since,
            until=until,
            exclude_flagged=exclude_flagged,
            annotators=annotators,
            judge=judge,
            anony_only=anony_only,
            first_sight=first_sight,
            robust=robust,
            ipw=ipw,
            models=models,
            exclude_models=exclude_models,
            source=battle_source,
        ),
        plots=plots,
        as_json=as_json,
        catalog=catalog,
        shape=shape,
        skip_invalid=skip_invalid,
        report_file=report_file,
        baseline=baseline,
        largest_component=largest_component,
        each_component=each_component,
    )


def register(app: typer.Typer) -> None:
    app.command(
        "recompute",
        epilog=examples(
            "arena recompute --from battles.jsonl.gz --seed 1 --out board/",
            "arena recompute --language de --annotators all --out board-de/",
        ),
    )(recompute)
