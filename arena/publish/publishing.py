"""Recompute and publish: the one path from votes (a database or a battles file) to a snapshot folder.

``arena recompute`` (offline, from a file or the database), ``arena publish`` and the admin API all go
through :func:`recompute_snapshot`, so an export recomputed offline gives the same data files, byte for
byte, as the snapshot published from the database with the same options and seed.
"""

from __future__ import annotations

import logging
import re
import shutil
import stat
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from arena.publish.drawing import PlotDrawing
from leaderboard.battles import Battles, split_components
from leaderboard.bt.clusters import Clusters, choose_clusters, clustering_record, parse_cluster
from leaderboard.bt.compute import SOURCE_METHODS, fit_leaderboard
from leaderboard.bt.fit import BTFit
from leaderboard.composite.agreement import AGREEMENT_CSV, AGREEMENT_JSON, AgreementReport
from leaderboard.data import PairCounts
from leaderboard.result import Leaderboard
from leaderboard.snapshot.dataset_card import CARD_FILE, MODELS_FILE, dataset_card, models_csv
from leaderboard.snapshot.files import (
    DATA_FILES,
    PACKAGE,
    counts_sha256,
    dump_json,
    freeze_snapshot,
    package_version,
)
from leaderboard.snapshot.folder import SnapshotManifest, slice_label, write_snapshot
from leaderboard.style.board import StyleBoard, compute_style_board, expand_style, style_board_files

if TYPE_CHECKING:  # the database stack is imported where it is used: a recompute from a file needs none
    from sqlalchemy.engine import Engine

    from arena.publish.early_read import EarlyRead
    from votes.models import Snapshot
    from votes.reads.annotated import AgreementInput
    from votes.reads.filters import VoteFilter
    from votes.reads.packed import FetchedTexts

__all__ = [
    "FitOptions",
    "FittedBoard",
    "Progress",
    "board_judge_positions",
    "SliceSpec",
    "StoredVotes",
    "fit_by_source",
    "fit_board",
    "fit_counts",
    "filters_metadata",
    "fit_style_board",
    "load_board_votes",
    "load_from_database",
    "load_model_info",
    "load_votes_with_texts",
    "publish_slices",
    "publish_snapshot",
    "recompute_snapshot",
    "stored_components",
    "reconcile_snapshot_dir",
]

log = logging.getLogger(__name__)

#: Folder name prefix of a snapshot being written (renamed to its id once complete and frozen).
STAGING_PREFIX = ".staging-"
#: A staging folder this recent may be a publish running now: left alone by the clean-up.
STAGING_GRACE_SECONDS = 6 * 3600.0
#: What a snapshot id looks like (:func:`leaderboard.snapshot.folder.make_snapshot_id`).
SNAPSHOT_ID = re.compile(r"\d{8}T\d{6}Z-[a-z0-9-]+-[0-9a-f]{10}")
#: An id-named folder without a row this recent may be a publish between its rename and its insert.
UNRECORDED_GRACE_SECONDS = 600.0

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
    # Clustered intervals: ``annotator``, ``prompt`` or ``annotator,prompt``; empty for votes as independent.
    cluster: str = ""
    # The composite's model families (model name -> family) for judges' self-preference; empty for none.
    families: Mapping[str, str] = field(default_factory=dict)
    # ``ppi``: the source-aware board's ratings rectified by PPI++ (human-only target); empty for none.
    rectify: str = ""

    def __post_init__(self) -> None:
        if self.style:
            expand_style(self.style)  # an unknown name fails here, before any votes are read
        # No rounds means no bootstrap: say so, rather than ask for intervals from zero rounds.
        if self.n_rounds == 0 and self.interval == "bootstrap":
            object.__setattr__(self, "interval", "none")
        if self.rectify not in ("", "ppi"):
            raise ValueError(f"unknown rectification {self.rectify!r}; available: ppi")
        if self.rectify and self.method not in SOURCE_METHODS:
            raise ValueError("--rectify needs the votes with who cast them: use --method composite")

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
        if not self.cluster:
            del described["cluster"]
        if self.families:
            described["families"] = dict(sorted(self.families.items()))
        else:
            del described["families"]
        if not self.rectify:
            del described["rectify"]
        return described

    @property
    def by_source(self) -> bool:
        """The method fits the votes one by one with who cast them (the composite), not the counts."""
        return self.method in SOURCE_METHODS


