"""Prometheus metrics of the storage side: the vote writer's batches (size, write time, commit time).

Recorded wherever a :class:`votes.voting.writer.GroupCommitWriter` runs (a web worker or the shared writer
process); under ``PROMETHEUS_MULTIPROC_DIR`` every process writes its own file and ``/metrics`` sums them.
Counts and timings only.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

__all__ = ["WRITER_BATCH_VOTES", "WRITER_COMMIT_SECONDS", "WRITER_VOTES_WRITTEN", "WRITER_WRITE_SECONDS"]

#: Latency buckets for the writer, from a fraction of a millisecond to a stalled disk.
WRITER_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

WRITER_WRITE_SECONDS = Histogram(
    "arena_vote_writer_write_seconds",
    "Time a vote batch spends writing its rows and its live-rating (Elo) updates, before the commit.",
    buckets=WRITER_BUCKETS,
)
WRITER_COMMIT_SECONDS = Histogram(
    "arena_vote_writer_commit_seconds",
    "Time the durable commit of a vote batch takes.",
    buckets=WRITER_BUCKETS,
)
WRITER_BATCH_VOTES = Histogram(
    "arena_vote_writer_batch_votes",
    "Votes per committed batch.",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
)
WRITER_VOTES_WRITTEN = Counter(
    "arena_vote_writer_votes",
    "Votes the vote writer answered after a committed batch (refused ones, e.g. a second winner, included).",
)
