"""Published snapshots: the board of the stored votes written, frozen, moved to its id and recorded.

:func:`publish_snapshot` is `arena publish --no-slices` (and with filters) and the admin API's publish:
the votes read once (:mod:`arena.publish.board_reads`), the board fitted (:mod:`arena.publish.board_fit`;
before the votes are read one by one when nothing read then can change it, so its figures are drawn
meanwhile), the folder written through :func:`arena.publish.recompute.recompute_snapshot` under a
staging name (:mod:`arena.publish.staging`), frozen, renamed and only then recorded.
:func:`publish_slices` is `arena publish`: the overall board and one per category and language, all from
one read of the votes (:mod:`arena.publish.slice_reads`), the category and language boards without
figures unless asked (drawing them was four fifths of the time of a publish of every board).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from arena.publish.board_fit import FittedBoard, Progress, fit_board
from arena.publish.board_reads import (
    StoredVotes,
    filters_metadata,
    load_board_votes,
    load_model_info,
    stored_components,
)
from arena.publish.drawing import PlotDrawing
from arena.publish.recompute import SliceSpec, recompute_snapshot
from arena.publish.slice_reads import (
    SliceOptions,
    board_left_off,
    load_every_board,
    plan_boards,
    shares_one_read,
)
from arena.publish.staging import STAGING_PREFIX, reconcile_snapshot_dir, remove_tree
from leaderboard.battles import sparse_models
from leaderboard.bt.clusters import Clusters
from leaderboard.bt.request import FitRequest
from leaderboard.data import FEW_VOTES, PairCounts
from leaderboard.snapshot.files import freeze_snapshot
from leaderboard.snapshot.folder import SnapshotManifest
from leaderboard.style.board import expand_style
from votes.catalog.roles import judge_only_names
from votes.db import read_only, session_scope
from votes.reads.annotated import source_aware_filter
from votes.reads.battle_shares import battle_shares_of, weekly_battle_shares
from votes.reads.filters import VoteFilter
from votes.reads.snapshots import ensure_snapshot_guards, insert_snapshot
from votes.review.gold_review import retire_golds
from votes.voting.live_battles import availability_ledger
from votes.voting.pairing_weights import pairing_weight_history

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from votes.models import Snapshot

__all__ = ["DEFAULT_MIN_MODEL_VOTES", "DEFAULT_MIN_SLICE_VOTES", "publish_slices", "publish_snapshot"]

#: A category or language board with fewer votes (among the models it lists) is not published.
DEFAULT_MIN_SLICE_VOTES = 50
#: A model with fewer votes in a category or language is left off that board (with a note): below it
#: the board could only mark it provisional (:data:`leaderboard.data.FEW_VOTES`).
DEFAULT_MIN_MODEL_VOTES = FEW_VOTES


class _Shared(NamedTuple):
    """What every board of a publish says about the models and the site, read once per publish."""

    model_info: dict[str, dict[str, Any]]
    availability: dict[str, dict[str, Any]]
    pairing_weights: dict[str, dict[str, float]]


def _prepare(engine: Engine, snapshot_dir: Path | str) -> tuple[Path, _Shared]:
    """Before any board: the gold review's retirement (golds count in no board; the flagged report counts
    the retired ones), the folder, the clean-up of crashed publishes, and what every board shares."""
    retire_golds(engine)
    root = Path(snapshot_dir)
    root.mkdir(parents=True, exist_ok=True)
    reconcile_snapshot_dir(engine, root)
    shared = _Shared(load_model_info(engine), availability_ledger(engine), pairing_weight_history(engine))
    return root, shared


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
    min_model_votes: int = DEFAULT_MIN_MODEL_VOTES,
    notes: dict[str, Any] | None = None,
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

    A category or language board leaves off the models with fewer than ``min_model_votes`` votes there
    (0: none), their votes with them, and says so under ``left_off`` (as :func:`publish_slices` does:
    the same board either way). ``notes`` are more keys for the metadata.

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
    notes = dict(notes or {})
    if spec != SliceSpec() and min_model_votes > 0 and not request.by_source:
        if counted is None:
            counted = stored_components(engine, vote_filter)[1]
        left_off = sparse_models(
            counted.models, counted.model_a, counted.model_b, counted.vote_counts, min_model_votes
        )
        if left_off:
            added = tuple(m for m in sorted(left_off) if m not in vote_filter.exclude_models)
            vote_filter = replace(vote_filter, exclude_models=(*vote_filter.exclude_models, *added))
            counted = None
        notes["left_off"] = board_left_off(left_off, min_model_votes)
    filters = filters_metadata(source_aware_filter(vote_filter) if request.by_source else vote_filter)
    if component is not None:
        filters["component"] = component
    root, shared = _prepare(engine, snapshot_dir)

    def write(staging: Path, stack: ExitStack) -> SnapshotManifest:
        fitted: list[FittedBoard] = []

        def fit_first(counts: PairCounts) -> None:
            """Fitted before the votes are read one by one, so the figures are drawn meanwhile."""
            board, point_fit = fit_board(counts, request, progress=progress)
            drawing = PlotDrawing(staging, board, counts) if plots else None
            if drawing is not None:
                stack.callback(drawing.cancel)  # joined already unless the publish failed
            fitted.append(FittedBoard(counts, board, point_fit, drawing))

        stored = load_board_votes(engine, vote_filter, request, fit_first=fit_first, counted_before=counted)
        if fitted and fitted[0].counts is not stored.counts:  # votes came in since ``counted``
            if fitted[0].drawing is not None:
                fitted[0].drawing.cancel()
            fitted.clear()
            remove_tree(staging)  # whatever the stopped child wrote
        return _write_published(
            engine,
            stored,
            staging,
            shared,
            request=request,
            vote_filter=vote_filter,
            spec=spec,
            filters=filters,
            progress=progress,
            created_at=created_at,
            plots=plots,
            fitted=fitted[0] if fitted else None,
            notes=notes,
        )

    return _publish_folder(engine, root, write)


def _publish_folder(
    engine: Engine,
    root: Path,
    write: Callable[[Path, ExitStack], SnapshotManifest],
    *,
    staging: Path | None = None,
) -> Snapshot:
    """A snapshot ``write`` makes in a staging folder under ``root`` (``staging``, when its figures are
    being drawn there already; with a stack for what must be undone should it fail), frozen, renamed to
    its id and recorded; removed again if any step fails."""
    staging = staging or root / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    try:
        with ExitStack() as stack:
            manifest = write(staging, stack)
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
    shared: _Shared,
    *,
    request: FitRequest,
    vote_filter: VoteFilter,
    spec: SliceSpec,
    filters: dict[str, Any],
    progress: Progress | None,
    created_at: datetime | None,
    plots: bool,
    fitted: FittedBoard | None,
    notes: dict[str, Any],
) -> SnapshotManifest:
    """The snapshot folder of a board written under ``staging`` from the votes read (``fitted``: their
    board, fitted while they were read)."""
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
        model_info=shared.model_info,
        agreement=stored.agreement,
        availability=shared.availability,
        weekly_shares=weekly_shares,
        by_source=stored.by_source,
        judges=stored.judges,
        clustering=stored.clustering,
        pairing_weights=shared.pairing_weights,
        flagged_annotators=stored.flagged,
        fitted=fitted,
        notes=notes,
    )
    return manifest


def publish_slices(
    engine: Engine,
    *,
    snapshot_dir: Path | str,
    request: FitRequest = FitRequest(),  # noqa: B008 - frozen, so a shared default is safe
    slices: Sequence[SliceSpec] | None = None,
    min_votes: int = DEFAULT_MIN_SLICE_VOTES,
    min_model_votes: int = DEFAULT_MIN_MODEL_VOTES,
    exclude_flagged: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    plots: bool = True,
    slice_plots: bool = False,
    flagged_weight: float | None = None,
) -> list[Snapshot]:
    """Publish the overall board and one board per category and per language (``slices``: those boards
    instead), each fitted as ``request`` asks (see :func:`publish_snapshot`), from one read of the votes
    (:mod:`arena.publish.slice_reads`; a style-controlled or source-aware board still reads its own).

    A category or language board needs ``min_votes`` votes among the models with ``min_model_votes``
    there; it leaves the others off and says so (``left_off`` in its metadata). The overall board's
    metadata lists every category and language found, with its votes and whether it got a board
    (``slice_boards``). ``plots`` draws the overall board's figures, ``slice_plots`` the others'. Every
    board of one publish carries the publish's time (``created_at``).
    ``progress(label, done, total)`` names the board by its key."""
    base = _without_judges(engine, VoteFilter(exclude_flagged=exclude_flagged, flagged_weight=flagged_weight))
    root, shared = _prepare(engine, snapshot_dir)
    # one publish, one time: its boards list together, the overall board last (written last, it is not
    # the newest)
    options = SliceOptions(request, slices, min_votes, min_model_votes, plots, slice_plots, datetime.now(UTC))

    def report(label: str) -> Progress:
        def board_progress(done: int, total: int) -> None:
            if progress is not None:
                progress(label, done, total)

        return board_progress

    if shares_one_read(request):
        return _publish_together(engine, root, shared, base, options, report)
    # each board reads its own votes (its answers' texts, or who cast them)
    with read_only(engine).connect() as conn, conn.begin():
        plans, found, _ = plan_boards(
            conn, base, slices=slices, min_votes=min_votes, min_model_votes=min_model_votes
        )
    return [
        publish_snapshot(
            engine,
            snapshot_dir=root,
            request=request,
            vote_filter=plan.vote_filter,
            progress=report(plan.spec.label),
            plots=options.plots_of(plan.spec),
            min_model_votes=0,  # the plan left them off already
            notes=options.notes(plan.spec, plan.left_off, found),
            created_at=options.created_at,
        )
        for plan in plans
    ]


def _publish_together(
    engine: Engine,
    root: Path,
    shared: _Shared,
    base: VoteFilter,
    options: SliceOptions,
    report: Callable[[str], Progress],
) -> list[Snapshot]:
    """Every board from one read of the votes. The overall board is fitted first (while the votes are
    read, when nothing read one by one can change it) and its figures, most of the work of the whole
    publish, are drawn by a child while the other boards are fitted and written; it is written last."""
    request = options.request
    staging = root / f"{STAGING_PREFIX}{uuid.uuid4().hex}"  # the overall board's
    try:
        with ExitStack() as stack:
            early: list[FittedBoard] = []

            def fit_overall(counts: PairCounts, clusters: Clusters | None = None) -> None:
                board, point_fit = fit_board(counts, request, progress=report("all"), clusters=clusters)
                drawing = PlotDrawing(staging, board, counts) if options.plots else None
                if drawing is not None:
                    stack.callback(drawing.cancel)  # joined already unless the publish failed
                early.append(FittedBoard(counts, board, point_fit, drawing))

            every = load_every_board(
                engine,
                base,
                request,
                slices=options.slices,
                min_votes=options.min_votes,
                min_model_votes=options.min_model_votes,
                fit_first=fit_overall,
            )
            published: dict[SliceSpec, Snapshot] = {}
            for board in every.boards:
                if board.spec == SliceSpec():
                    if not early:  # fitted now, before the other boards, so its figures are drawn meanwhile
                        fit_overall(board.stored.counts, board.stored.clusters)
                    continue
                write = partial(
                    _write_read_board,
                    engine,
                    shared,
                    options,
                    _ReadBoard(
                        board.spec,
                        board.vote_filter,
                        board.stored,
                        options.notes(board.spec, board.left_off, every.found),
                        options.plots_of(board.spec),
                        None,
                    ),
                    report(board.spec.label),
                )
                published[board.spec] = _publish_folder(engine, root, write)
            for board in every.boards:
                if board.spec == SliceSpec():
                    overall = _ReadBoard(
                        board.spec,
                        board.vote_filter,
                        board.stored,
                        options.notes(board.spec, None, every.found),
                        options.plots,
                        early[0],
                    )
                    write = partial(_write_read_board, engine, shared, options, overall, report("all"))
                    published[board.spec] = _publish_folder(engine, root, write, staging=staging)
    except BaseException:
        remove_tree(staging)
        raise
    return [published[board.spec] for board in every.boards]


class _ReadBoard(NamedTuple):
    """A board of :func:`publish_slices` whose votes were read with the others' (``fitted``: fitted
    already, its figures being drawn)."""

    spec: SliceSpec
    vote_filter: VoteFilter
    stored: StoredVotes
    notes: dict[str, Any]
    plots: bool
    fitted: FittedBoard | None


def _write_read_board(
    engine: Engine,
    shared: _Shared,
    options: SliceOptions,
    board: _ReadBoard,
    progress: Progress,
    staging: Path,
    _stack: ExitStack,
) -> SnapshotManifest:
    """The folder of a board whose votes were read with the others'."""
    return _write_published(
        engine,
        board.stored,
        staging,
        shared,
        request=options.request,
        vote_filter=board.vote_filter,
        spec=board.spec,
        filters=filters_metadata(board.vote_filter),
        progress=progress,
        created_at=options.created_at,
        plots=board.plots,
        fitted=board.fitted,
        notes=board.notes,
    )