@dataclass(frozen=True)
class SliceSpec:
    """A category/language board; both None is the overall board."""

    category: str | None = None
    language: str | None = None

    @property
    def label(self) -> str:
        return slice_label(category=self.category, language=self.language)


def fit_counts(
    counts: PairCounts,
    options: FitOptions,
    *,
    progress: Progress | None = None,
    clusters: Clusters | None = None,
) -> Leaderboard:
    """Fit a leaderboard with ``options`` (the math lives in :mod:`leaderboard`)."""
    return fit_board(counts, options, progress=progress, clusters=clusters)[0]


def fit_board(
    counts: PairCounts,
    options: FitOptions,
    *,
    progress: Progress | None = None,
    clusters: Clusters | None = None,
    n_jobs: int | None = None,
) -> tuple[Leaderboard, BTFit]:
    """:func:`fit_counts` and its point fit, for the certificates of the same board; ``n_jobs`` bootstrap
    threads (default: up to two), which change how fast, never what."""
    extra = dict(options.extra)
    if n_jobs is not None:
        extra["n_jobs"] = n_jobs
    return fit_leaderboard(
        counts,
        clusters=clusters,
        method=options.method,
        n_rounds=options.n_rounds,
        level=options.level,
        interval=options.interval,
        anchor=options.anchor,
        random_state=options.random_state,
        progress=progress,
        **extra,
    )


def fit_by_source(read: AgreementInput, options: FitOptions) -> tuple[Leaderboard, dict[str, Any]]:
    """The composite board of votes with their annotators, and its ``composite`` metadata."""
    from leaderboard.composite.board import composite_board
    from votes.reads.annotated import composite_input

    if len(read.battles) == 0:
        raise ValueError("no votes with an annotator and a prompt to fit the composite on")
    fitted = composite_board(
        composite_input(read, options.families),
        read.battles,
        interval=options.interval,
        n_rounds=options.n_rounds,
        level=options.level,
        random_state=options.random_state,
        rectify=options.rectify,
    )
    return fitted.board, fitted.metadata


def board_fragility(counts: PairCounts, options: FitOptions, fit: BTFit | None = None) -> dict[str, Any]:
    """The fragility certificate of the default board (:mod:`leaderboard.design.fragility`), for the metadata.

    ``fit`` is the board's own point fit (:func:`fit_board`), used when it is the one the certificate
    would make (no anchor, the default scale): then the votes are not fitted a second time."""
    from leaderboard.bt.compute import method_spec
    from leaderboard.design.fragility import fragility

    same_fit = options.anchor is None and not {"scale", "base", "initial"} & set(options.extra)
    try:
        spec = method_spec(options.method, dict(options.extra))
        return fragility(counts, fit=fit if same_fit else None, spec=spec).describe()
    except (ValueError, RuntimeError) as exc:
        return {"error": str(exc)}


def board_judge_positions(judges: Battles) -> dict[str, Any]:
    """Each judge's left-side advantage on the board's votes and the pooled figure whose interval admits
    their spread (:mod:`leaderboard.quality.judge_position`), for the metadata; ``error`` when it cannot be
    fitted (fewer than two judges with enough votes)."""
    from leaderboard.quality.judge_position import judge_positions

    try:
        described = judge_positions(judges, judges.annotator_names or None).describe()
    except (ValueError, RuntimeError) as exc:
        return {"error": str(exc)}
    described["judges"] = sorted(described["judges"], key=lambda j: str(j["judge"]))
    return {"method": "davidson-position", **described}


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


