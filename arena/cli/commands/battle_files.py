"""Battle files and stored votes on the command line: the shape, filter and format options the commands
share (one definition each), the filters' values as one :class:`VoteSelection` (a battle filter or a filter
on the store), the refused-rows report, and the line that refuses a file.

Light on purpose (typer and the SOURCE_FORMATS table): every command that reads a battles file imports it
for its options, `--help` included, and `arena db upgrade` with them; a filter's own module is imported
when a filter is made. Reading a file for a fit and reading the store are
:mod:`arena.cli.commands.runs.from_file`'s and :mod:`arena.cli.commands.runs.from_store`'s.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from arena.cli.options import FormatChoice
from votes.files.formats import SOURCE_FORMATS, SourceFormat

if TYPE_CHECKING:
    from votes.files.records import FileFormat, Refusal
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
    "IpwOpt",
    "RobustOpt",
    "JudgeOpt",
    "LanguageOpt",
    "LargestOpt",
    "ModelsOpt",
    "ReportOpt",
    "ShapeOpt",
    "SinceOpt",
    "SkipInvalidOpt",
    "UntilOpt",
    "VoteSelection",
    "as_utc",
    "names_of",
    "split_format",
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
IpwOpt = Annotated[
    bool,
    typer.Option(
        "--ipw",
        help="Database: weigh each vote by the inverse of its battle's logged pair probability. Not needed "
        "for unbiased ratings when the model holds (pairs chosen from earlier votes); a guard against its "
        "misspecification that costs precision (docs/pairing-weights.md).",
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


def names_of(value: str | None) -> tuple[str, ...] | None:
    """A comma-separated option as names (None when not given)."""
    if value is None:
        return None
    return tuple(n.strip() for n in value.split(",") if n.strip())


def as_utc(value: datetime | None) -> datetime | None:
    """A time option in UTC: a naive time is read as UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass(frozen=True, kw_only=True)
class VoteSelection:
    """The values of the selection options above as a command gave them: which battles of a file, or which
    stored votes, it reads. A command fills in the options it has; the others keep every vote."""

    category: str | None = None
    language: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    exclude_flagged: bool = True
    annotators: str | None = None
    judge: str | None = None
    anony_only: bool = False
    models: str | None = None
    exclude_models: str | None = None
    source: str | None = None
    first_sight: bool = False
    robust: bool = False
    ipw: bool = False

    @property
    def narrows(self) -> bool:
        """Whether any option but ``exclude_flagged`` is given (that one only keeps out flagged votes)."""
        return self != VoteSelection(exclude_flagged=self.exclude_flagged)

    def file_filter(self) -> BattleFilter:
        """The options a file's battles carry, as a :class:`~votes.files.selection.BattleFilter` (times
        read as UTC)."""
        from votes.files.selection import BattleFilter  # a file's filter: `arena db upgrade` filters none

        return BattleFilter(
            language=self.language,
            since=as_utc(self.since),
            until=as_utc(self.until),
            anony_only=self.anony_only,
            models=names_of(self.models),
            exclude_models=names_of(self.exclude_models) or (),
            judge=self.judge,
        )

    def store_filter(self, flagged_weight: float | None = None) -> VoteFilter:
        """The options as a :class:`~votes.reads.filters.VoteFilter` on the stored votes (times read as
        UTC). ``judge`` is one more annotator label: an imported file's judge is stored as one.
        ``flagged_weight`` is the ``flagged_votes`` setting (``Settings.flagged_down_weight``)."""
        from votes.reads.filters import VoteFilter  # the database stack: only what reads the store calls this

        chosen = names_of(self.annotators)
        if self.judge is not None:
            chosen = (*(chosen or ()), self.judge)
        return VoteFilter(
            category=self.category,
            language=self.language,
            since=as_utc(self.since),
            until=as_utc(self.until),
            exclude_flagged=self.exclude_flagged,
            annotators=chosen or None,
            anony_only=self.anony_only,
            models=names_of(self.models),
            exclude_models=names_of(self.exclude_models) or (),
            source=self.source,
            first_sight=self.first_sight,
            robust=self.robust,
            flagged_weight=flagged_weight,
            ipw=self.ipw,
        )


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


#: What the refusal of one bad row tells a command with ``--skip-invalid`` to do.
def split_format(value: str | None) -> tuple[FileFormat | None, SourceFormat | None]:
    """A ``--format`` value of `arena import` or `arena convert`: a file format (jsonl, json, csv, parquet)
    or a battles shape of the SOURCE_FORMATS table; a usage error otherwise."""
    if value is None:
        return None, None
    if value in FormatChoice.__members__:
        return cast("FileFormat", value), None
    if value in SOURCE_FORMATS:
        return None, value
    raise typer.BadParameter(
        f"{value!r} is neither a file format (jsonl, json, csv, parquet) nor a battles shape "
        f"({', '.join(SOURCE_FORMATS)})",
        param_hint="--format",
    )
