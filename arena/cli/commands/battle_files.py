"""Battle files and stored votes on the command line: the shape and filter options recompute, publish
and evaluate share (one definition each), reading a file with a clear message instead of a traceback, the
refused-rows report, and the graph's parts."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NamedTuple

import typer

from votes.files.formats import SOURCE_FORMATS

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from leaderboard.battles import Battles
    from leaderboard.data import PairCounts
    from votes.files.columns import BattleRead
    from votes.files.records import Refusal
    from votes.files.selection import BattleFilter
    from votes.reads.filters import VoteFilter

__all__ = [
    "AnnotatorsOpt",
    "AnonyOnlyOpt",
    "BaselineOpt",
    "CategoryOpt",
    "EachOpt",
    "ExcludeModelsOpt",
    "FlaggedOpt",
    "FirstSightOpt",
    "RobustOpt",
    "JudgeOpt",
    "LanguageOpt",
    "LargestOpt",
    "ModelsOpt",
    "ReportOpt",
    "ShapeOpt",
    "SinceOpt",
    "SkipInvalidOpt",
    "StoredPart",
    "UntilOpt",
    "battle_filter",
    "database_filter",
    "pick_components",
    "pick_stored_components",
    "read_battle_file",
    "write_report",
]


def source_format(value: str) -> str:
    """A ``--format`` value read against the SOURCE_FORMATS table when the command runs, so a shape added
    to the table is a choice at once; another value is refused naming the choices."""
    if value not in SOURCE_FORMATS:
        raise ValueError(f"{value!r} is not one of {', '.join(repr(name) for name in SOURCE_FORMATS)}.")
    return value


ShapeOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        help="Shape of the battles file (default: from its columns).",
        parser=source_format,
        metavar="<" + "|".join(SOURCE_FORMATS) + ">",
    ),
]
SkipInvalidOpt = Annotated[
    bool,
    typer.Option(
        "--skip-invalid", help="Leave out bad rows (listed in --report) instead of refusing the file."
    ),
]
ReportOpt = Annotated[
    Path | None,
    typer.Option("--report", help="With --skip-invalid: CSV of refused rows (default: <file>.refused.csv)."),
]
AnonyOnlyOpt = Annotated[
    bool, typer.Option("--anony-only", help="Only anonymous battles (as the public leaderboards count).")
]
FirstSightOpt = Annotated[
    bool,
    typer.Option(
        "--first-sight",
        help="Database: only votes where neither answer had been revealed to the annotator by an "
        "earlier vote (see docs/blindness.md).",
    ),
]
RobustOpt = Annotated[
    bool,
    typer.Option(
        "--robust",
        help="Database: weigh each vote by its annotator's honest weight (stored by `arena annotators "
        "--apply`) instead of leaving flagged annotators out.",
    ),
]
ModelsOpt = Annotated[
    str | None, typer.Option("--models", help="Only battles between these models (comma-separated).")
]
ExcludeModelsOpt = Annotated[
    str | None, typer.Option("--exclude-models", help="Leave out battles of these models (comma-separated).")
]
JudgeOpt = Annotated[str | None, typer.Option("--judge", help="Only battles of this judge (annotator).")]
BaselineOpt = Annotated[
    str | None, typer.Option("--baseline", help="arena-hard judgments without a baseline column: its model.")
]
LargestOpt = Annotated[
    bool,
    typer.Option("--largest-component", help="A comparison graph in parts: fit only its largest part."),
]
EachOpt = Annotated[
    bool,
    typer.Option("--each-component", help="A comparison graph in parts: one board per part."),
]
LanguageOpt = Annotated[str | None, typer.Option("--language", help="Only battles in this language.")]
SinceOpt = Annotated[datetime | None, typer.Option("--since", help="Votes at or after this time (UTC).")]
UntilOpt = Annotated[datetime | None, typer.Option("--until", help="Votes before this time (UTC).")]
CategoryOpt = Annotated[str | None, typer.Option("--category", help="Only prompts of this category.")]
FlaggedOpt = Annotated[
    bool,
    typer.Option(
        "--exclude-flagged/--include-flagged",
        help="Leave out flagged annotators' votes (the default for published boards; files have no flags).",
    ),
]
AnnotatorsOpt = Annotated[
    str | None,
    typer.Option(
        "--annotators",
        help="Database: whose votes, comma-separated labels (e.g. judge:gpt-4o), or 'all' "
        "(default: everyone but the LLM judges of `arena judge`).",
    ),
]


def _names(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return tuple(n.strip() for n in value.split(",") if n.strip())


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def battle_filter(
    *,
    language: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    anony_only: bool = False,
    models: str | None = None,
    exclude_models: str | None = None,
    judge: str | None = None,
) -> BattleFilter:
    """The filter options as a :class:`~votes.files.selection.BattleFilter` (times read as UTC)."""
    from votes.files.selection import BattleFilter

    return BattleFilter(
        language=language,
        since=_utc(since),
        until=_utc(until),
        anony_only=anony_only,
        models=_names(models),
        exclude_models=_names(exclude_models) or (),
        judge=judge,
    )


def database_filter(
    *,
    category: str | None = None,
    language: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    exclude_flagged: bool = True,
    annotators: str | None = None,
    judge: str | None = None,
    anony_only: bool = False,
    models: str | None = None,
    exclude_models: str | None = None,
    source: str | None = None,
    first_sight: bool = False,
    robust: bool = False,
    flagged_weight: float | None = None,
) -> VoteFilter:
    """The filter options as a :class:`~votes.reads.filters.VoteFilter` on the stored votes (times read as
    UTC). ``judge`` is one more annotator label: an imported file's judge is stored as one.
    ``flagged_weight`` is the ``flagged_votes`` setting (``Settings.flagged_down_weight``)."""
    from votes.reads.filters import VoteFilter

    chosen = _names(annotators)
    if judge is not None:
        chosen = (*(chosen or ()), judge)
    return VoteFilter(
        category=category,
        language=language,
        since=_utc(since),
        until=_utc(until),
        exclude_flagged=exclude_flagged,
        annotators=chosen or None,
        anony_only=anony_only,
        models=_names(models),
        exclude_models=_names(exclude_models) or (),
        source=source,
        first_sight=first_sight,
        robust=robust,
        flagged_weight=flagged_weight,
    )


class StoredPart(NamedTuple):
    """A part of the stored votes' comparison graph to fit: its number (None when the graph is
    connected), its filter (the part's models), and, for a connected graph, the votes' counts as the
    check read them (None for a part)."""

    number: int | None
    filter: VoteFilter
    counts: PairCounts | None


def pick_stored_components(
    engine: Engine, vote_filter: VoteFilter, *, largest: bool, each: bool
) -> list[StoredPart]:
    """The parts of the stored votes' comparison graph to fit; an error (exit 1) naming the parts when
    the graph is in parts and neither ``largest`` nor ``each`` is asked. Prints what was chosen."""
    from dataclasses import replace

    from arena.publish.board_reads import stored_components

    parts, counts = stored_components(engine, vote_filter)
    if len(parts) <= 1:
        return [StoredPart(None, vote_filter, counts)]
    sizes = "; ".join(f"{k}: {len(p)} models ({', '.join(p[:4])})" for k, p in enumerate(parts, 1))
    if not (largest or each):
        typer.echo(
            f"error: the database: the comparison graph has {len(parts)} parts never compared with each "
            f"other ({sizes}); use --largest-component or --each-component",
            err=True,
        )
        raise typer.Exit(1)  # the data, not the command line, is at fault
    typer.echo(f"the database: the comparison graph has {len(parts)} parts ({sizes})", err=True)
    chosen = parts[:1] if largest else parts
    return [StoredPart(k, replace(vote_filter, models=p), None) for k, p in enumerate(chosen, 1)]


def read_battle_file(
    path: Path,
    *,
    filters: BattleFilter,
    shape: str | None = None,
    skip_invalid: bool = False,
    report: Path | None = None,
    baseline: str | None = None,
    quiet: bool = False,
) -> BattleRead:
    """Read and select a battles file; a bad file is a one-line error naming file, row and reason
    (exit 2). With ``skip_invalid`` the refused rows go to a CSV report and a summary is printed (on
    stderr; ``quiet`` prints only errors, for output that must stay machine-readable)."""
    from votes.files.columns import read_battles
    from votes.files.records import InputError

    try:
        read = read_battles(
            path,
            filters=filters,
            source_format=shape,
            skip_invalid=skip_invalid,
            baseline=baseline,
        )
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        typer.echo(f"error: {path}: cannot read ({exc.strerror or exc})", err=True)
        raise typer.Exit(2) from None
    if not quiet:
        typer.echo(f"{path}: {read.source_format}: {read.note}", err=True)
    if skip_invalid:
        target = report or path.with_name(path.name + ".refused.csv")
        with target.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["file", "where", "reason"])
            for r in read.refused:
                writer.writerow([str(path), r.where, r.reason])
        typer.echo(f"{path}: {len(read.refused)} of {read.n_rows} rows refused, listed in {target}", err=True)
    if len(read.battles) == 0:
        typer.echo(f"error: {path}: no battles left after the filters", err=True)
        raise typer.Exit(2)
    return read


def write_report(path: Path, refused: Sequence[Refusal], report: Path | None = None) -> Path:
    """Write the refused rows of ``path`` (file, where, reason) to ``report`` or
    ``<file>.refused.csv``; returns where."""
    target = report or path.with_name(path.name + ".refused.csv")
    with target.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["file", "where", "reason"])
        for r in refused:
            writer.writerow([str(path), r.where, r.reason])
    return target


def pick_components(battles: Battles, *, largest: bool, each: bool, source: Path | str) -> list[Battles]:
    """The parts of the comparison graph to fit: all of it when connected; else the largest part or
    each part, as asked, or an error (exit 1) naming the parts. Prints what was chosen."""
    from leaderboard.battles import split_components

    parts = split_components(battles)
    if len(parts) == 1:
        return parts
    sizes = ", ".join(f"{len(p.models)} models/{len(p)} battles" for p in parts)
    if not (largest or each):
        typer.echo(
            f"error: {source}: the comparison graph has {len(parts)} parts never compared with each other "
            f"({sizes}); use --largest-component or --each-component",
            err=True,
        )
        raise typer.Exit(1)  # the data, not the command line, is at fault
    typer.echo(f"{source}: the comparison graph has {len(parts)} parts ({sizes})", err=True)
    if largest:
        typer.echo(f"fitting the largest part: {', '.join(parts[0].models[:8])}", err=True)
        return parts[:1]
    return parts