class FittedBoard(NamedTuple):
    """A board fitted before :func:`recompute_snapshot` is called (publishing fits while the votes are
    still being read): the counts it was fitted on, the board and its point fit, and its figures being
    drawn into the snapshot's folder (None without figures)."""

    counts: PairCounts
    board: Leaderboard
    point_fit: BTFit | None
    drawing: PlotDrawing | None


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
    clusters: Clusters | None = None,
    agreement: AgreementReport | None = None,
    availability: Mapping[str, Mapping[str, Any]] | None = None,
    weekly_shares: Mapping[str, Mapping[str, float]] | None = None,
    by_source: AgreementInput | None = None,
    judges: Battles | None = None,
    clustering: Mapping[str, Any] | None = None,
    pairing_weights: Mapping[str, Mapping[str, float]] | None = None,
    flagged_annotators: Mapping[str, Any] | None = None,
    fitted: FittedBoard | None = None,
) -> tuple[Leaderboard, SnapshotManifest]:
    """Fit ``counts`` and write the snapshot folder; the data files depend on counts and options only.

    ``fitted`` is the board of these very ``counts`` fitted already with ``options`` (and its figures
    being drawn into ``out_dir`` when ``plots``): it is used instead of fitting again.

    With ``options.style`` the same votes, one row per vote with their style covariates (``battles``),
    give a second, style-controlled board: its files sit beside the default board's, its covariates'
    coefficients and intervals in ``metadata.json`` under ``style_control``.

    With ``agreement`` (the votes include LLM judges'), the agreement report of the same votes, every
    annotator's, goes into ``metadata.json`` under ``agreement`` and into ``agreement.csv`` (the pairwise
    table) and ``agreement.json`` (the whole report). The board itself still counts only the votes in
    ``counts``: a judge's votes reach it only when the filter asked for them.

    Every snapshot also carries ``models.csv`` (the metadata ``model_info`` knows about each model) and a
    dataset card, ``README.md``, so the folder loads with ``datasets.load_dataset`` and pushes to a hub.

    With ``availability`` (per model, live generations and failures), the board's models' entries go into
    ``metadata.json`` under ``availability``: the fairness ledger's third column. ``weekly_shares`` (per
    week, each model's share of the battles) goes under ``battle_share_by_week``: the ledger's history.

    With ``judges`` (the board's votes by LLM judges, annotators coded with their names), each judge's
    position term goes under ``judge_position`` (:func:`board_judge_positions`); ``clustering`` (what
    :func:`leaderboard.bt.clusters.clustering_record` says about the clusters asked for and used) goes under
    ``clustering``. Both are metadata only: the data files, and so the snapshot id, do not change.

    ``pairing_weights`` (per UTC day, each model's share under the pairing policy then in force, from
    :mod:`votes.voting.pairing_weights`) goes under ``sampling_weights_by_day`` (the board's models only):
    what the live site was giving over time, beside the share the policy would give next.

    ``flagged_annotators`` (:func:`votes.review.flagged.flagged_report`: the flagged annotators left out or
    down-weighted, each under a pseudonymous id with one reason, and the gold summary) goes under
    ``flagged_annotators``; the board pages show its count.

    A source-aware method (``composite``) fits ``by_source``, every vote with who cast it (humans and
    judges, whatever the filter's annotators), instead of ``counts``; its sources, learned per-source
    terms, effective number of human votes and each judge's worth go under ``composite``.
    """
    if counts.n_cells == 0:
        raise ValueError(f"no votes to fit for the {spec.label} board")
    if options.style and (battles is None or battles.features is None):
        raise ValueError("style control needs the votes with their answer texts")
    added: dict[str, Any] = {}
    point_fit: BTFit | None = None
    with ExitStack() as stack:
        # The figures need only the board and are drawn on another core while the rest is computed: by
        # the child publishing started while it read the votes (``fitted``), or by one started here
        # before the fit, drawing those of the point ratings while the bootstrap runs.
        drawing = early = fitted.drawing if fitted is not None else None
        if plots and drawing is None:
            preview = None
            if fitted is None and options.interval == "bootstrap" and not options.by_source:
                preview = partial(fit_counts, counts, replace(options, interval="none", n_rounds=0))
            drawing = PlotDrawing(out_dir, None, counts, preview=preview)
        if drawing is not None:
            stack.callback(drawing.cancel)  # joined already unless the snapshot failed: then it stops
        if fitted is not None:
            if fitted.counts is not counts or options.by_source:
                raise ValueError("a board fitted beforehand must be fitted on the counts given, by counts")
            board, point_fit = fitted.board, fitted.point_fit
        elif options.by_source:
            if by_source is None:
                raise ValueError(f"method {options.method!r} needs the votes with who cast them")
            if options.style:
                raise ValueError(f"method {options.method!r} has no style-controlled board")
            board, added["composite"] = fit_by_source(by_source, options)
        else:
            # one bootstrap thread while the child draws: a second would only take turns with it on its core
            threads = 1 if drawing is not None and drawing.forked else None
            board, point_fit = fit_board(
                counts, options, progress=progress, clusters=clusters, n_jobs=threads
            )
        if drawing is not None and drawing is not early:
            drawing.draw(board)
        if not options.by_source:
            added["fragility"] = board_fragility(counts, options, point_fit)
        if clustering is not None:
            added["clustering"] = dict(clustering)
        if flagged_annotators is not None:
            added["flagged_annotators"] = dict(flagged_annotators)
        if judges is not None:
            added["judge_position"] = board_judge_positions(judges)
        if availability is not None:
            added["availability"] = {m: dict(availability[m]) for m in board.models if m in availability}
        if weekly_shares is not None:
            added["battle_share_by_week"] = {week: dict(shares) for week, shares in weekly_shares.items()}
        if pairing_weights:
            added["sampling_weights_by_day"] = {
                day: {m: s for m, s in shares.items() if m in board.models}
                for day, shares in pairing_weights.items()
            }
        files: dict[str, bytes] = {}
        if options.style and battles is not None:
            styled = fit_style_board(battles, board, options)
            added["style_control"] = styled.describe()
            files = style_board_files(styled)
        if agreement is not None:
            added["agreement"] = agreement.as_dict()
            files[AGREEMENT_CSV] = agreement.csv_bytes()
            files[AGREEMENT_JSON] = dump_json(agreement.as_dict())
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
            plots=drawing if drawing is not None else False,
            extra_metadata={
                "filters": dict(filters or {}),
                "options": options.describe(),
                "source": source,
                # what votes_sha256 is the sha256 of: from the database the vote ledger (votes.reads.ledger),
                # from a file the file itself (snapshots made before the ledger carry no such field)
                "votes_hash": "ledger" if source == "database" else "file",
                **added,
            },
            extra_files=files,
        )
        return board, manifest


