"""`arena recompute` at work: the votes of a battles file, aggregated cells or the store, fitted and written
as a snapshot folder (nothing is stored).

The command's options and help are :mod:`arena.cli.commands.recompute`'s; its function imports this module
when it runs, so the fitting stack is imported here, at the top. The store is read through
:mod:`arena.cli.commands.runs.from_store`, imported only by a recompute from the store (the database stack),
and the votes of a file with who cast them or their answer texts likewise only where a fit needs them.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import typer

from arena.cli.commands.battle_files import VoteSelection
from arena.cli.commands.board_output import err, progress_bar
from arena.cli.commands.fit_options import FitOptions
from arena.cli.commands.runs.board_report import board_json, print_result
from arena.cli.commands.runs.fit_request import fit_request
from arena.cli.commands.runs.from_file import pick_components, read_battle_file
from arena.cli.options import settings_for
from arena.publish.board_fit import time_bucket
from arena.publish.drawing import command_line_process
from arena.publish.recompute import SliceSpec, recompute_snapshot
from leaderboard.bt.clusters import choose_clusters, clustering_record
from votes.collector import gc_paused
from votes.files.counts import read_counts
from votes.files.records import InputError

__all__ = ["run_recompute"]


def _counts_part(
    path: Path,
    out_dir: Path,
    parts: list[tuple[Path, Any, str | None, Any, Any]],
    bucket_seconds: float | None,
    *,
    narrowed: bool,
) -> None:
    """``recompute --from-counts``: the cells of ``path``, the one part to fit (with the file's sha256)."""
    if narrowed:
        raise typer.BadParameter(
            "--from-counts fits the cells as they are: aggregate only what you want to fit (no --from, "
            "filters, components or --style)",
            param_hint="--from-counts",
        )
    try:
        read = read_counts(path, bucket_seconds=bucket_seconds)
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    parts.append((out_dir, read.counts, read.digest, None, None))


def _sources_of_file(path: Path, models: tuple[str, ...]) -> Any:
    """Every vote of a battles file with who cast it (its ``judge`` column), for ``--method composite``;
    only the models the filters kept."""
    from votes.reads.annotated import agreement_input_from_file  # the database stack: only a composite

    try:
        read = agreement_input_from_file(path)
    except InputError as exc:
        raise typer.BadParameter(str(exc), param_hint="--from") from None
    b = read.battles
    if set(b.models) <= set(models):
        return read
    kept = np.array([m in models for m in b.models])
    rows = np.flatnonzero(kept[b.model_a] & kept[b.model_b])
    new_index = np.cumsum(kept) - 1
    part = b.take(rows)
    narrowed = replace(
        part,
        models=tuple(m for m, k in zip(b.models, kept, strict=True) if k),
        model_a=new_index[part.model_a],
        model_b=new_index[part.model_b],
    )
    return replace(read, battles=narrowed)


def _clusters_of(battles: Any, counts: Any, cluster: str) -> Any:
    """The clusters ``--cluster`` asks for (``auto``: by annotator when the battles name enough), or None."""
    try:
        return choose_clusters(battles, counts, cluster)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--cluster") from None


def run_recompute(
    *,
    out_dir: Path,
    source: Path | None,
    counts_file: Path | None,
    database_url: str | None,
    fit: FitOptions,
    selection: VoteSelection,
    plots: bool,
    as_json: bool,
    catalog: Path | None,
    shape: str | None,
    skip_invalid: bool,
    report_file: Path | None,
    baseline: str | None,
    largest_component: bool,
    each_component: bool,
) -> None:
    """What `arena recompute` does with its options (:func:`arena.cli.commands.recompute.recompute`)."""
    command_line_process()
    request = fit_request(fit)
    battles = None
    agreement = None
    model_info: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    # Batch work on arrays and plain values: the cyclic collector would only walk them (votes.collector).
    with progress_bar(not as_json) as bar, gc_paused():
        reading = bar.add_task("reading votes", total=None)
        # (folder, counts, sha256 of its votes, its votes one per row for style control)
        parts: list[tuple[Path, Any, str | None, Any, Any]] = []
        part_clusters: dict[Path, Any] = {}
        part_sources: dict[Path, Any] = {}
        if request.by_source and (counts_file is not None or largest_component or each_component):
            raise typer.BadParameter(
                "--method composite fits every vote with who cast it: no --from-counts or components",
                param_hint="--method",
            )
        part_judges: dict[Path, Any] = {}  # the judges' votes, for their position terms
        part_clustering: dict[Path, dict[str, Any]] = {}  # what the clustering asked and used, and why
        part_flagged: dict[Path, dict[str, Any] | None] = {}  # the flagged annotators left out, and why
        if counts_file is not None:
            _counts_part(
                counts_file,
                out_dir,
                parts,
                time_bucket(request),
                narrowed=(source, baseline) != (None, None)
                or selection.narrows
                or skip_invalid
                or largest_component
                or each_component
                or bool(request.style),
            )
            origin = str(counts_file)
            filters: dict[str, Any] = {"format": "counts"}
        elif source is not None:
            if selection.category is not None:
                raise typer.BadParameter("a battles file has no categories; use the database")
            if selection.first_sight:
                raise typer.BadParameter(
                    "a battles file does not say what each annotator saw revealed; use the database",
                    param_hint="--first-sight",
                )
            if selection.robust:
                raise typer.BadParameter(
                    "a battles file has no stored honest weights; use the database", param_hint="--robust"
                )
            if selection.ipw:
                raise typer.BadParameter(
                    "a battles file logs no pair probabilities; put inverse-propensity weights in its weight"
                    " column, or use the database",
                    param_hint="--ipw",
                )
            file_filter = selection.file_filter()
            asked = selection.language, selection.since, selection.until, selection.models, selection.judge
            narrowed = (*asked, selection.exclude_models, baseline) != (None,) * 7
            if request.style and (
                narrowed or selection.anony_only or skip_invalid or largest_component or each_component
            ):
                raise typer.BadParameter("--style on a file fits every vote in it; filter the file first")
            read = read_battle_file(
                source,
                filters=file_filter,
                shape=shape,
                skip_invalid=skip_invalid,
                report=report_file,
                baseline=baseline,
                can_skip=not request.style,  # a styled fit reads every row: --skip-invalid is refused
            )
            components = pick_components(
                read.battles, largest=largest_component, each=each_component, source=source
            )
            if request.style:
                from votes.reads.sources import battles_from_file  # the database stack: only with --style

                try:
                    battles = battles_from_file(source, catalog=catalog, style=True)
                except InputError as exc:
                    raise typer.BadParameter(str(exc), param_hint="--from") from None
                except ValueError as exc:  # a battle without answer texts
                    raise typer.BadParameter(str(exc), param_hint="--style") from None
            if request.by_source:
                part_sources[out_dir] = _sources_of_file(source, read.battles.models)
            for k, part in enumerate(components, start=1):
                folder = out_dir / f"component-{k}" if len(components) > 1 else out_dir
                part_counts = part.counts(bucket_seconds=time_bucket(request))
                parts.append((folder, part_counts, read.digest, battles, agreement))
                part_clusters[folder] = _clusters_of(part, part_counts, request.cluster)
                if request.cluster.strip().lower() != "none":
                    part_clustering[folder] = clustering_record(part, request.cluster, part_clusters[folder])
                if len(part.annotator_names) >= 2:  # a file's judge column names its judges
                    part_judges[folder] = part
            origin = str(source)
            filters = {
                **file_filter.as_metadata(),
                "format": read.source_format,
                "format_note": read.note,
                "largest_component": largest_component,
                "each_component": each_component,
                "refused_rows": len(read.refused),
            }
        else:
            from arena.cli.commands.runs import from_store  # the database stack: not for a file

            if skip_invalid or shape is not None or baseline is not None:
                raise typer.BadParameter("--skip-invalid, --format and --baseline are for a file (--from)")
            vote_filter = selection.store_filter(settings_for(database_url).flagged_down_weight)
            model_info, stored_parts = from_store.read_stored_parts(
                out_dir,
                vote_filter,
                request,
                database_url,
                largest=largest_component,
                each=each_component,
            )
            for folder, stored in stored_parts:
                part_sources[folder] = stored.by_source
                parts.append((folder, stored.counts, stored.digest, stored.battles, stored.agreement))
                part_clusters[folder] = stored.clusters
                part_judges[folder] = stored.judges
                if stored.clustering is not None:
                    part_clustering[folder] = stored.clustering
                part_flagged[folder] = stored.flagged
            origin = "the database"
            filters = from_store.stored_filters(vote_filter, request)
            if largest_component or each_component:
                filters |= {"largest_component": largest_component, "each_component": each_component}
        bar.update(reading, total=1, completed=1)
        fitting = bar.add_task(f"bootstrap ({request.n_rounds} rounds)", total=max(request.n_rounds, 1))

        def report(done: int, total: int) -> None:
            bar.update(fitting, completed=done, total=total)

        results = []
        for k, (folder, counts, votes_digest, part_battles, part_agreement) in enumerate(parts, start=1):
            part_filters = dict(filters)
            if len(parts) > 1:
                part_filters["component"] = k
            clustered = part_clusters.get(folder)
            try:
                board, manifest = recompute_snapshot(
                    counts,
                    folder,
                    request=request,
                    clusters=clustered,
                    votes_digest=votes_digest,
                    spec=SliceSpec(category=selection.category, language=selection.language),
                    filters={
                        k: v.isoformat() if isinstance(v, datetime) else v for k, v in part_filters.items()
                    },
                    source="file" if source is not None else "database",
                    progress=report,
                    plots=plots,
                    battles=part_battles,
                    model_info=model_info,
                    agreement=part_agreement,
                    by_source=part_sources.get(folder),
                    judges=part_judges.get(folder),
                    clustering=part_clustering.get(folder),
                    flagged_annotators=part_flagged.get(folder),
                )
            except ValueError as exc:  # bad anchor, unknown method, no votes, disconnected comparisons
                err.print(f"[red]error:[/red] {exc}")
                raise typer.Exit(2) from None
            results.append((board, manifest, folder))
        bar.update(fitting, completed=max(request.n_rounds, 1))
    if as_json:
        boards = [board_json(board, manifest.path, manifest.metadata) for board, manifest, _ in results]
        print(boards[0] if len(boards) == 1 else "[" + ", ".join(boards) + "]")  # noqa: T201 - the output
        return
    for board, manifest, folder in results:
        name = (
            origin if len(results) == 1 else f"{origin} ({folder.name}: {', '.join(board.models[:4])}, ...)"
        )
        print_result(board, manifest, seconds=time.perf_counter() - started, source=name)
