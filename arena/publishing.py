"""Recompute and publish: the one path from votes (a database or a battles file) to a snapshot folder.

``arena recompute`` (offline, from a file or the database), ``arena publish`` and the admin API all go
through :func:`recompute_snapshot`, so an export recomputed offline gives the same data files, byte for
byte, as the snapshot published from the database with the same options and seed.
"""

from __future__ import annotations

import shutil
import stat
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from leaderboard import compute_leaderboard
from leaderboard.battles import Battles
from leaderboard.data import PairCounts
from leaderboard.dataset_card import CARD_FILE, MODELS_FILE, dataset_card, models_csv
from leaderboard.result import Leaderboard
from leaderboard.snapshot import (
    DATA_FILES,
    PACKAGE,
    SnapshotManifest,
    counts_sha256,
    freeze_snapshot,
    package_version,
    slice_label,
    write_snapshot,
)
from leaderboard.style_board import StyleBoard, compute_style_board, expand_style, style_board_files
from votes.db import read_only, session_scope
from votes.models import Model, Snapshot
from votes.queries import VoteFilter, load_battles, load_pair_counts, votes_sha256
from votes.snapshots import ensure_snapshot_guards, insert_snapshot, vote_slices
from votes.sources import battles_from_store

__all__ = [
    "FitOptions",
    "Progress",
    "SliceSpec",
    "fit_counts",
    "fit_style_board",
    "load_from_database",
    "load_model_info",
    "load_votes_with_texts",
    "publish_slices",
    "publish_snapshot",
    "recompute_snapshot",
]

#: ``progress(done, total)`` after each bootstrap round (or batch of rounds).
Progress = Callable[[int, int], None]

DEFAULT_MIN_SLICE_VOTES = 50
#: Time-weighted fits aggregate votes by day: a vote's weight is that of its day.
TIME_BUCKET_SECONDS = 86_400.0


@dataclass(frozen=True)
class FitOptions:
    """How a leaderboard is fitted; every field ends up in the snapshot's metadata."""

    method: str = "bt"
    n_rounds: int = 1000
    level: float = 0.95
    interval: str = "bootstrap"
    anchor: tuple[str, float] | None = None
    random_state: int = 0
    # Model options of every method (half_life, prior, both_bad, ...), passed through as given.
    extra: Mapping[str, Any] = field(default_factory=dict)
    # Style groups (``length``, ``markdown``, ...) for a second, style-controlled board; empty for none.
    style: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.style:
            expand_style(self.style)  # an unknown name fails here, before any votes are read
        # No rounds means no bootstrap: say so, rather than ask for intervals from zero rounds.
        if self.n_rounds == 0 and self.interval == "bootstrap":
            object.__setattr__(self, "interval", "none")

    @property
    def time_bucket(self) -> float | None:
        """Aggregation by time is needed only for time weights."""
        return TIME_BUCKET_SECONDS if self.extra.get("half_life") else None

    def describe(self) -> dict[str, Any]:
        described = asdict(self)
        described["anchor"] = (
            None if self.anchor is None else {"model": self.anchor[0], "rating": self.anchor[1]}
        )
        described["extra"] = dict(self.extra)
        # The default board's metadata stays as it was before style control existed.
        if self.style:
            described["style"] = list(self.style)
        else:
            del described["style"]
        return described


@dataclass(frozen=True)
class SliceSpec:
    """A category/language board; both None is the overall board."""

    category: str | None = None
    language: str | None = None

    @property
    def label(self) -> str:
        return slice_label(category=self.category, language=self.language)


def fit_counts(counts: PairCounts, options: FitOptions, *, progress: Progress | None = None) -> Leaderboard:
    """Fit a leaderboard with ``options`` (the math lives in :mod:`leaderboard`)."""
    return compute_leaderboard(
        counts,
        method=options.method,
        n_rounds=options.n_rounds,
        level=options.level,
        interval=options.interval,
        anchor=options.anchor,
        random_state=options.random_state,
        progress=progress,
        **dict(options.extra),
    )


def fit_style_board(
    battles: Battles, default: Leaderboard, options: FitOptions, *, progress: Progress | None = None
) -> StyleBoard:
    """The style-controlled board of the same votes, with the same options and seed as ``default``."""
    return compute_style_board(
        battles,
        features=expand_style(options.style),
        default=default,
        method=options.method,
        n_rounds=options.n_rounds,
        level=options.level,
        interval=options.interval,
        anchor=options.anchor,
        random_state=options.random_state,
        progress=progress,
        options=options.extra,
    )