def load_model_info(engine: Engine) -> dict[str, dict[str, Any]]:
    """What the store knows about each model (organisation, licence, link, knowledge cutoff; set with
    `arena models set` or `arena models load`), for ``models.csv``."""
    from sqlmodel import Session

    from votes.catalog.model_metadata import model_metadata
    from votes.db import read_only

    with Session(read_only(engine)) as session:
        return dict(model_metadata(session))


def load_from_database(
    engine: Engine, vote_filter: VoteFilter, *, bucket_seconds: float | None = None
) -> tuple[PairCounts, str]:
    """Aggregated votes and the sha256 of the same votes, read in one transaction so they agree.

    With ``bucket_seconds`` the votes are read one by one and aggregated by time bucket (time weights);
    otherwise the database aggregates them (``GROUP BY``)."""
    stored = load_votes_with_texts(engine, vote_filter, bucket_seconds=bucket_seconds)
    return stored.counts, stored.digest


class StoredVotes(NamedTuple):
    """Votes read for a fit in one transaction (see :func:`load_votes_with_texts`)."""

    counts: PairCounts
    digest: str
    battles: Battles | None
    agreement: AgreementReport | None
    clusters: Clusters | None = None
    by_source: AgreementInput | None = None
    judges: Battles | None = None
    clustering: dict[str, Any] | None = None
    flagged: dict[str, Any] | None = None
    # every counted vote with its time, annotator and prompt (read for the clusters and the judges)
    who: Battles | None = None


