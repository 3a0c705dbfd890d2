"""What a board's intervals are, in words: the level, how they were made, over what, marginal or not, for
which fit, and what the rank range is.

A published interval is read by people who did not run the fit, so a snapshot says what it covers
(``metadata.json`` -> ``intervals``, :func:`describe_intervals`) and its page shows the same. Every
interval here is *marginal*: each model's interval covers its own rating at the level; all models' at
once cover less, and nothing is adjusted for the many comparisons a board invites.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leaderboard.bt.clusters import Clusters
from leaderboard.bt.request import INTERVALS, FitRequest, method_spec
from leaderboard.bt.spec import BTSpec
from leaderboard.result import Leaderboard

__all__ = ["COVERAGE", "describe_fit", "describe_intervals"]

#: The interval kinds of :data:`~leaderboard.bt.request.INTERVALS`, in order, in words.
_METHOD_WORDS = dict(
    zip(
        INTERVALS,
        (
            "percentile bootstrap",
            "sandwich (robust covariance, normal approximation)",
            "none: each interval is the rating itself",
        ),
        strict=True,
    )
)
#: What every board's intervals cover.
COVERAGE = (
    "marginal: each model's interval covers its own rating at the level; the intervals of all models "
    "together cover less (no simultaneous adjustment)"
)
#: What the clusters of :data:`~leaderboard.bt.clusters.CLUSTER_OPTIONS` are, per dimension, in words.
_CLUSTER_WORDS = {"annotator": "annotator clusters", "prompt": "prompt clusters"}
_TIE_WORDS = {
    "none": "ties count as half a win to each side",
    "davidson": "ties by Davidson's model (tie propensity nu)",
    "glenn-david": "ties by Glenn and David's threshold (tau)",
}


def describe_fit(spec: BTSpec) -> str:
    """A Bradley-Terry family member in words: link, ties, position, prior, time weights, both-bad votes."""
    link = "Bradley-Terry (logistic)" if spec.link == "logit" else "Thurstone-Mosteller (normal)"
    parts = [link, _TIE_WORDS.get(spec.ties, f"ties: {spec.ties}")]
    if spec.position == "common":
        parts.append("one left-side advantage")
    elif spec.position != "none":
        parts.append("a left-side advantage per model")
    if spec.prior_sd is not None:
        parts.append(f"normal prior of sd {spec.prior_sd:g} rating points")
    if spec.half_life is not None:
        parts.append(f"votes weighted by age (half-life {spec.half_life:g})")
    if spec.both_bad == "exclude":
        parts.append("both-bad votes left out")
    return ", ".join(parts)


def _unit(request: FitRequest, clusters: Clusters | None, clustering: Mapping[str, Any] | None) -> str:
    """What the intervals treat as the independent unit: what the bootstrap resamples, over what the
    sandwich sums scores."""
    if request.by_source:
        return "battles (each battle's votes together)"
    if clusters is not None:
        sizes = [f"{n} {dim}s" for dim, n in zip(clusters.by, clusters.n_levels, strict=True)]
        if len(clusters.by) > 1:
            return f"annotators and prompts, crossed (pigeonhole; {', '.join(sizes)})"
        return f"{_CLUSTER_WORDS.get(clusters.by[0], clusters.by[0])} ({sizes[0]})"
    if clustering is not None and clustering.get("used") == "none":
        return f"votes (--cluster {clustering.get('asked')}: {clustering.get('reason')})"
    return "votes, as independent"


def _ranks(request: FitRequest, level: float) -> str:
    if request.interval == INTERVALS[0] and request.n_rounds > 0:
        low, high = 100 * (1 - level) / 2, 100 * (1 + level) / 2
        return (
            f"rank_low and rank_high are the {low:g}% and {high:g}% quantiles of the model's rank over "
            "the bootstrap rounds (marginal, like the intervals)"
        )
    return (
        "rank_low is 1 + the models whose interval lies wholly above this model's, rank_high the models "
        "whose upper bound reaches this model's lower bound (from the intervals, no rounds)"
    )


def describe_intervals(
    board: Leaderboard,
    request: FitRequest,
    clusters: Clusters | None = None,
    clustering: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What ``board``'s intervals are (``metadata.json`` -> ``intervals``).

    Parameters
    ----------
    board : Leaderboard
        The fitted board.
    request : FitRequest
        What it was fitted with (method, model options, interval, level, rounds).
    clusters : Clusters, optional
        The clusters the intervals were made over (None: votes as independent).
    clustering : mapping, optional
        :func:`~leaderboard.bt.clusters.clustering_record`: why ``cluster auto`` chose what it chose.

    Returns
    -------
    dict
        ``level``, ``method``, ``rounds`` (bootstrap), ``unit``, ``coverage``, ``fit``, ``ranks``,
        ``rank_ub``: each a number or a sentence.
    """
    level = float(board.parameters.get("level", request.level))
    if request.by_source:
        fit = "source-aware composite: humans pooled, each LLM judge a source of its own"
        if request.rectify:
            fit += f", rectified ({request.rectify})"
    else:
        fit = describe_fit(method_spec(request.method, request.model))
    described: dict[str, Any] = {
        "level": level,
        "method": _METHOD_WORDS.get(board.interval, board.interval),
        "unit": _unit(request, clusters, clustering),
        "coverage": COVERAGE,
        "fit": fit,
        "ranks": _ranks(request, level),
        "rank_ub": "1 + the models whose lower bound is above this model's upper bound",
    }
    if board.interval == INTERVALS[0]:
        described["rounds"] = int(board.parameters.get("n_rounds", request.n_rounds))
    return described
