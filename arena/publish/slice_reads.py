"""Every board of a publish from one read of the votes: the overall board and one per category and language.

A board per category and per language used to read its votes itself, so a publish of every board read
each vote three times or more (the overall board, its category's, its language's), each read with the
ledger's digest, the clusters and the judges. Here the votes are scanned once
(:func:`votes.reads.scans.load_battles`, with who cast them), beside a small read of each vote's category
and language (:func:`votes.reads.slices.vote_slice_keys`) in the same transaction; each board's votes
are a mask over that scan: its counts, clusters, judges and weekly shares come from the masked votes, and
its ledger digest from the scan's chunks, masked (:meth:`votes.reads.ledger.LedgerDigest.update`). The
few reads that remain per board are small (the flagged annotators; the agreement report, only when LLM
judges voted at all; the counts of a board that weighs votes, by ``GROUP BY``). Each board is the one a
read of its own filter gives, byte for byte (a test publishes both ways).

A category or language board lists only models it measured: a model with fewer than ``min_model_votes``
votes there is left off, with its votes (the filter's ``exclude_models``, so the board's ledger and an
offline recompute see exactly the votes fitted), and the board says who and why
(:func:`board_left_off`). A category or language with fewer than ``min_votes`` votes among the models left
gets no board; the overall board lists every one with its votes and whether it got one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt

from arena.publish.board_fit import time_bucket
from arena.publish.board_reads import StoredVotes, counted_votes
from arena.publish.recompute import SliceSpec
from leaderboard.battles import sparse_models
from leaderboard.bt.clusters import choose_clusters, clustering_record, parse_cluster
from leaderboard.bt.request import FitRequest
from leaderboard.data import PairCounts
from votes.db import read_only
from votes.reads.annotated import agreement_from_store, judge_votes
from votes.reads.cells import index_models, load_pair_counts
from votes.reads.filters import VoteFilter
from votes.reads.ledger import LedgerDigest
from votes.reads.scans import StoredChunk, load_battles, votes_name_annotators
from votes.reads.slices import SliceKeys, vote_slice_keys
from votes.review.flagged import flagged_report

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

__all__ = [
    "BoardPlan",
    "BoardVotes",
    "EveryBoard",
    "SliceOptions",
    "board_left_off",
    "load_every_board",
    "plan_boards",
    "shares_one_read",
]


class BoardVotes(NamedTuple):
    """One board of a publish: what it is, its filter (with the models it leaves off), its votes as read,
    and the models left off with their votes (None for the overall board, which leaves none off)."""

    spec: SliceSpec
    vote_filter: VoteFilter
    stored: StoredVotes
    left_off: dict[str, int] | None


class EveryBoard(NamedTuple):
    """The boards of a publish (the overall board first) and what the votes hold: every category and
    language with its votes, those counted once thin models are left off, and whether it got a board."""

    boards: list[BoardVotes]
    found: list[dict[str, Any]]


def shares_one_read(request: FitRequest) -> bool:
    """Whether :func:`load_every_board` can read ``request``'s boards: not a style-controlled board (its
    answers' texts are read per board) nor a source-aware method (it reads who cast every vote)."""
    return not request.style and not request.by_source


def board_left_off(left_off: dict[str, int] | None, min_model_votes: int) -> dict[str, Any]:
    """The ``left_off`` note of a category or language board's metadata: the minimum, and each model left
    off with its votes there (fewest first)."""
    return {
        "min_model_votes": min_model_votes,
        "models": [{"model": m, "votes": n} for m, n in (left_off or {}).items()],
    }


class BoardPlan(NamedTuple):
    """A board to publish: what it is, its filter (with the models it leaves off), which of the votes read
    for every board are its own, and the models left off with their votes (None: the overall board)."""

    spec: SliceSpec
    vote_filter: VoteFilter
    mask: npt.NDArray[np.bool_]
    left_off: dict[str, int] | None


def plan_boards(
    conn: Connection,
    base: VoteFilter,
    *,
    slices: Sequence[SliceSpec] | None,
    min_votes: int,
    min_model_votes: int,
) -> tuple[list[BoardPlan], list[dict[str, Any]], npt.NDArray[np.int64]]:
    """The boards of a publish (``slices`` as given, or the overall board and one per category and
    language with ``min_votes`` votes among the models with ``min_model_votes`` there) and what was
    found: every category and language with its votes, those counted once thin models are left off,
    and whether it gets a board; and the ids of the votes read, in the order the masks follow. One small
    read of each vote's category, language and models."""
    keys = vote_slice_keys(conn, base)
    names, lookup = index_models(
        conn, set(np.unique(np.concatenate([keys.model_a_id, keys.model_b_id])).tolist())
    )
    plans, found = _plan(keys, names, lookup, base, slices, min_votes, min_model_votes)
    return plans, found, keys.vote_id


