"""`arena recompute` and `arena publish`: fitting the published leaderboard, and the board's console table.

recompute fits a board from a battles file or the database and writes a snapshot folder anywhere
(nothing is stored); publish fits from the database and stores an immutable snapshot. Both go through
:mod:`arena.publishing`, so they agree byte for byte; `arena snapshots` (:mod:`arena.commands.snapshots`)
reads what was published.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from arena.commands import DatabaseUrlOption, open_store, settings_for
from arena.commands.battle_files import (
    AnonyOnlyOpt,
    BaselineOpt,
    EachOpt,
    ExcludeModelsOpt,
    JudgeOpt,
    LargestOpt,
    ModelsOpt,
    ReportOpt,
    ShapeOpt,
    SkipInvalidOpt,
    battle_filter,
    pick_components,
    read_battle_file,
)

if TYPE_CHECKING:
    from arena.publishing import FitOptions
    from leaderboard.result import Leaderboard
    from leaderboard.snapshot import SnapshotManifest

__all__ = ["register"]

SUMMARY_ROWS = 20
err = Console(stderr=True)
# A pipe or a log file gets a 110-column table rather than rich's 80-column default.
out = Console(width=None if Console().is_terminal else 110)

# Shared option types, so recompute and publish spell their options the same way.
MethodOpt = Annotated[str, typer.Option("--method", help="bt, bt-position, davidson, davidson-position, ...")]
BootstrapOpt = Annotated[int, typer.Option("--bootstrap", min=0, help="Bootstrap rounds (0: no intervals).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed: same votes + same seed = same files.")]
AnchorOpt = Annotated[
    str | None, typer.Option("--anchor", metavar="MODEL=RATING", help="Pin one model's rating.")
]
LevelOpt = Annotated[float, typer.Option("--level", min=0.5, max=0.999, help="Interval level.")]
IntervalOpt = Annotated[str, typer.Option("--interval", help="bootstrap, sandwich or none.")]
HalfLifeOpt = Annotated[
    float | None, typer.Option("--half-life", help="Time weights: half-life in days (votes need times).")
]
PriorOpt = Annotated[
    float | None, typer.Option("--prior", help="Gaussian prior on ratings: standard deviation in Elo points.")
]
BothBadOpt = Annotated[str, typer.Option("--both-bad", help="'tie (bothbad)' votes: tie or exclude.")]
CategoryOpt = Annotated[str | None, typer.Option("--category", help="Only prompts of this category.")]
LanguageOpt = Annotated[str | None, typer.Option("--language", help="Only battles in this language.")]
SinceOpt = Annotated[datetime | None, typer.Option("--since", help="Votes at or after this time (UTC).")]
UntilOpt = Annotated[datetime | None, typer.Option("--until", help="Votes before this time (UTC).")]
FlaggedOpt = Annotated[
    bool,
    typer.Option(
        "--exclude-flagged/--include-flagged",
        help="Leave out flagged annotators' votes (the default for published boards; files have no flags).",
    ),
]


def parse_anchor(value: str | None) -> tuple[str, float] | None:
    """``MODEL=RATING`` -> (model, rating); the model name may itself contain ``=``."""
    if value is None:
        return None
    model, sep, rating = value.rpartition("=")
    try:
        return (model, float(rating)) if sep and model else _bad_anchor(value)
    except ValueError:
        return _bad_anchor(value)


def _bad_anchor(value: str) -> tuple[str, float]:
    raise typer.BadParameter(f"expected MODEL=RATING, got {value!r}", param_hint="--anchor")


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@contextmanager
def progress_bar(enabled: bool = True) -> Iterator[Progress]:
    """A rich progress bar on stderr (hidden when stderr is not a terminal and not forced)."""
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=not enabled,
    )
    with bar:
        yield bar


def summary_table(board: Leaderboard, *, title: str, rows: int = SUMMARY_ROWS) -> Table:
    """The top of the board, one screen high."""
    table = Table(title=title, title_justify="left")
    for name, justify in (
        ("rank", "right"),
        ("model", "left"),
        ("rating", "right"),
        ("interval", "right"),
        ("rank range", "right"),
        ("battles", "right"),
        ("win rate", "right"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    order = board.order()
    for i in order[:rows]:
        table.add_row(
            str(board.rank[i]),
            board.models[i],
            f"{board.rating[i]:.1f}",
            f"{board.ci_low[i]:.1f}-{board.ci_high[i]:.1f}",
            f"{board.rank_low[i]}-{board.rank_high[i]}",
            f"{board.battles[i]:,.0f}",
            f"{board.win_rate[i]:.1%}",
        )
    if len(order) > rows:
        table.add_row("", f"... {len(order) - rows} more in leaderboard.csv", "", "", "", "", "")
    return table


def _print_result(board: Leaderboard, manifest: SnapshotManifest, *, seconds: float, source: str) -> None:
    meta = manifest.metadata
    title = (
        f"{meta['method']} on {meta['n_votes']:,.0f} votes from {source} "
        f"({len(board.models)} models, {meta['slice']}, seed {meta['seed']}, {seconds:.1f} s)"
    )
    out.print(summary_table(board, title=title))
    fitted = meta.get("parameters_fitted") or {}
    for name, value in sorted(fitted.items()):
        low, high = value.get("ci_low"), value.get("ci_high")
        interval = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
        out.print(f"  {name}: {value.get('value'):.3f}{interval}")
    out.print(f"snapshot {meta['id']} in {manifest.path}")
    out.print(f"votes sha256           {meta['votes_sha256']}")
    out.print(f"leaderboard.csv sha256 {manifest.files['leaderboard.csv']}")


def _options(
    method: str,
    bootstrap: int,
    seed: int,
    anchor: str | None,
    level: float,
    interval: str,
    *,
    half_life: float | None = None,
    prior: float | None = None,
    both_bad: str = "tie",
) -> FitOptions:
    """Fit options; the model options are passed only when set, so plain BT stays plain."""
    from arena.publishing import FitOptions

    if both_bad not in ("tie", "exclude"):
        raise typer.BadParameter("expected tie or exclude", param_hint="--both-bad")
    extra: dict[str, Any] = {}
    if half_life is not None:
        extra["half_life"] = half_life * 86_400.0
    if prior is not None:
        extra["prior"] = prior
    if both_bad != "tie":
        extra["both_bad"] = both_bad
    return FitOptions(
        extra=extra,
        method=method,
        n_rounds=bootstrap,
        level=level,
        interval=interval,
        anchor=parse_anchor(anchor),
        random_state=seed,
    )


def recompute(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the snapshot files.")],
    source: Annotated[
        Path | None,
        typer.Option(
            "--from", exists=True, dir_okay=False, help="Battles file (JSON/JSONL/CSV/Parquet, gz)."
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
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Draw the figures.")] = True,
    shape: ShapeOpt = None,
    skip_invalid: SkipInvalidOpt = False,
    report_file: ReportOpt = None,
    anony_only: AnonyOnlyOpt = False,
    models: ModelsOpt = None,
    exclude_models: ExcludeModelsOpt = None,
    judge: JudgeOpt = None,
    baseline: BaselineOpt = None,
    largest_component: LargestOpt = False,
    each_component: EachOpt = False,
) -> None:
    """Fit the leaderboard from a battles file or the database and write a snapshot folder (not stored).

    A file may be in any shape `arena import` reads (Chatbot Arena, Hugging Face preference sets,
    MT-bench pairwise judgments, arena-hard judgments, AlpacaEval annotations); with --each-component
    every part of a comparison graph in parts gets its own folder, component-1, component-2, ...
    """
    from arena.publishing import SliceSpec, recompute_snapshot
    from votes.queries import VoteFilter

    options = _options(
        method, bootstrap, seed, anchor, level, interval, half_life=half_life, prior=prior, both_bad=both_bad
    )
    since, until = _utc(since), _utc(until)
    started = time.perf_counter()
    with progress_bar() as bar:
        reading = bar.add_task("reading votes", total=None)
        parts: list[tuple[Path, Any]] = []
        if source is not None:
            if category is not None:
                raise typer.BadParameter("a battles file has no categories; use the database")
            selection = battle_filter(
                language=language,
                since=since,
                until=until,
                anony_only=anony_only,
                models=models,
                exclude_models=exclude_models,
                judge=judge,
            )
            read = read_battle_file(
                source,
                filters=selection,
                shape=shape,
                skip_invalid=skip_invalid,
                report=report_file,
                baseline=baseline,
            )
            components = pick_components(
                read.battles, largest=largest_component, each=each_component, source=source
            )
            for k, part in enumerate(components, start=1):
                folder = out_dir / f"component-{k}" if len(components) > 1 else out_dir
                parts.append((folder, part.counts(bucket_seconds=options.time_bucket)))
            digest = read.digest
            origin = str(source)
            filters: dict[str, Any] = {
                **selection.as_metadata(),
                "format": read.source_format,
                "format_note": read.note,
                "largest_component": largest_component,
                "each_component": each_component,
                "refused_rows": len(read.refused),
            }
        else:
            from arena.publishing import load_from_database

            engine = open_store(settings_for(database_url))
            try:
                vote_filter = VoteFilter(category, language, since, until, exclude_flagged)
                counts, digest = load_from_database(engine, vote_filter, bucket_seconds=options.time_bucket)
            finally:
                engine.dispose()
            parts.append((out_dir, counts))
            origin = "the database"
            filters = {
                "category": category,
                "language": language,
                "since": since,
                "until": until,
                "exclude_flagged": exclude_flagged,
            }
        bar.update(reading, total=1, completed=1)
        fitting = bar.add_task(f"bootstrap ({options.n_rounds} rounds)", total=max(options.n_rounds, 1))

        def report(done: int, total: int) -> None:
            bar.update(fitting, completed=done, total=total)

        results = []
        for k, (folder, counts) in enumerate(parts, start=1):
            part_filters = dict(filters)
            if len(parts) > 1:
                part_filters["component"] = k
            try:
                board, manifest = recompute_snapshot(
                    counts,
                    folder,
                    options=options,
                    votes_digest=digest,
                    spec=SliceSpec(category=category, language=language),
                    filters={
                        k: v.isoformat() if isinstance(v, datetime) else v for k, v in part_filters.items()
                    },
                    source="file" if source is not None else "database",
                    progress=report,
                    plots=plots,
                )
            except ValueError as exc:  # bad anchor, unknown method, no votes, disconnected comparisons
                err.print(f"[red]error:[/red] {exc}")
                raise typer.Exit(2) from None
            results.append((board, manifest, folder))
        bar.update(fitting, completed=max(options.n_rounds, 1))
    for board, manifest, folder in results:
        name = (
            origin if len(results) == 1 else f"{origin} ({folder.name}: {', '.join(board.models[:4])}, ...)"
        )
        _print_result(board, manifest, seconds=time.perf_counter() - started, source=name)


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
    exclude_flagged: FlaggedOpt = True,
    all_slices: Annotated[
        bool, typer.Option("--all-slices", help="Also one board per category and per language.")
    ] = False,
    min_votes: Annotated[int, typer.Option("--min-votes", help="Smallest slice published.")] = 50,
) -> None:
    """Recompute from the database and store an immutable snapshot (or one per category/language)."""
    from arena.publishing import SliceSpec, publish_slices, publish_snapshot
    from leaderboard.snapshot import read_snapshot

    settings = settings_for(database_url)
    options = _options(
        method, bootstrap, seed, anchor, level, interval, half_life=half_life, prior=prior, both_bad=both_bad
    )
    engine = open_store(settings)
    folder = snapshot_dir or Path(settings.snapshot_dir)
    try:
        with progress_bar() as bar:
            tasks: dict[str, Any] = {}

            def report(label: str, done: int, total: int) -> None:
                if label not in tasks:
                    tasks[label] = bar.add_task(f"{label}: bootstrap", total=total)
                bar.update(tasks[label], completed=done, total=total)

            if all_slices:
                rows = publish_slices(
                    engine,
                    snapshot_dir=folder,
                    options=options,
                    min_votes=min_votes,
                    exclude_flagged=exclude_flagged,
                    progress=report,
                )
            else:
                spec = SliceSpec(category=category, language=language)
                rows = [
                    publish_snapshot(
                        engine,
                        snapshot_dir=folder,
                        options=options,
                        category=category,
                        language=language,
                        exclude_flagged=exclude_flagged,
                        progress=lambda d, t: report(spec.label, d, t),
                    )
                ]
    finally:
        engine.dispose()
    for row in rows:
        board = read_snapshot(row.path).leaderboard
        title = f"published {row.id}: {row.method} on {row.n_votes:,} votes ({row.slice})"
        out.print(summary_table(board, title=title, rows=10 if len(rows) > 1 else SUMMARY_ROWS))
        out.print(f"  {row.path}  votes sha256 {row.votes_sha256}")


def register(app: typer.Typer) -> None:
    app.command("recompute")(recompute)
    app.command("publish")(publish)
