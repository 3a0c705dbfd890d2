"""Published snapshots: the board of the stored votes written, frozen, moved to its id and recorded.

:func:`publish_snapshot` is `arena publish` and the admin API's publish: the votes read once
(:mod:`arena.publish.board_reads`), the board fitted (:mod:`arena.publish.board_fit`; before the votes
are read one by one when nothing read then can change it, so its figures are drawn meanwhile), the folder
written through :func:`arena.publish.recompute.recompute_snapshot` under a staging name
(:mod:`arena.publish.staging`), frozen, renamed and only then recorded. :func:`publish_slices` publishes
the overall board and one per category and language.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session

from arena.publish.board_fit import FittedBoard, Progress, fit_board
from arena.publish.board_reads import StoredVotes, filters_metadata, load_board_votes, load_model_info
from arena.publish.drawing import PlotDrawing
from arena.publish.recompute import SliceSpec, recompute_snapshot
from arena.publish.staging import STAGING_PREFIX, reconcile_snapshot_dir, remove_tree
from leaderboard.bt.request import FitRequest
from leaderboard.data import PairCounts
from leaderboard.snapshot.files import freeze_snapshot
from leaderboard.snapshot.folder import SnapshotManifest
from leaderboard.style.board import expand_style
from votes.catalog.roles import judge_only_names
from votes.db import session_scope
from votes.reads.annotated import source_aware_filter
from votes.reads.battle_shares import battle_shares_of, weekly_battle_shares
from votes.reads.filters import VoteFilter
from votes.reads.snapshots import ensure_snapshot_guards, insert_snapshot, vote_slices
from votes.review.gold_review import retire_golds
from votes.voting.live_battles import availability_ledger
from votes.voting.pairing_weights import pairing_weight_history

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from votes.models import Snapshot

__all__ = ["DEFAULT_MIN_SLICE_VOTES", "publish_slices", "publish_snapshot"]

DEFAULT_MIN_SLICE_VOTES = 50


def publish_snapshot(
    engine: Engine,
    *,
    snapshot_dir: Path | str,
    request: FitRequest = FitRequest(),  # noqa: B008 - frozen, so a shared default is safe
    category: str | None = None,
    language: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    exclude_flagged: bool = True,
    progress: Progress | None = None,
    created_at: datetime | None = None,
    plots: bool = True,
    vote_filter: VoteFilter | None = None,
    component: int | None = None,
    flagged_weight: float | None = None,
    counted: PairCounts | None = None,
) -> Snapshot:
    """Recompute from the database and publish: a read-only folder under ``snapshot_dir`` and a row.

    ``vote_filter``, when given, selects the votes instead of ``category`` ... ``exclude_flagged`` and
    ``flagged_weight`` (flagged annotators down-weighted instead of left out: the ``flagged_votes``
    setting);
    ``component`` numbers a part of the comparison graph (its models are the filter's ``models``) in
    the metadata. The request's ``cluster`` (by default ``auto``, annotator clusters when the votes name
    enough annotators) clusters the votes for the intervals; the clustering used is recorded in the
    options of the metadata, and why under ``clustering``. When LLM judges voted in the board,
    each one's position term is in the metadata under ``judge_position``.

    When nothing but the counts decides the board (see ``fit_first`` in
    :func:`~arena.publish.board_reads.load_votes_with_texts`), the board is fitted before the votes are
    read one by one, and its figures are drawn while they are read. ``counted``, the same filter's counts
    read just before (the components check), is then fitted instead of aggregating the votes again; if the
    votes read turn out to differ (votes came in), the early board and its figures are dropped and the
    board is fitted on the votes read.

    The folder is written under a staging name, frozen (files 0444), moved to its id, and only then
    recorded; if recording fails the folder is removed, so every row has its files and no stray
    folder pretends to be published. Models that only judge are left out of the board (``exclude_models``).
    Golds good annotators keep missing are retired first
    (:func:`votes.review.gold_review.retire_golds`). Returns the stored (immutable)
    :class:`~votes.models.Snapshot` row.
    """
    if request.style:
        expand_style(request.style)  # the style board's names: an unknown one fails before any vote is read
    if vote_filter is None:
        vote_filter = VoteFilter(
            category=category,
            language=language,
            since=since,
            until=until,
            exclude_flagged=exclude_flagged,
            flagged_weight=flagged_weight,
        )
    narrowed = _without_judges(engine, vote_filter)
    if narrowed is not vote_filter:
        vote_filter, counted = narrowed, None  # ``counted`` was read with the judges in
    spec = SliceSpec(category=vote_filter.category, language=vote_filter.language)
    filters = filters_metadata(source_aware_filter(vote_filter) if request.by_source else vote_filter)
    if component is not None:
        filters["component"] = component
    # each publish also runs the gold review's retirement (golds count in no board; the flagged report
    # counts the retired ones)
    retire_golds(engine)
    root = Path(snapshot_dir)
    root.mkdir(parents=True, exist_ok=True)
    reconcile_snapshot_dir(engine, root)
    staging = root / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    try:
        with ExitStack() as stack:
            fitted: list[FittedBoard] = []

            def fit_first(counts: PairCounts) -> None:
                """Fitted before the votes are read one by one, so the figures are drawn meanwhile."""
                board, point_fit = fit_board(counts, request, progress=progress)
                drawing = PlotDrawing(staging, board, counts) if plots else None
                if drawing is not None:
                    stack.callback(drawing.cancel)  # joined already unless the publish failed
                fitted.append(FittedBoard(counts, board, point_fit, drawing))

            stored = load_board_votes(
                engine,
                vote_filter,
                request,
                fit_first=fit_first,
                counted_before=counted,
            )
            if fitted and fitted[0].counts is not stored.counts:  # votes came in since ``counted``
                if fitted[0].drawing is not None:
                    fitted[0].drawing.cancel()
                fitted.clear()
                remove_tree(staging)  # whatever the stopped child wrote
            manifest = _write_published(
                engine,
                stored,
                staging,
                request=request,
                vote_filter=vote_filter,
                spec=spec,
                filters=filters,
                progress=progress,
                created_at=created_at,
                plots=plots,
                fitted=fitted[0] if fitted else None,
            )
        # Frozen before it gets its id: a folder under a snapshot id is never writable, even after a crash.
        freeze_snapshot(staging)
        final = root / manifest.id
        staging.rename(final)
    except BaseException:
        remove_tree(staging)
        raise
    manifest = SnapshotManifest(path=final, metadata=manifest.metadata, files=manifest.files)
    try:
        ensure_snapshot_guards(engine)
        with session_scope(engine) as session:
            row = insert_snapshot(session=session, manifest=manifest)
    except BaseException:
        remove_tree(final)
        raise
    return row


def _without_judges(engine: Engine, vote_filter: VoteFilter) -> VoteFilter:
    """The filter with every model that only judges left out (``exclude_models``, so the metadata says so
    and the ledger of the same filter hashes the same votes). A judge is on no board; it can have been a
    side of votes only before it was made a judge."""
    with engine.connect() as conn:
        judges = set(judge_only_names(conn)) - set(vote_filter.exclude_models)
    if not judges:
        return vote_filter
    return replace(vote_filter, exclude_models=tuple(sorted({*vote_filter.exclude_models, *judges})))


def _write_published(
    engine: Engine,
    stored: StoredVotes,
    staging: Path,
    *,
    request: FitRequest,
    vote_filter: VoteFilter,
    spec: SliceSpec,
    filters: dict[str, Any],
    progress: Progress | None,
    created_at: datetime | None,
    plots: bool,
    fitted: FittedBoard | None,
) -> SnapshotManifest:
    """The snapshot folder of :func:`publish_snapshot` written under ``staging`` from the votes read
    (``fitted``: their board, fitted while they were read)."""
    # the board's votes were read with their times already: counted from them, not read again
    if stored.who is not None and not request.by_source:
        weekly_shares = battle_shares_of(stored.who)
    else:
        weekly_shares = weekly_battle_shares(engine, vote_filter)
    stored = stored._replace(who=None)  # the votes one by one are not needed past here
    _, manifest = recompute_snapshot(
        stored.counts,
        staging,
        request=request,
        clusters=stored.clusters,
        votes_digest=stored.digest,
        spec=spec,
        filters=filters,
        source="database",
        progress=progress,
        created_at=created_at or datetime.now(UTC),
        plots=plots,
        battles=stored.battles,
        model_info=load_model_info(engine),
        agreement=stored.agreement,
        availability=availability_ledger(engine),
        weekly_shares=weekly_shares,
        by_source=stored.by_source,
        judges=stored.judges,
        clustering=stored.clustering,
        pairing_weights=pairing_weight_history(engine),
        flagged_annotators=stored.flagged,
        fitted=fitted,
    )
    return manifest


def publish_slices(
    engine: Engine,
    *,
    snapshot_dir: Path | str,
    request: FitRequest = FitRequest(),  # noqa: B008 - frozen, so a shared default is safe
    slices: Sequence[SliceSpec] | None = None,
    min_votes: int = DEFAULT_MIN_SLICE_VOTES,
    exclude_flagged: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    plots: bool = True,
    flagged_weight: float | None = None,
) -> list[Snapshot]:
    """Publish the overall board and one board per category and per language (those with enough votes),
    each fitted as ``request`` asks (see :func:`publish_snapshot`)."""
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
                request=request,
                category=spec.category,
                language=spec.language,
                exclude_flagged=exclude_flagged,
                progress=report,
                plots=plots,
                flagged_weight=flagged_weight,
            )
        )
    return published
