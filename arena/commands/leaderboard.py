"""`arena recompute` and `arena publish`: fitting the published leaderboard from a file or the database.

recompute fits a board from a battles file or the database and writes a snapshot folder anywhere
(nothing is stored); publish fits from the database and stores an immutable snapshot. Both go through
:mod:`arena.publishing`, so they agree byte for byte; `arena snapshots` (:mod:`arena.commands.snapshots`)
reads what was published.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

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
from arena.commands.board_output import (
    SUMMARY_ROWS,
    board_json,
    err,
    out,
    print_result,
    print_style,
    progress_bar,
    summary_table,
)

if TYPE_CHECKING:
    from arena.publishing import FitOptions

__all__ = ["register"]


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
StyleOpt = Annotated[
    str | None,
    typer.Option(
        "--style",
        metavar="FEATURES",
        help="Also a style-controlled board, e.g. 'length,markdown' (features from the stored answers).",
    ),
]
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
    style: str | None = None,
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
    groups = tuple(g.strip() for g in (style or "").split(",") if g.strip())
    try:
        return FitOptions(
            extra=extra,
            method=method,
            n_rounds=bootstrap,
            level=level,
            interval=interval,
            anchor=parse_anchor(anchor),
            random_state=seed,
            style=groups,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--style") from None


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
    style: StyleOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the board and metadata as JSON.")] = False,
    catalog: Annotated[
        Path | None,
        typer.Option(
            "--catalog", exists=True, dir_okay=False, help="Answers for --style when battles lack texts."
        ),
    ] = None,
    annotators: Annotated[
        str | None,
        typer.Option(
            "--annotators",
            help="Database: whose votes, comma-separated labels (e.g. judge:gpt-4o), or 'all' "
            "(default: everyone but the LLM judges of `arena judge`).",
        ),
    ] = None,
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
    from votes.records import InputError
    from votes.sources import battles_from_file

    options = _options(
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
    )
    battles = None
    model_info: dict[str, dict[str, Any]] = {}
    since, until = _utc(since), _utc(until)
    started = time.perf_counter()
    with progress_bar(not as_json) as bar:
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
            narrowed = (language, since, until, models, exclude_models, judge, baseline) != (None,) * 7
            if options.style and (
                narrowed or anony_only or skip_invalid or largest_component or each_component
            ):
                raise typer.BadParameter("--style on a file fits every vote in it; filter the file first")
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
            if options.style:
                try:
                    battles = battles_from_file(source, catalog=catalog, style=True)
                except InputError as exc:
                    raise typer.BadParameter(str(exc), param_hint="--from") from None
                except ValueError as exc:  # a battle without answer texts
                    raise typer.BadParameter(str(exc), param_hint="--style") from None
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
            from arena.publishing import load_model_info, load_votes_with_texts

            engine = open_store(settings_for(database_url))
            try:
                model_info = load_model_info(engine)
                chosen = tuple(a.strip() for a in annotators.split(",")) if annotators else None
                vote_filter = VoteFilter(category, language, since, until, exclude_flagged, chosen)
                counts, digest, battles = load_votes_with_texts(
                    engine, vote_filter, bucket_seconds=options.time_bucket, style=bool(options.style)
                )
            except ValueError as exc:  # no stored vote has answer texts
                raise typer.BadParameter(str(exc), param_hint="--style") from None
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
                "annotators": annotators,
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
                    battles=battles,
                    model_info=model_info,
                )
            except ValueError as exc:  # bad anchor, unknown method, no votes, disconnected comparisons
                err.print(f"[red]error:[/red] {exc}")
                raise typer.Exit(2) from None
            results.append((board, manifest, folder))
        bar.update(fitting, completed=max(options.n_rounds, 1))
    if as_json:
        boards = [board_json(board, manifest.path, manifest.metadata) for board, manifest, _ in results]
        print(boards[0] if len(boards) == 1 else "[" + ", ".join(boards) + "]")  # noqa: T201 - the output
        return
    for board, manifest, folder in results:
        name = (
            origin if len(results) == 1 else f"{origin} ({folder.name}: {', '.join(board.models[:4])}, ...)"
        )
        print_result(board, manifest, seconds=time.perf_counter() - started, source=name)


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
    style: StyleOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print each published board as JSON.")] = False,
) -> None:
    """Recompute from the database and store an immutable snapshot (or one per category/language)."""
    from arena.publishing import SliceSpec, publish_slices, publish_snapshot
    from leaderboard.snapshot import read_snapshot

    settings = settings_for(database_url)
    options = _options(
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
    )
    engine = open_store(settings)
    folder = snapshot_dir or Path(settings.snapshot_dir)
    try:
        with progress_bar(not as_json) as bar:
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
    except ValueError as exc:  # no votes, no answer texts for --style, disconnected comparisons
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
        title = f"published {row.id}: {row.method} on {row.n_votes:,} votes ({row.slice})"
        out.print(summary_table(data.leaderboard, title=title, rows=10 if len(rows) > 1 else SUMMARY_ROWS))
        print_style(data.metadata, Path(row.path))
        out.print(f"  {row.path}  votes sha256 {row.votes_sha256}")


def register(app: typer.Typer) -> None:
    app.command("recompute")(recompute)
    app.command("publish")(publish)