def load_votes_with_texts(
    engine: Engine,
    vote_filter: VoteFilter,
    *,
    bucket_seconds: float | None = None,
    style: bool = False,
    agreement: bool = False,
    cluster: str = "none",
    by_source: bool = False,
    judges: bool = False,
    flagged: bool = False,
    fit_first: Callable[[PairCounts], None] | None = None,
    counted_before: PairCounts | None = None,
    early: EarlyRead | None = None,
) -> StoredVotes:
    """As :func:`load_from_database`, plus (with ``style``) the same votes one per row with the style
    covariates of their answers, (with ``agreement``) the agreement report of the votes the filter
    selects, humans' and judges' alike (None when no judge voted), and (with ``cluster``, a
    ``--cluster`` value) the votes' clusters by annotator and/or prompt and a record of that choice, (with
    ``by_source``) every vote with who cast it for a source-aware method, and (with ``judges``) the LLM
    judges' votes among them (:func:`votes.reads.annotated.judge_votes`), and (with ``flagged``) the flagged
    annotators the filter leaves out or down-weights (:func:`votes.review.flagged.flagged_report`), all read
    in the same transaction.

    With ``by_source`` the counts and the hash are of the votes the source-aware fit reads
    (:func:`votes.reads.annotated.source_aware_filter`: every annotator's, judges included), not of the
    filter's: a composite board's ``votes_sha256`` then covers the judge verdicts its ratings use (and
    its clusters and judges' votes are of the same votes).

    ``fit_first`` is called, in the same transaction, with the counts before the votes are read one by
    one, when nothing read one by one can change them or how they are fitted (no time buckets, no
    source-aware method, and no clusters: ``cluster`` none, or ``auto`` on a store where no vote names an
    annotator, :func:`votes.reads.scans.votes_name_annotators`): the database
    aggregates them (``GROUP BY``), and the caller fits (and draws) while the votes are read.
    ``counted_before`` is the counts of the same filter read just before in another transaction (the
    components check): given to ``fit_first`` instead of aggregating again, and kept only if the votes
    read give the very same cells (:meth:`leaderboard.data.PairCounts.same_as`); otherwise the counts
    returned are those of the votes read, another object, and the caller's early board is not theirs.

    ``early`` is a read begun while the command was starting (:mod:`arena.publish.early_read`): its
    transaction, when it has one, is the one everything here is read in, and its texts fetched ahead are the
    scan's first chunks. It is closed here either way."""
    from votes.db import read_only
    from votes.reads.annotated import (
        agreement_from_store,
        agreement_input_from_store,
        judge_votes,
        source_aware_filter,
    )
    from votes.reads.cells import load_pair_counts
    from votes.reads.ledger import LedgerDigest, ledger_sha256
    from votes.reads.scans import load_battles, votes_name_annotators
    from votes.reads.sources import battles_from_store
    from votes.review.flagged import flagged_report

    battles: Battles | None = None
    report: AgreementReport | None = None
    who: Battles | None = None
    sourced: AgreementInput | None = None
    fetched: FetchedTexts | None = None
    # A deferred transaction: one consistent snapshot without holding SQLite's write lock meanwhile.
    with ExitStack() as stack:
        taken = None
        if early is not None:
            stack.callback(early.close)
            taken = early.take()
        if taken is not None:  # its transaction is begun already, and ends as it closes
            conn, fetched = taken
        else:
            conn = stack.enter_context(read_only(engine).connect())
            stack.enter_context(conn.begin())
        if style:
            battles = battles_from_store(conn, style=True, filters=vote_filter)
        if agreement:
            report = agreement_from_store(conn, vote_filter)
        if by_source:
            sourced = agreement_input_from_store(conn, vote_filter)
        counted = source_aware_filter(vote_filter) if by_source else vote_filter
        clustered = cluster.strip().lower() == "auto" or bool(parse_cluster(cluster))
        first: PairCounts | None = None
        if fit_first is not None and bucket_seconds is None and not by_source:
            # "auto" clusters only votes that name annotators (leaderboard.bt.clusters.choose_clusters)
            auto = cluster.strip().lower() == "auto"
            if not clustered or (auto and not votes_name_annotators(conn)):
                first = counted_before
                if first is None:
                    first = _counted_votes(load_pair_counts(conn, filters=counted))
                if first.n_cells:  # no votes: the error is raised where it always was
                    fit_first(first)
        if clustered or judges:
            # the ledger's digest built from the same scan: the votes are read once, not twice
            ledger = LedgerDigest(conn)
            who = load_battles(conn, filters=counted, who=True, each_chunk=ledger.update, fetched=fetched)
            digest = ledger.hexdigest(counted)
        else:
            digest = ledger_sha256(conn, counted)
        judged = judge_votes(conn, who) if judges and who is not None else None
        if first is not None and counted_before is None:  # the same votes aggregated, in this transaction
            counts = first
        elif who is not None and who.weight is None:
            # every vote weighs 1: the scan's cells are the GROUP BY's (whole numbers summed in any order)
            counts = who.counts(bucket_seconds=bucket_seconds)
        elif bucket_seconds is None:
            counts = load_pair_counts(conn, filters=counted)
        else:  # the same votes, read already with their annotators (who) when asked for
            timed = who if who is not None else load_battles(conn, filters=counted)
            counts = timed.counts(bucket_seconds=bucket_seconds)
        flagged_found = flagged_report(conn, vote_filter) if flagged else None
    counts = _counted_votes(counts)
    if first is not None and counts.same_as(first):  # read before: the votes have not changed since
        counts = first
    clusters = choose_clusters(who, counts, cluster) if clustered and who is not None else None
    record = clustering_record(who, cluster, clusters) if clustered else None
    return StoredVotes(
        counts,
        digest,
        battles,
        report,
        clusters,
        by_source=sourced,
        judges=judged,
        clustering=record,
        flagged=flagged_found,
        who=who,
    )


