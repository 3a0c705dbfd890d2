"""What a published board reads from the store: its counts, the votes one by one, and what the metadata says.

One place, so `arena publish` and `arena recompute` from the database read the same: the counts (by day
for time weights, :func:`arena.publish.board_fit.time_bucket`), the ledger's digest of the same votes in
the same transaction, the votes with their texts for a style board, the agreement report, the clusters and
their record, the votes with who cast them for a source-aware method, the judges' votes and the flagged
annotators (:func:`load_votes_with_texts`, :func:`load_board_votes`); the parts of the comparison graph
(:func:`stored_components`), each model's metadata and the filters as JSON values.

Only what reads the store imports this module (publishing, a recompute from the database, the parts of the
stored votes' graph), so the database stack is imported at its top; a recompute from a file never loads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlmodel import Session

from arena.publish.board_fit import time_bucket
from leaderboard.battles import Battles, split_components
from leaderboard.bt.clusters import Clusters, choose_clusters, clustering_record, parse_cluster
from leaderboard.bt.request import FitRequest
from leaderboard.composite.agreement import AgreementReport
from leaderboard.data import PairCounts
from votes.catalog.model_metadata import model_metadata
from votes.db import read_only
from votes.reads.annotated import (
    AgreementInput,
    agreement_from_store,
    agreement_input_from_store,
    judge_votes,
    source_aware_filter,
)
from votes.reads.cells import load_pair_counts
from votes.reads.filters import VoteFilter
from votes.reads.ledger import LedgerDigest, ledger_sha256
from votes.reads.scans import load_battles, votes_name_annotators
from votes.reads.sources import battles_from_store
from votes.review.flagged import flagged_report

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = [
    "StoredVotes",
    "counted_votes",
    "filters_metadata",
    "load_board_votes",
    "load_from_database",
    "load_model_info",
    "load_votes_with_texts",
    "stored_components",
]


def load_model_info(engine: Engine) -> dict[str, dict[str, Any]]:
    """What the store knows about each model (organisation, licence, link, knowledge cutoff; set with
    `arena models set` or `arena models load`), for ``models.csv``."""
    with Session(read_only(engine)) as session:
        return dict(model_metadata(session))


def load_from_database(
    engine: Engine, vote_filter: VoteFilter, *, bucket_seconds: float | None = None
) -> tuple[PairCounts, str]:
    """Aggregated votes and the sha256 of the same votes, read in one transaction so they agree.

    With ``bucket_seconds`` the votes are read one by one and aggregated by time bucket (time weights);
    otherwise the database aggregates them (``GROUP BY``).
    """
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
    returned are those of the votes read, another object, and the caller's early board is not theirs."""
    battles: Battles | None = None
    report: AgreementReport | None = None
    who: Battles | None = None
    sourced: AgreementInput | None = None
    # A deferred transaction: one consistent snapshot without holding SQLite's write lock meanwhile.
    with read_only(engine).connect() as conn, conn.begin():
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
                    first = counted_votes(load_pair_counts(conn, filters=counted))
                if first.n_cells:  # no votes: the error is raised where it always was
                    fit_first(first)
        if clustered or judges:
            # the ledger's digest built from the same scan: the votes are read once, not twice
            ledger = LedgerDigest(conn)
            who = load_battles(conn, filters=counted, who=True, each_chunk=ledger.update)
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
    counts = counted_votes(counts)
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


def counted_votes(counts: PairCounts) -> PairCounts:
    """The SQL GROUP BY hands over whole vote counts per cell. If they arrive as "weights", the cells'
    raw vote numbers would read 1 each and the bootstrap would resample cells instead of votes; the
    counts *are* the votes, so say so (this keeps a database fit identical to a file fit)."""
    if counts.votes is not None and not counts.is_weighted:
        return replace(counts, votes=None, weight_sq=None)
    return counts


def load_board_votes(
    engine: Engine,
    vote_filter: VoteFilter,
    request: FitRequest,
    *,
    fit_first: Callable[[PairCounts], None] | None = None,
    counted_before: PairCounts | None = None,
) -> StoredVotes:
    """What a published board reads from the store, for ``request``: the counts (time-bucketed when a
    half-life asks), the votes with their texts for style control, the agreement report, the clusters,
    the votes by source for a source-aware method, the judges' votes and the flagged annotators left
    out or down-weighted. One place, so ``publish`` and
    ``recompute`` from the database read the same."""
    return load_votes_with_texts(
        engine,
        vote_filter,
        bucket_seconds=time_bucket(request),
        style=bool(request.style),
        agreement=True,
        cluster=request.cluster,
        by_source=request.by_source,
        judges=True,
        flagged=True,
        fit_first=fit_first,
        counted_before=counted_before,
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
    if vote_filter.ipw:
        out["ipw"] = True
    if vote_filter.source_aware:
        out["source_aware"] = True
    if vote_filter.down_weighted:
        out["flagged_weight"] = vote_filter.flagged_weight
    if vote_filter.models is not None:
        out["models"] = list(vote_filter.models)
    if vote_filter.exclude_models:
        out["exclude_models"] = list(vote_filter.exclude_models)
    return out


def stored_components(engine: Engine, vote_filter: VoteFilter) -> tuple[list[tuple[str, ...]], PairCounts]:
    """The models of each part of the comparison graph of the selected votes (largest first, as
    :func:`leaderboard.battles.split_components` orders them), read from the aggregated cells, and those
    cells (what :func:`~arena.publish.snapshots.publish_snapshot` can fit as ``counted`` when the graph
    is in one part)."""
    with read_only(engine).connect() as conn:
        counts = counted_votes(load_pair_counts(conn, filters=vote_filter))
    cells = Battles(
        models=counts.models, model_a=counts.model_a, model_b=counts.model_b, outcome=counts.outcome
    )
    return [part.models for part in split_components(cells)], counts
