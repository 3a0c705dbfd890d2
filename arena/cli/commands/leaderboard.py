"""`arena recompute` and `arena publish`: fitting the published leaderboard from a file or the database.

recompute fits a board from a battles file or the database and writes a snapshot folder anywhere
(nothing is stored); publish fits from the database and stores an immutable snapshot. Both go through
:mod:`arena.publish.publishing`, so they agree byte for byte; `arena snapshots`
(:mod:`arena.cli.commands.snapshots`) reads what was published.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from arena.cli.commands.battle_files import (
    AnnotatorsOpt,
    AnonyOnlyOpt,
    BaselineOpt,
    EachOpt,
    ExcludeModelsOpt,
    FirstSightOpt,
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
    battle_filter,
    database_filter,
    pick_components,
    pick_stored_components,
    read_battle_file,
)
from arena.cli.commands.board_output import (
    SUMMARY_ROWS,
    board_json,
    err,
    out,
    print_agreement,
    print_result,
    print_style,
    progress_bar,
    summary_table,
)
from arena.cli.options import DatabaseUrlOption, open_store, settings_for
from votes.collector import gc_paused

if TYPE_CHECKING:
    from arena.publish.publishing import FitOptions

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
        help="Also a style-controlled board, e.g. 'length,markdown' or 'length,markdown,citations' "
        "(features from the stored answers; length in tokens).",
    ),
]
ClusterOpt = Annotated[
    str,
    typer.Option(
        "--cluster",
        help="Votes are dependent within: annotator, prompt, annotator,prompt, none, or auto"
        " (annotator when the battles name at least 20 judges or annotators).",
    ),
]
CategoryOpt = Annotated[str | None, typer.Option("--category", help="Only prompts of this category.")]
FamilyOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--family",
        metavar="MODEL=FAMILY|FILE.toml",
        help="Model families for the composite's judge self-preference: MODEL=FAMILY (repeatable) or a TOML "
        'file of model = "family" lines (optionally under [families]). A judge takes its model\'s family.',
    ),
]
RectifyOpt = Annotated[
    str | None,
    typer.Option(
        "--rectify",
        help="ppi: with --method composite, human-scale ratings by PPI++ (judges' verdicts rectified by the "
        "human votes on the battles they share; --interval: its sandwich, or a bootstrap over battles).",
    ),
]
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


#: Largest family file read, and the longest model or family name taken.
FAMILY_FILE_BYTES = 1 << 20
FAMILY_NAME_CHARS = 200


def _family_pair(model: str, family: str, where: str) -> tuple[str, str]:
    model, family = model.strip(), family.strip()
    if not model or not family or len(model) > FAMILY_NAME_CHARS or len(family) > FAMILY_NAME_CHARS:
        raise typer.BadParameter(
            f"{where}: expected a model and a family of 1 to {FAMILY_NAME_CHARS} characters",
            param_hint="--family",
        )
    if any(not c.isprintable() for c in model + family):
        raise typer.BadParameter(f"{where}: names must be printable", param_hint="--family")
    return model, family


def parse_families(values: list[str] | None) -> dict[str, str]:
    """``--family`` values -> {model: family}; each is ``MODEL=FAMILY`` or a ``.toml`` file of
    ``model = "family"`` (top level or under ``[families]``). A model given two families is an error."""
    import tomllib

    found: dict[str, str] = {}

    def put(model: str, family: str, where: str) -> None:
        model, family = _family_pair(model, family, where)
        if found.setdefault(model, family) != family:
            raise typer.BadParameter(f"{where}: {model!r} has two families", param_hint="--family")

    for value in values or []:
        if value.lower().endswith(".toml"):
            path = Path(value)
            try:
                with path.open("rb") as fh:
                    raw = fh.read(FAMILY_FILE_BYTES + 1)
            except OSError as exc:
                raise typer.BadParameter(f"{path}: {exc.strerror}", param_hint="--family") from None
            if len(raw) > FAMILY_FILE_BYTES:
                raise typer.BadParameter(
                    f"{path}: larger than {FAMILY_FILE_BYTES} bytes", param_hint="--family"
                )
            try:
                table = tomllib.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise typer.BadParameter(f"{path}: {exc}", param_hint="--family") from None
            table = table.get("families", table) if isinstance(table.get("families"), dict) else table
            for model, family in table.items():
                if not isinstance(family, str):
                    raise typer.BadParameter(
                        f"{path}: {model!r} must map to a family name", param_hint="--family"
                    )
                put(model, family, str(path))
        else:
            model, sep, family = value.rpartition("=")
            if not sep:
                raise typer.BadParameter(
                    f"expected MODEL=FAMILY or a .toml file, got {value!r}", param_hint="--family"
                )
            put(model, family, repr(value))
    return found


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
    families: list[str] | None = None,
    rectify: str | None = None,
) -> FitOptions:
    """Fit options; the model options are passed only when set, so plain BT stays plain."""
    from arena.publish.publishing import FitOptions

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
    family_map = parse_families(families)
    if family_map and method != "composite":
        raise typer.BadParameter("families are for --method composite", param_hint="--family")
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
            families=family_map,
            rectify=rectify or "",
        )
    except ValueError as exc:
        hint = "--rectify" if rectify and "rectif" in str(exc) else "--style"
        raise typer.BadParameter(str(exc), param_hint=hint) from None


def _counts_part(
    path: Path,
    out_dir: Path,
    parts: list[tuple[Path, Any, str | None, Any, Any]],
    bucket_seconds: float | None,
    *,
    narrowed: bool,
) -> None:
    """``recompute --from-counts``: the cells of ``path``, the one part to fit (with the file's sha256)."""
    from votes.files.counts import read_counts
    from votes.files.records import InputError

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
    import numpy as np

    from votes.files.records import InputError
    from votes.reads.annotated import agreement_input_from_file

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
    from leaderboard.bt.clusters import choose_clusters

    try:
        return choose_clusters(battles, counts, cluster)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--cluster") from None


def _check_cluster(cluster: str) -> None:
    """Refuse an unknown ``--cluster`` value before any vote is read."""
    from leaderboard.bt.clusters import parse_cluster

    if cluster.strip().lower() != "auto":
        try:
            parse_cluster(cluster)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--cluster") from None


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
    from arena.publish.drawing import command_line_process
    from arena.publish.publishing import SliceSpec, recompute_snapshot
    from leaderboard.bt.clusters import clustering_record
    from votes.files.records import InputError

    command_line_process()
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
        families=family,
        rectify=rectify,
    )
    _check_cluster(cluster)
    battles = None
    agreement = None
    model_info: dict[str, dict[str, Any]] = {}
    since, until = _utc(since), _utc(until)
    started = time.perf_counter()
    # Batch work on arrays and plain values: the cyclic collector would only walk them (votes.collector).
    with progress_bar(not as_json) as bar, gc_paused():
        reading = bar.add_task("reading votes", total=None)
        # (folder, counts, sha256 of its votes, its votes one per row for style control)
        parts: list[tuple[Path, Any, str | None, Any, Any]] = []
        part_clusters: dict[Path, Any] = {}
        part_sources: dict[Path, Any] = {}
        if options.by_source and (counts_file is not None or largest_component or each_component):
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
                options.time_bucket,
                narrowed=(source, category, language, since, until, models, exclude_models, judge, baseline)
                != (None,) * 9
                or battle_source is not None
                or annotators is not None
                or anony_only
                or first_sight
                or robust
                or skip_invalid
                or largest_component
                or each_component
                or bool(options.style),
            )
            origin = str(counts_file)
            filters: dict[str, Any] = {"format": "counts"}
        elif source is not None:
            if category is not None:
                raise typer.BadParameter("a battles file has no categories; use the database")
            if first_sight:
                raise typer.BadParameter(
                    "a battles file does not say what each annotator saw revealed; use the database",
                    param_hint="--first-sight",
                )
            if robust:
                raise typer.BadParameter(
                    "a battles file has no stored honest weights; use the database", param_hint="--robust"
                )
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
                from votes.reads.sources import battles_from_file

                try:
                    battles = battles_from_file(source, catalog=catalog, style=True)
                except InputError as exc:
                    raise typer.BadParameter(str(exc), param_hint="--from") from None
                except ValueError as exc:  # a battle without answer texts
                    raise typer.BadParameter(str(exc), param_hint="--style") from None
            if options.by_source:
                part_sources[out_dir] = _sources_of_file(source, read.battles.models)
            for k, part in enumerate(components, start=1):
                folder = out_dir / f"component-{k}" if len(components) > 1 else out_dir
                part_counts = part.counts(bucket_seconds=options.time_bucket)
                parts.append((folder, part_counts, read.digest, battles, agreement))
                part_clusters[folder] = _clusters_of(part, part_counts, cluster)
                if cluster.strip().lower() != "none":
                    part_clustering[folder] = clustering_record(part, cluster, part_clusters[folder])
                if len(part.annotator_names) >= 2:  # a file's judge column names its judges
                    part_judges[folder] = part
            origin = str(source)
            filters = {
                **selection.as_metadata(),
                "format": read.source_format,
                "format_note": read.note,
                "largest_component": largest_component,
                "each_component": each_component,
                "refused_rows": len(read.refused),
            }
        else:
            from arena.publish.publishing import filters_metadata, load_board_votes, load_model_info

            if skip_invalid or shape is not None or baseline is not None:
                raise typer.BadParameter("--skip-invalid, --format and --baseline are for a file (--from)")
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
                source=battle_source,
                first_sight=first_sight,
                robust=robust,
                flagged_weight=settings_for(database_url).flagged_down_weight,
            )
            engine = open_store(settings_for(database_url))
            try:
                model_info = load_model_info(engine)
                chosen = pick_stored_components(
                    engine, vote_filter, largest=largest_component, each=each_component
                )
                for number, part_filter, _ in chosen:
                    stored = load_board_votes(engine, part_filter, options, cluster)
                    folder = out_dir / f"component-{number}" if len(chosen) > 1 else out_dir
                    part_sources[folder] = stored.by_source
                    parts.append((folder, stored.counts, stored.digest, stored.battles, stored.agreement))
                    part_clusters[folder] = stored.clusters
                    part_judges[folder] = stored.judges
                    if stored.clustering is not None:
                        part_clustering[folder] = stored.clustering
                    part_flagged[folder] = stored.flagged
            except ValueError as exc:  # no stored vote has answer texts, votes without ids to cluster by
                hint = "--style" if options.style else "--cluster"
                raise typer.BadParameter(str(exc), param_hint=hint) from None
            finally:
                engine.dispose()
            origin = "the database"
            from votes.reads.annotated import source_aware_filter

            # a source-aware board counts and hashes every annotator's votes it fits, judges included
            filters = filters_metadata(source_aware_filter(vote_filter) if options.by_source else vote_filter)
            if largest_component or each_component:
                filters |= {"largest_component": largest_component, "each_component": each_component}
        bar.update(reading, total=1, completed=1)
        fitting = bar.add_task(f"bootstrap ({options.n_rounds} rounds)", total=max(options.n_rounds, 1))

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
                    options=replace(options, cluster=clustered.label if clustered else ""),
                    clusters=clustered,
                    votes_digest=votes_digest,
                    spec=SliceSpec(category=category, language=language),
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
    from arena.publish.early_read import EarlyRead
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
    # The board's read begun in a thread while the fitting stack is imported and the options checked
    # (arena.publish.early_read): a read only, of a store that exists at the newest revision, or nothing.
    early = None
    if not all_slices:
        early = EarlyRead(settings.database_url, vote_filter)
    try:
        from arena.publish.drawing import command_line_process
        from arena.publish.publishing import SliceSpec, publish_slices, publish_snapshot
        from leaderboard.bt.spec import DisconnectedComparisonError
        from leaderboard.snapshot.folder import read_snapshot

        command_line_process()
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
            families=family,
            rectify=rectify,
        )
        _check_cluster(cluster)
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
                        options=options,
                        min_votes=min_votes,
                        exclude_flagged=exclude_flagged,
                        progress=report,
                        cluster=cluster,
                        flagged_weight=settings.flagged_down_weight,
                    )
                else:
                    spec = SliceSpec(category=category, language=language)
                    chosen = pick_stored_components(
                        engine, vote_filter, largest=largest_component, each=each_component, early=early
                    )
                    if early is not None and any(part != vote_filter for _, part, _ in chosen):
                        early.close()  # not the read of these parts; stopped before a child is forked
                        early = None
                    rows = []
                    for k, part_filter, counted in chosen:
                        label = spec.label if k is None else f"{spec.label}, component {k}"

                        def part_progress(done: int, total: int, label: str = label) -> None:
                            report(label, done, total)

                        rows.append(
                            publish_snapshot(
                                engine,
                                snapshot_dir=folder,
                                options=options,
                                vote_filter=part_filter,
                                component=k,
                                progress=part_progress,
                                cluster=cluster,
                                counted=counted,
                                early=early if part_filter == vote_filter else None,
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
            out.print(
                summary_table(data.leaderboard, title=title, rows=10 if len(rows) > 1 else SUMMARY_ROWS)
            )
            print_style(data.metadata, Path(row.path))
            print_agreement(data.metadata)
            out.print(f"  {row.path}  votes sha256 {row.votes_sha256}")
            if part is not None:
                typer.echo(f"  component {part}: {', '.join(sorted(data.leaderboard.models))}")
    finally:
        if early is not None:
            early.close()


def register(app: typer.Typer) -> None:
    app.command("recompute")(recompute)
    app.command("publish")(publish)