def _counted_votes(counts: PairCounts) -> PairCounts:
    """The SQL GROUP BY hands over whole vote counts per cell. If they arrive as "weights", the cells'
    raw vote numbers would read 1 each and the bootstrap would resample cells instead of votes; the
    counts *are* the votes, so say so (this keeps a database fit identical to a file fit)."""
    if counts.votes is not None and not counts.is_weighted:
        return replace(counts, votes=None)
    return counts


def load_board_votes(
    engine: Engine,
    vote_filter: VoteFilter,
    options: FitOptions,
    cluster: str,
    *,
    fit_first: Callable[[PairCounts], None] | None = None,
    counted_before: PairCounts | None = None,
    early: EarlyRead | None = None,
) -> StoredVotes:
    """What a published board reads from the store, for ``options``: the counts (time-bucketed when a
    half-life asks), the votes with their texts for style control, the agreement report, the clusters,
    the votes by source for a source-aware method, the judges' votes and the flagged annotators left
    out or down-weighted. One place, so ``publish`` and
    ``recompute`` from the database read the same."""
    return load_votes_with_texts(
        engine,
        vote_filter,
        bucket_seconds=options.time_bucket,
        style=bool(options.style),
        agreement=True,
        cluster=cluster,
        by_source=options.by_source,
        judges=True,
        flagged=True,
        fit_first=fit_first,
        counted_before=counted_before,
        early=early,
    )


def filters_metadata(vote_filter: VoteFilter) -> dict[str, Any]:
    """The filters of a board from the database as JSON values, for its metadata. The filters added
    after the first snapshots (annotators, anonymity, models) appear only when set, so a snapshot
    published without them keeps its metadata (and id)."""
    out: dict[str, Any] = {
        "category": vote_filter.category,
        "language": vote_filter.language,
        "since": vote_filter.since.isoformat() if vote_filter.since else None,
        "until": vote_filter.until.isoformat() if vote_filter.until else None,
        "exclude_flagged": vote_filter.exclude_flagged,
    }
    if vote_filter.annotators is not None:
        out["annotators"] = list(vote_filter.annotators)
    if vote_filter.source is not None:
        out["source"] = vote_filter.source
    if vote_filter.anony_only:
        out["anony_only"] = True
    if vote_filter.first_sight:
        out["first_sight"] = True
    if vote_filter.robust:
        out["robust"] = True
    if vote_filter.source_aware:
        out["source_aware"] = True
    if vote_filter.down_weighted:
        out["flagged_weight"] = vote_filter.flagged_weight
    if vote_filter.models is not None:
        out["models"] = list(vote_filter.models)
    if vote_filter.exclude_models:
        out["exclude_models"] = list(vote_filter.exclude_models)
    return out


