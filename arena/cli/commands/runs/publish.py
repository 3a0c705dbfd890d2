"""`arena publish` at work: the board of the stored votes and one per category and language (or the board
a filter asks for, or one per part of the comparison graph) fitted and stored as immutable snapshots, and
printed.

The command's options and help are :mod:`arena.cli.commands.publish`'s; its function imports this module
when it runs, so the fitting stack and the store are imported here, at the top.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from arena.cli.commands.battle_files import VoteSelection
from arena.cli.commands.board_output import SUMMARY_ROWS, err, out, progress_bar, summary_table
from arena.cli.commands.fit_options import FitOptions
from arena.cli.commands.runs.board_report import board_json, interval_text, print_agreement, print_style
from arena.cli.commands.runs.fit_request import fit_request
from arena.cli.commands.runs.from_store import pick_stored_components
from arena.cli.options import settings_for
from arena.cli.store import open_store
from arena.publish.drawing import command_line_process
from arena.publish.snapshots import publish_slices, publish_snapshot
from leaderboard.bt.spec import DisconnectedComparisonError
from leaderboard.snapshot.folder import read_snapshot, slice_label
from leaderboard.snapshot.titles import board_notes, slice_title
from votes.collector import gc_paused
from votes.imports.run_cleanup import clean_dead_runs

__all__ = ["run_publish"]


def run_publish(
    *,
    database_url: str | None,
    snapshot_dir: Path | None,
    fit: FitOptions,
    selection: VoteSelection,
    largest_component: bool,
    each_component: bool,
    slices: bool,
    all_slices: bool,
    min_votes: int,
    min_model_votes: int,
    slice_figures: bool,
    as_json: bool,
) -> None:
    """What `arena publish` does with its options (:func:`arena.cli.commands.publish.publish`)."""
    settings = settings_for(database_url)
    vote_filter = selection.store_filter(settings.flagged_down_weight)
    command_line_process()
    request = fit_request(fit)
    exclude_flagged = selection.exclude_flagged
    filtered = (
        largest_component
        or each_component
        or vote_filter
        != VoteSelection(exclude_flagged=exclude_flagged).store_filter(settings.flagged_down_weight)
    )
    if all_slices:
        if filtered:
            raise typer.BadParameter(
                "--all-slices publishes every category and language of all votes; no filters"
            )
        # kept so that scripts written for it still run; it changes nothing
        err.print("note: --all-slices is the default now (--no-slices publishes the overall board alone)")
    every_board = slices and not filtered
    engine = open_store(settings)
    folder = snapshot_dir or Path(settings.snapshot_dir)
    try:
        clean_dead_runs(engine)  # a crashed import's rows never reach a board
        with progress_bar(not as_json) as bar, gc_paused():  # batch work: see votes.collector
            tasks: dict[str, Any] = {}

            def report(label: str, done: int, total: int) -> None:
                if label not in tasks:
                    tasks[label] = bar.add_task(f"{slice_title(label)}: bootstrap", total=total)
                bar.update(tasks[label], completed=done, total=total)

            if every_board:
                # the graph in parts is an error before anything is read one by one (as for one board)
                pick_stored_components(engine, vote_filter, largest=False, each=False)
                rows = publish_slices(
                    engine,
                    snapshot_dir=folder,
                    request=request,
                    min_votes=min_votes,
                    min_model_votes=min_model_votes,
                    exclude_flagged=exclude_flagged,
                    progress=report,
                    slice_plots=slice_figures,
                    flagged_weight=settings.flagged_down_weight,
                )
            else:
                board_label = slice_label(category=selection.category, language=selection.language)
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
                            min_model_votes=min_model_votes,
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
        title = f"published {row.id}: {row.method} on {row.n_votes:,} votes ({slice_title(row.slice)}{named})"
        provisional = (data.metadata.get("precision") or {}).get("provisional") or ()
        shown = 10 if len(rows) > 1 else SUMMARY_ROWS
        out.print(summary_table(data.leaderboard, title=title, rows=shown, provisional=provisional))
        intervals = interval_text(data.metadata)  # and whether --cluster auto clustered the votes
        if intervals:
            out.print(intervals, soft_wrap=True)
        print_style(data.metadata, Path(row.path))
        print_agreement(data.metadata)
        for note in board_notes(data.metadata):
            out.print(f"  {note}", markup=False)
        out.print(f"  {row.path}  votes sha256 {row.votes_sha256}")
        if part is not None:
            typer.echo(f"  component {part}: {', '.join(sorted(data.leaderboard.models))}")