def recompute_snapshot(
    counts: PairCounts,
    out_dir: Path | str,
    *,
    options: FitOptions,
    votes_digest: str | None,
    spec: SliceSpec = SliceSpec(),  # noqa: B008 - frozen, so a shared default is safe
    filters: Mapping[str, Any] | None = None,
    source: str = "database",
    progress: Progress | None = None,
    created_at: datetime | None = None,
    plots: bool = True,
    battles: Battles | None = None,
    model_info: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[Leaderboard, SnapshotManifest]:
    """Fit ``counts`` and write the snapshot folder; the data files depend on counts and options only.

    With ``options.style`` the same votes, one row per vote with their style covariates (``battles``),
    give a second, style-controlled board: its files sit beside the default board's, its covariates'
    coefficients and intervals in ``metadata.json`` under ``style_control``.

    Every snapshot also carries ``models.csv`` (the metadata ``model_info`` knows about each model) and a
    dataset card, ``README.md``, so the folder loads with ``datasets.load_dataset`` and pushes to a hub.
    """
    if counts.n_cells == 0:
        raise ValueError(f"no votes to fit for the {spec.label} board")
    if options.style and (battles is None or battles.features is None):
        raise ValueError("style control needs the votes with their answer texts")
    board = fit_counts(counts, options, progress=progress)
    added: dict[str, Any] = {}
    files: dict[str, bytes] = {}
    if options.style and battles is not None:
        styled = fit_style_board(battles, board, options)
        added["style_control"] = styled.describe()
        files = style_board_files(styled)
    files[MODELS_FILE] = models_csv([board.models[i] for i in board.order()], model_info or {})
    card = {
        "slice": spec.label,
        "n_models": len(board.models),
        "n_votes": int(counts.n_votes) if float(counts.n_votes).is_integer() else counts.n_votes,
        "method": board.method,
        "interval": board.interval,
        "seed": options.random_state,
        "votes_sha256": votes_digest or counts_sha256(counts),
        "package": PACKAGE,
        "package_version": package_version(),
        "parameters": board.parameters,
    }
    files[CARD_FILE] = dataset_card(card, [*DATA_FILES, *files])
    manifest = write_snapshot(
        out_dir,
        board,
        counts,
        votes_sha256=votes_digest,
        created_at=created_at,
        category=spec.category,
        language=spec.language,
        plots=plots,
        extra_metadata={
            "filters": dict(filters or {}),
            "options": options.describe(),
            "source": source,
            **added,
        },
        extra_files=files,
    )
    return board, manifest


def load_model_info(engine: Engine) -> dict[str, dict[str, Any]]:
    """What the store knows about each model (organisation, licence), for ``models.csv``."""
    with Session(read_only(engine)) as session:
        rows = session.exec(select(Model)).all()
    return {m.name: {"organisation": m.organisation, "licence": m.licence} for m in rows}


def load_from_database(
    engine: Engine, vote_filter: VoteFilter, *, bucket_seconds: float | None = None
) -> tuple[PairCounts, str]:
    """Aggregated votes and the sha256 of the same votes, read in one transaction so they agree.

    With ``bucket_seconds`` the votes are read one by one and aggregated by time bucket (time weights);
    otherwise the database aggregates them (``GROUP BY``).
    """
    counts, digest, _ = load_votes_with_texts(engine, vote_filter, bucket_seconds=bucket_seconds)
    return counts, digest


def load_votes_with_texts(
    engine: Engine, vote_filter: VoteFilter, *, bucket_seconds: float | None = None, style: bool = False
) -> tuple[PairCounts, str, Battles | None]:
    """As :func:`load_from_database`, plus (with ``style``) the same votes one per row with the style
    covariates of their answers, read in the same transaction."""
    battles: Battles | None = None
    # A deferred transaction: one consistent snapshot without holding SQLite's write lock meanwhile.
    with read_only(engine).connect() as conn, conn.begin():
        if style:
            battles = battles_from_store(conn, style=True, filters=vote_filter)
        if bucket_seconds is None:
            counts = load_pair_counts(conn, filters=vote_filter)
        else:
            counts = load_battles(conn, filters=vote_filter).counts(bucket_seconds=bucket_seconds)
        digest = votes_sha256(conn, vote_filter)
    # The SQL GROUP BY hands over whole vote counts per cell. If they arrive as "weights", the cells'
    # raw vote numbers would read 1 each and the bootstrap would resample cells instead of votes; the
    # counts *are* the votes, so say so (this keeps a database fit identical to a file fit).
    if counts.votes is not None:
        counts = replace(counts, votes=None)
    return counts, digest, battles


def _filters_dict(vote_filter: VoteFilter) -> dict[str, Any]:
    return {
        "category": vote_filter.category,
        "language": vote_filter.language,
        "since": vote_filter.since.isoformat() if vote_filter.since else None,
        "until": vote_filter.until.isoformat() if vote_filter.until else None,
        "exclude_flagged": vote_filter.exclude_flagged,
    }


def _remove_tree(path: Path) -> None:
    """Remove a (possibly frozen) folder that never became a published snapshot."""
    if not path.exists():
        return
    path.chmod(stat.S_IRWXU)
    for child in path.iterdir():
        child.chmod(stat.S_IRUSR | stat.S_IWUSR)
    shutil.rmtree(path)


def publish_snapshot(
    engine: Engine,
    *,
    snapshot_dir: Path | str,
    options: FitOptions = FitOptions(),  # noqa: B008 - frozen, so a shared default is safe
    category: str | None = None,
    language: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    exclude_flagged: bool = True,
    progress: Progress | None = None,
    created_at: datetime | None = None,
    plots: bool = True,
) -> Snapshot:
    """Recompute from the database and publish: a read-only folder under ``snapshot_dir`` and a row.

    The folder is written under a staging name, frozen (files 0444), moved to its id, and only then
    recorded; if recording fails the folder is removed, so every row has its files and no stray
    folder pretends to be published. Returns the stored (immutable) :class:`Snapshot` row.
    """
    spec = SliceSpec(category=category, language=language)
    vote_filter = VoteFilter(
        category=category, language=language, since=since, until=until, exclude_flagged=exclude_flagged
    )
    counts, digest, battles = load_votes_with_texts(
        engine, vote_filter, bucket_seconds=options.time_bucket, style=bool(options.style)
    )
    root = Path(snapshot_dir)
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".staging-{uuid.uuid4().hex}"
    _, manifest = recompute_snapshot(
        counts,
        staging,
        options=options,
        votes_digest=digest,
        spec=spec,
        filters=_filters_dict(vote_filter),
        source="database",
        progress=progress,
        created_at=created_at or datetime.now(UTC),
        plots=plots,
        battles=battles,
        model_info=load_model_info(engine),
    )
    final = root / manifest.id
    try:
        staging.rename(final)
    except OSError:
        _remove_tree(staging)
        raise
    freeze_snapshot(final)
    manifest = SnapshotManifest(path=final, metadata=manifest.metadata, files=manifest.files)
    try:
        ensure_snapshot_guards(engine)
        with session_scope(engine) as session:
            row = insert_snapshot(session=session, manifest=manifest)
    except BaseException:
        _remove_tree(final)
        raise
    return row


def publish_slices(
    engine: Engine,
    *,
    snapshot_dir: Path | str,
    options: FitOptions = FitOptions(),  # noqa: B008 - frozen, so a shared default is safe
    slices: Sequence[SliceSpec] | None = None,
    min_votes: int = DEFAULT_MIN_SLICE_VOTES,
    exclude_flagged: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    plots: bool = True,
) -> list[Snapshot]:
    """Publish the overall board and one board per category and per language (those with enough votes)."""
    if slices is None:
        with Session(engine) as session:
            found = vote_slices(session=session, min_votes=min_votes)
        slices = [SliceSpec(), *(SliceSpec(category=c, language=lang) for c, lang in found)]
    published: list[Snapshot] = []
    for spec in slices:

        def report(done: int, total: int, label: str = spec.label) -> None:
            if progress is not None:
                progress(label, done, total)

        published.append(
            publish_snapshot(
                engine,
                snapshot_dir=snapshot_dir,
                options=options,
                category=spec.category,
                language=spec.language,
                exclude_flagged=exclude_flagged,
                progress=report,
                plots=plots,
            )
        )
    return published