def stored_components(
    engine: Engine, vote_filter: VoteFilter, *, early: EarlyRead | None = None
) -> tuple[list[tuple[str, ...]], PairCounts]:
    """The models of each part of the comparison graph of the selected votes (largest first, as
    :func:`leaderboard.battles.split_components` orders them), read from the aggregated cells, and those
    cells (what :func:`publish_snapshot` can fit as ``counted`` when the graph is in one part).
    ``early``: the same filter's counts read already (:mod:`arena.publish.early_read`), when it has them."""
    from votes.db import read_only
    from votes.reads.cells import load_pair_counts

    read = early.counts() if early is not None and early.filter == vote_filter else None
    if read is not None:
        counts = _counted_votes(read)
    else:
        with read_only(engine).connect() as conn:
            counts = _counted_votes(load_pair_counts(conn, filters=vote_filter))
    cells = Battles(
        models=counts.models, model_a=counts.model_a, model_b=counts.model_b, outcome=counts.outcome
    )
    return [part.models for part in split_components(cells)], counts


def reconcile_snapshot_dir(engine: Engine, root: Path) -> list[Path]:
    """Remove what earlier publishes left behind when they crashed, each with a log line.

    Two kinds of leftover: a staging folder (a publish that died before its rename) and a folder named
    like a snapshot id with no row (one that died between the rename and the insert). A folder with a
    row is published and left alone; so is anything else in the folder. A leftover younger than its
    grace (:data:`STAGING_GRACE_SECONDS`, :data:`UNRECORDED_GRACE_SECONDS`) may belong to a publish
    running now and is kept.
    """
    from sqlmodel import Session, select

    from votes.db import read_only
    from votes.models import Snapshot

    with Session(read_only(engine)) as session:
        known = {str(r) for r in session.exec(select(Snapshot.id)).all()}
    now = time.time()
    removed: list[Path] = []
    for child in sorted(root.iterdir()):
        if not child.is_dir() or child.is_symlink():
            continue
        age = now - child.stat().st_mtime
        if child.name.startswith(STAGING_PREFIX) and age >= STAGING_GRACE_SECONDS:
            what = "an unfinished publish"
        elif (
            SNAPSHOT_ID.fullmatch(child.name) and child.name not in known and age >= UNRECORDED_GRACE_SECONDS
        ):
            what = "a publish that stopped before recording its row"
        else:
            continue
        _remove_tree(child)
        log.warning("removed %s left by %s", child, what)
        removed.append(child)
    return removed