def load_every_board(
    engine: Engine,
    base: VoteFilter,
    request: FitRequest,
    *,
    slices: Sequence[SliceSpec] | None,
    min_votes: int,
    min_model_votes: int,
    fit_first: Callable[[PairCounts], None] | None = None,
) -> EveryBoard:
    """The votes of every board (:func:`plan_boards`), read once in one transaction (see the module).
    ``base`` selects the votes of every board.

    ``fit_first`` is called with the overall board's counts before the votes are scanned, when nothing
    the scan reads can change them or how they are fitted (as for one board:
    :func:`~arena.publish.board_reads.load_votes_with_texts`); the overall board's counts are then that
    very object."""
    if not shares_one_read(request):
        raise ValueError(f"a {request.method} board with these options reads its votes alone")
    bucket = time_bucket(request)
    clustered = request.cluster.strip().lower() == "auto" or bool(parse_cluster(request.cluster))
    with read_only(engine).connect() as conn, conn.begin():
        plans, found, vote_ids = plan_boards(
            conn, base, slices=slices, min_votes=min_votes, min_model_votes=min_model_votes
        )
        first: PairCounts | None = None
        overall = any(plan.spec == SliceSpec() for plan in plans)
        if fit_first is not None and overall and bucket is None:
            # "auto" clusters only votes that name annotators (leaderboard.bt.clusters.choose_clusters)
            auto = request.cluster.strip().lower() == "auto"
            if not clustered or (auto and not votes_name_annotators(conn)):
                first = counted_votes(load_pair_counts(conn, filters=base))
                if first.n_cells:  # no votes: the error is raised where it always was
                    fit_first(first)
        digests = [LedgerDigest(conn) for _ in plans]
        done = 0

        def each_chunk(chunk: StoredChunk) -> None:
            nonlocal done
            n = len(chunk.model_a)
            for digest, plan in zip(digests, plans, strict=True):
                digest.update(chunk, plan.mask[done : done + n])
            done += n

        everyone = load_battles(conn, filters=base, who=True, each_chunk=each_chunk)
        if everyone.vote_id is None or not np.array_equal(everyone.vote_id, vote_ids):
            raise RuntimeError("the votes and their categories were read differently in one transaction")
        agreement = agreement_from_store(conn, base)
        boards: list[BoardVotes] = []
        for digest, (spec, board_filter, mask, left_off) in zip(digests, plans, strict=True):
            part = everyone if mask.all() else everyone.narrow(mask)
            if first is not None and spec == SliceSpec():
                counts = first  # the same votes aggregated, in this transaction
            elif part.weight is None or bucket is not None:
                counts = part.counts(bucket_seconds=bucket)  # whole votes: the GROUP BY's cells
            else:
                counts = load_pair_counts(conn, filters=board_filter)
            counts = counted_votes(counts)
            clusters = choose_clusters(part, counts, request.cluster) if clustered else None
            if spec != SliceSpec() and agreement is not None:  # judges voted: each board's own report
                report = agreement_from_store(conn, board_filter)
            else:  # the overall board's, or none: no judge voted in any board
                report = agreement
            stored = StoredVotes(
                counts,
                digest.hexdigest(board_filter),
                None,
                report,
                clusters,
                judges=judge_votes(conn, part),
                clustering=clustering_record(part, request.cluster, clusters) if clustered else None,
                flagged=flagged_report(conn, board_filter),
                who=part,
            )
            boards.append(BoardVotes(spec, board_filter, stored, left_off))
    return EveryBoard(boards, found)


def _plan(
    keys: SliceKeys,
    names: tuple[str, ...],
    lookup: npt.NDArray[np.int64],
    base: VoteFilter,
    slices: Sequence[SliceSpec] | None,
    min_votes: int,
    min_model_votes: int,
) -> tuple[list[BoardPlan], list[dict[str, Any]]]:
    """Each board's spec, filter, mask over the votes and models left off; and what was found."""
    a, b = lookup[keys.model_a_id], lookup[keys.model_b_id]
    asked = slices is not None
    if slices is None:
        per_category, per_language = keys.votes_per()
        slices = [
            SliceSpec(),
            *(SliceSpec(category=c) for c in per_category),
            *(SliceSpec(language=lang) for lang in per_language),
        ]
    plans: list[BoardPlan] = []
    found: list[dict[str, Any]] = []
    for spec in slices:
        mask = keys.mask(category=spec.category, language=spec.language)
        if spec == SliceSpec():
            plans.append(BoardPlan(spec, base, mask, None))
            continue
        n_votes = int(mask.sum())
        left_off = sparse_models(names, a[mask], b[mask], np.ones(n_votes), min_model_votes)
        board_filter = replace(base, category=spec.category, language=spec.language)
        if left_off:
            out = np.zeros(len(names), dtype=bool)
            out[[names.index(m) for m in left_off]] = True
            mask = mask & ~(out[a] | out[b])
            added = tuple(m for m in sorted(left_off) if m not in base.exclude_models)
            board_filter = replace(board_filter, exclude_models=(*base.exclude_models, *added))
        counted = int(mask.sum())
        published = asked or counted >= min_votes
        found.append({"slice": spec.label, "votes": n_votes, "counted": counted, "published": published})
        if published:
            plans.append(BoardPlan(spec, board_filter, mask, left_off))
    return plans, found


class SliceOptions(NamedTuple):
    """What :func:`publish_slices` was asked for, as its boards need it."""

    request: FitRequest
    slices: Sequence[SliceSpec] | None
    min_votes: int
    min_model_votes: int
    plots: bool
    slice_plots: bool
    created_at: datetime

    def plots_of(self, spec: SliceSpec) -> bool:
        return self.plots if spec == SliceSpec() else self.plots and self.slice_plots

    def notes(
        self, spec: SliceSpec, left_off: dict[str, int] | None, found: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The overall board lists the other boards found; each other board the models it left off."""
        if spec == SliceSpec():
            return {
                "slice_boards": {
                    "min_votes": self.min_votes,
                    "min_model_votes": self.min_model_votes,
                    "slices": found,
                }
            }
        return {"left_off": board_left_off(left_off, self.min_model_votes)}
