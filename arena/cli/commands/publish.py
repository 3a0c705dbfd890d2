"""`arena publish`: the board of the stored votes and one per category and language, fitted and stored as
immutable snapshots.

The options are recompute's (:mod:`arena.cli.commands.recompute`) and mean the same; the snapshot goes
through :func:`arena.publish.snapshots.publish_snapshot`, and `arena snapshots`
(:mod:`arena.cli.commands.snapshots`) reads what was published. Here are its options and help; what it
does is :mod:`arena.cli.commands.runs.publish`'s, imported when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from arena.cli.commands.battle_files import (
    AnnotatorsOpt,
    AnonyOnlyOpt,
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
    RobustOpt,
    SinceOpt,
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
from leaderboard.data import FEW_VOTES

__all__ = ["publish", "register"]


def publish(
    database_url: DatabaseUrlOption = None,
    snapshot_dir: Annotated[
        Path | None, typer.Option("--snapshot-dir", help="Default: ARENA_SNAPSHOT_DIR.")
    ] = None,
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
    annotators: AnnotatorsOpt = None,
    judge: JudgeOpt = None,
    anony_only: AnonyOnlyOpt = False,
    first_sight: FirstSightOpt = False,
    robust: RobustOpt = False,
    ipw: IpwOpt = False,
    models: ModelsOpt = None,
    exclude_models: ExcludeModelsOpt = None,
    largest_component: LargestOpt = False,
    each_component: EachOpt = False,
    slices: Annotated[
        bool,
        typer.Option(
            "--slices/--no-slices",
            help="Also one board per category and per language (the default without filters); "
            "--no-slices publishes the overall board alone.",
        ),
    ] = True,
    all_slices: Annotated[
        bool, typer.Option("--all-slices", hidden=True, help="Deprecated: the default now.")
    ] = False,
    min_votes: Annotated[
        int, typer.Option("--min-votes", min=1, help="Fewest votes a category or language board needs.")
    ] = 50,
    min_model_votes: Annotated[
        int,
        typer.Option(
            "--min-model-votes",
            min=0,
            help="Fewest votes a model needs in a category or language to be on its board (the others "
            "are left off, with a note).",
        ),
    ] = FEW_VOTES,
    slice_figures: Annotated[
        bool,
        typer.Option("--slice-figures", help="Draw the figures of the category and language boards too."),
    ] = False,
    style: StyleOpt = None,
    cluster: ClusterOpt = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print each published board as JSON.")] = False,
    family: FamilyOpt = None,
    rectify: RectifyOpt = None,
) -> None:
    """Recompute from the database and store immutable snapshots: the overall board and one per category
    and language, from one read of the votes.

    The filters select the votes as for recompute and are recorded in the snapshot's metadata; a filtered
    publish makes that one board (--category coding: the coding board). With --each-component every part
    of a comparison graph in parts is published as its own snapshot.
    """
    from arena.cli.commands.runs.publish import run_publish  # the fitting stack: not for --help

    run_publish(
        database_url=database_url,
        snapshot_dir=snapshot_dir,
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
        ),
        largest_component=largest_component,
        each_component=each_component,
        slices=slices,
        all_slices=all_slices,
        min_votes=min_votes,
        min_model_votes=min_model_votes,
        slice_figures=slice_figures,
        as_json=as_json,
    )


def register(app: typer.Typer) -> None:
    app.command(
        "publish",
        epilog=examples(
            "arena publish --bootstrap 1000 --seed 1", "arena publish --all-slices --min-votes 200"
        ),
    )(publish)