def _remove_tree(path: Path) -> None:
    """Remove a (possibly frozen) folder that never became a published snapshot."""
    if not path.exists():
        return
    path.chmod(stat.S_IRWXU)
    for child in path.iterdir():
        if not child.is_symlink():
            child.chmod(stat.S_IRWXU if child.is_dir() else stat.S_IRUSR | stat.S_IWUSR)
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
    vote_filter: VoteFilter | None = None,
    component: int | None = None,
    cluster: str = "auto",
    flagged_weight: float | None = None,
    counted: PairCounts | None = None,
    early: EarlyRead | None = None,
) -> Snapshot:
    """Recompute from the database and publish: a read-only folder under ``snapshot_dir`` and a row.

    ``vote_filter``, when given, selects the votes instead of ``category`` ... ``exclude_flagged`` and
    ``flagged_weight`` (flagged annotators down-weighted instead of left out: the ``flagged_votes``
    setting);
    ``component`` numbers a part of the comparison graph (its models are the filter's ``models``) in
    the metadata. ``cluster`` (a ``--cluster`` value; by default ``auto``, annotator clusters when the
    votes name enough annotators) clusters the votes for the intervals; the clustering used is recorded
    in the options of the metadata, and why under ``clustering``. When LLM judges voted in the board,
    each one's position term is in the metadata under ``judge_position``.

    When nothing but the counts decides the board (see ``fit_first`` in :func:`load_votes_with_texts`),
    the board is fitted before the votes are read one by one, and its figures are drawn while they are
    read. ``counted``, the same filter's counts read just before (the components check), is then fitted
    instead of aggregating the votes again; if the votes read turn out to differ (votes came in), the
    early board and its figures are dropped and the board is fitted on the votes read. ``early``, a
    read begun as the command started (:mod:`arena.publish.early_read`), is read in and closed.

    The folder is written under a staging name, frozen (files 0444), moved to its id, and only then
    recorded; if recording fails the folder is removed, so every row has its files and no stray
    folder pretends to be published. Golds good annotators keep missing are retired first
    (:func:`votes.review.gold_review.retire_golds`). Returns the stored (immutable) :class:`Snapshot` row.
    """
    from votes.db import session_scope
    from votes.reads.annotated import source_aware_filter
    from votes.reads.filters import VoteFilter
    from votes.reads.snapshots import ensure_snapshot_guards, insert_snapshot
    from votes.review.gold_review import retire_golds

    if vote_filter is None:
        vote_filter = VoteFilter(
            category=category,
            language=language,
            since=since,
            until=until,
            exclude_flagged=exclude_flagged,
            flagged_weight=flagged_weight,
        )
    spec = SliceSpec(category=vote_filter.category, language=vote_filter.language)
    filters = filters_metadata(source_aware_filter(vote_filter) if options.by_source else vote_filter)
    if component is not None:
        filters["component"] = component
    # each publish also runs the gold review's retirement (golds count in no board; the flagged report
    # counts the retired ones, so an early read's older snapshot is given up if any is retired now)
    if retire_golds(engine) and early is not None:
        early.close()
        early = None
    root = Path(snapshot_dir)
    root.mkdir(parents=True, exist_ok=True)
    reconcile_snapshot_dir(engine, root)
    staging = root / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    try:
        with ExitStack() as stack:
            fitted: list[FittedBoard] = []

            def fit_first(counts: PairCounts) -> None:
                """Fitted before the votes are read one by one, so the figures are drawn meanwhile."""
                board, point_fit = fit_board(counts, options, progress=progress)
                drawing = PlotDrawing(staging, board, counts) if plots else None
                if drawing is not None:
                    stack.callback(drawing.cancel)  # joined already unless the publish failed
                fitted.append(FittedBoard(counts, board, point_fit, drawing))

            stored = load_board_votes(
                engine,
                vote_filter,
                options,
                cluster,
                fit_first=fit_first,
                counted_before=counted,
                early=early,
            )
            if fitted and fitted[0].counts is not stored.counts:  # votes came in since ``counted``
                if fitted[0].drawing is not None:
                    fitted[0].drawing.cancel()
                fitted.clear()
                _remove_tree(staging)  # whatever the stopped child wrote
            manifest = _write_published(
                engine,
                stored,
                staging,
                options=options,
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
        _remove_tree(staging)
        raise
    manifest = SnapshotManifest(path=final, metadata=manifest.metadata, files=manifest.files)
    try:
        ensure_snapshot_guards(engine)
        with session_scope(engine) as session:
            row = insert_snapshot(session=session, manifest=manifest)
    except BaseException:
        _remove_tree(final)
        raise
    return row


def _write_published(
    engine: Engine,
    stored: StoredVotes,
    staging: Path,
    *,
    options: FitOptions,
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
    from votes.reads.battle_shares import battle_shares_of, weekly_battle_shares
    from votes.voting.live_battles import availability_ledger
    from votes.voting.pairing_weights import pairing_weight_history

    if stored.clusters is not None:
        options = replace(options, cluster=stored.clusters.label)
    # the board's votes were read with their times already: counted from them, not read again
    if stored.who is not None and not options.by_source:
        weekly_shares = battle_shares_of(stored.who)
    else:
        weekly_shares = weekly_battle_shares(engine, vote_filter)
    stored = stored._replace(who=None)  # the votes one by one are not needed past here
    _, manifest = recompute_snapshot(
        stored.counts,
        staging,
        options=options,
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
    options: FitOptions = FitOptions(),  # noqa: B008 - frozen, so a shared default is safe
    slices: Sequence[SliceSpec] | None = None,
    min_votes: int = DEFAULT_MIN_SLICE_VOTES,
    exclude_flagged: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
    plots: bool = True,
    cluster: str = "auto",
    flagged_weight: float | None = None,
) -> list[Snapshot]:
    """Publish the overall board and one board per category and per language (those with enough votes),
    each clustered as ``cluster`` asks (see :func:`publish_snapshot`)."""
    from sqlmodel import Session

    from votes.reads.snapshots import vote_slices

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
                cluster=cluster,
                flagged_weight=flagged_weight,
            )
        )
    return published
