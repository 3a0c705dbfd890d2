"""Prometheus metrics of the web side and their exposition: votes accepted and refused, battles issued,
request latency by route, votes waiting for their commit, publishing; the ``/metrics`` text.

Counts and timings only: no label names an annotator, a session, an address or a battle. Route labels
are route templates (``/battles/{battle_id}``), never raw paths, so the series stay few.

Under several workers every process writes its samples to files in ``PROMETHEUS_MULTIPROC_DIR``
(`arena serve --workers N` makes a private one) and :func:`render_metrics` sums them; with one process
the default registry is read.
"""

from __future__ import annotations

import time

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "BATTLES_ISSUED",
    "CONTENT_TYPE_LATEST",
    "PUBLISH_SECONDS",
    "REFUSAL_REASONS",
    "REQUEST_SECONDS",
    "VOTES_ACCEPTED",
    "VOTES_AWAITING_COMMIT",
    "VOTES_REFUSED",
    "VOTE_COMMIT_WAIT_SECONDS",
    "RequestMetricsMiddleware",
    "count_refusal",
    "render_metrics",
]

#: Why a vote was refused; the ``reason`` label of ``arena_votes_refused_total`` takes only these.
REFUSAL_REASONS = (
    "csrf",  # missing or wrong CSRF token
    "rate_limited",
    "token_forged",
    "token_expired",
    "token_foreign",
    "already_voted",  # the battle has a vote with another winner (a replayed token)
    "invalid",  # refused by the store for another reason (e.g. the pair was already judged)
    "bad_choice",  # not one of the four outcomes
)

VOTES_ACCEPTED = Counter(
    "arena_votes_accepted", "Votes recorded (committed), retries of a stored vote excluded."
)
VOTES_REFUSED = Counter("arena_votes_refused", "Votes refused, by reason.", ["reason"])
BATTLES_ISSUED = Counter("arena_battles_issued", "Battles issued (a token handed out).")
REQUEST_SECONDS = Histogram(
    "arena_request_duration_seconds",
    "Time to answer an HTTP request, by route template and method.",
    ["route", "method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
VOTES_AWAITING_COMMIT = Gauge(
    "arena_votes_awaiting_commit",
    "Votes handed to the vote writer and not yet committed (the writer's queue as the workers see it).",
    multiprocess_mode="livesum",
)
VOTE_COMMIT_WAIT_SECONDS = Histogram(
    "arena_vote_commit_wait_seconds",
    "Time a vote request waits for the vote writer's durable commit.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
PUBLISH_SECONDS = Histogram(
    "arena_publish_duration_seconds",
    "Time to fit and publish a snapshot, by result (ok or error).",
    ["result"],
    buckets=(0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0),
)
FLAGGED_ANNOTATORS_NAME = "arena_flagged_annotators"

_REFUSED = {reason: VOTES_REFUSED.labels(reason=reason) for reason in REFUSAL_REASONS}


def count_refusal(reason: str) -> None:
    """Count one refused vote; ``reason`` is one of :data:`REFUSAL_REASONS`."""
    _REFUSED[reason].inc()


def render_metrics(*, multiprocess_dir: str | None, flagged_annotators: int | None) -> bytes:
    """The Prometheus text of every metric: summed over the workers' files when ``multiprocess_dir`` is
    set, this process's registry otherwise; plus the number of flagged annotators when given."""
    if multiprocess_dir:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=multiprocess_dir)  # type: ignore[no-untyped-call]
        text = generate_latest(registry)
    else:
        text = generate_latest(REGISTRY)
    if flagged_annotators is not None:
        extra = CollectorRegistry()
        gauge = Gauge(
            FLAGGED_ANNOTATORS_NAME, "Annotators flagged (their votes do not count).", registry=extra
        )
        gauge.set(flagged_annotators)
        text += generate_latest(extra)
    return text


class RequestMetricsMiddleware:
    """Times every HTTP request into ``arena_request_duration_seconds`` under its route template."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or (
                "static" if scope["path"].startswith("/static") else "unmatched"
            )
            REQUEST_SECONDS.labels(route=template, method=scope["method"]).observe(
                time.perf_counter() - started
            )
