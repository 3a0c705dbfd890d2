"""`arena publish`: the board of the stored votes (or one per category and language) fitted and stored as
an immutable snapshot.

The options are recompute's (:mod:`arena.cli.commands.recompute`) and mean the same; the snapshot goes
through :func:`arena.publish.snapshots.publish_snapshot`, and `arena snapshots`
(:mod:`arena.cli.commands.snapshots`) reads what was published.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from arena.cli.commands.battle_files import (
    AnnotatorsOpt,
    AnonyOnlyOpt,
    CategoryOpt,
    EachOpt,
    ExcludeModelsOpt,
    FirstSightOpt,
    FlaggedOpt,
    JudgeOpt,
    LanguageOpt,
    LargestOpt,
    ModelsOpt,
    RobustOpt,
    SinceOpt,
    UntilOpt,
    database_filter,
    pick_stored_components,
)
from arena.cli.commands.board_output import (
    SUMMARY_ROWS,
    board_json,
    err,
    out,
    print_agreement,
    print_style,
    progress_bar,
    summary_table,
)
from arena.cli.commands.fit_options import (
    AnchorOpt,
    BootstrapOpt,
    BothBadOpt,
    ClusterOpt,
    FamilyOpt,
    HalfLifeOpt,
    IntervalOpt,
    LevelOpt,
    MethodOpt,
    PriorOpt,
    RectifyOpt,
    SeedOpt,
    StyleOpt,
    fit_request,
)
from arena.cli.options import DatabaseUrlOption, open_store, settings_for
from votes.collector import gc_paused

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
    models: ModelsOpt = None,
    exclude_models: ExcludeModelsOpt = None,
    largest_component: LargestOpt = False,
    each_component: EachOpt = False,
    all_slices: Annotated[
        bool, typer.Option("--all-slices", help="Also one board per category and per language.")
    ] = False,
    min_votes: Annotated[int, typer.Option("--min-votes", help="Smallest slice published.")] = 50,
    style: StyleOpt = None,
    cluster: ClusterOpt = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print each published board as JSON.")] = False,
    family: FamilyOpt = None,
    rectify: RectifyOpt = None,
) -> None:
    """Recompute from the database and store an immutable snapshot (or one per category/language).

    The filters select the votes as for recompute and are recorded in the snapshot's metadata; with
    --each-component every part of a comparison graph in parts is published as its own snapshot.
    """
    from arena.publish.drawing import command_line_process
    from arena.publish.snapshots import publish_slices, publish_snapshot
    from leaderboard.bt.spec import DisconnectedComparisonError
    from leaderboard.snapshot.folder import read_snapshot, slice_label
    from votes.imports.run_cleanup import clean_dead_runs

    settings = settings_for(database_url)
    vote_filter = database_filter(
        category=category,
        language=language,
        since=since,
        until=until,
        exclude_flagged=exclude_flagged,
        annotators=annotators,
        judge=judge,
        anony_only=anony_only,
        models=models,
        exclude_models=exclude_models,
        first_sight=first_sight,
        robust=robust,
        flagged_weight=settings.flagged_down_weight,
    )
    command_line_process()
    request = fit_request(
        method,
        bootstrap,
        seed,
        anchor,
        level,
        interval,
        half_life=half_life,
        prior=prior,
        both_bad=both_bad,
        style=style,
        families=family,
        rectify=rectify,
        cluster=cluster,
    )
    if all_slices and vote_filter != database_filter(
        exclude_flagged=exclude_flagged, flagged_weight=settings.flagged_down_weight
    ):
        raise typer.BadParameter(
            "--all-slices publishes every category and language of all votes; no filters"
        )
    engine = open_store(settings)
    folder = snapshot_dir or Path(settings.snapshot_dir)
    try:
        clean_dead_runs(engine)  # a crashed import's rows never reach a board
        with progress_bar(not as_json) as bar, gc_paused():  # batch work: see votes.collector
            tasks: dict[str, Any] = {}

            def report(label: str, done: int, total: int) -> None:
                if label not in tasks:
                    tasks[label] = bar.add_task(f"{label}: bootstrap", total=total)
                bar.update(tasks[label], completed=done, total=total)

            if all_slices:
                rows = publish_slices(
                    engine,
                    snapshot_dir=folder,
                    request=request,
                    min_votes=min_votes,
                    exclude_flagged=exclude_flagged,
                    progress=report,
                    flagged_weight=settings.flagged_down_weight,
                )
            else:
                board_label = slice_label(category=category, language=language)
                chosen = pick_stored_components(
                    engine, vote_filter, largest=largest_component, each=each_component
                )
                rows = []
                for k, part_filter, counted in chosen:
                    label = board_label if k is None else f"{board_label}, component {k}"

                    def part_progress(done: int, total: int, label: str = label) -> None:
                        report(label, done, total)

                    rows.append(
                        publish_snapshot(
                            engine,
                            snapshot_dir=folder,
                            request=request,
                            vote_filter=part_filter,
                            component=k,
                            progress=part_progress,
                            counted=counted,
                        )
                    )
    except DisconnectedComparisonError as exc:
        # One line (no wrapping), exit 1, and how to get a board for each part.
        typer.echo(
            f"error: {exc}. No common scale exists; publish each part as its own snapshot with "
            "--each-component, or only the largest part with --largest-component.",
            err=True,
        )
        raise typer.Exit(1) from None
    except ValueError as exc:  # no votes, no answer texts for --style, no ids to cluster by
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    finally:
        engine.dispose()
    if as_json:
        import json

        boards = [
            json.loads(board_json(d.leaderboard, Path(d.path), d.metadata))
            for d in map(read_snapshot, [r.path for r in rows])
        ]
        print(json.dumps(boards))  # noqa: T201 - the command's output
        return
    for row in rows:
        data = read_snapshot(row.path)
        part = data.metadata.get("filters", {}).get("component")
        named = "" if part is None else f", component {part}"
        title = f"published {row.id}: {row.method} on {row.n_votes:,} votes ({row.slice}{named})"
        out.print(summary_table(data.leaderboard, title=title, rows=10 if len(rows) > 1 else SUMMARY_ROWS))
        print_style(data.metadata, Path(row.path))
        print_agreement(data.metadata)
        out.print(f"  {row.path}  votes sha256 {row.votes_sha256}")
        if part is not None:
            typer.echo(f"  component {part}: {', '.join(sorted(data.leaderboard.models))}")


def register(app: typer.Typer) -> None:
    app.command("publish")(publish)
