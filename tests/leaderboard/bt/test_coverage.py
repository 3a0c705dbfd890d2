"""What a board's intervals are, in words: method, unit, coverage, fit and rank ranges for each request."""

from __future__ import annotations

import numpy as np

from leaderboard.battles import Battles
from leaderboard.bt.clusters import cluster_cells
from leaderboard.bt.compute import compute_leaderboard
from leaderboard.bt.coverage import COVERAGE, describe_fit, describe_intervals
from leaderboard.bt.request import METHODS, FitRequest, ModelOptions, method_spec
from leaderboard.data import PairCounts
from leaderboard.evaluation.simulate import simulate_battles


def _votes() -> tuple[Battles, PairCounts]:
    b = simulate_battles(np.linspace(900, 1100, 4), 600, random_state=1, nu=0.4, n_annotators=6)
    return b, b.counts()


def test_a_bootstrap_over_votes_says_so_with_quantile_ranks() -> None:
    _, counts = _votes()
    request = FitRequest(method="davidson-position", n_rounds=30, level=0.9)
    board = compute_leaderboard(counts, request)
    described = describe_intervals(board, request)
    assert described["level"] == 0.9 and described["rounds"] == 30
    assert described["method"] == "percentile bootstrap" and described["unit"] == "votes, as independent"
    assert described["coverage"] == COVERAGE and described["coverage"].startswith("marginal")
    assert "5% and 95% quantiles of the model's rank" in described["ranks"]
    assert described["fit"] == describe_fit(METHODS["davidson-position"])


def test_a_sandwich_over_annotator_clusters_derives_its_ranks_from_the_intervals() -> None:
    battles, counts = _votes()
    clusters = cluster_cells(battles, counts, "annotator")
    request = FitRequest(interval="sandwich", cluster="annotator")
    board = compute_leaderboard(counts, request, clusters=clusters)
    described = describe_intervals(board, request, clusters)
    assert described["method"].startswith("sandwich") and "rounds" not in described
    assert described["unit"] == "annotator clusters (6 annotators)"
    assert "from the intervals" in described["ranks"]


def test_auto_clustering_that_left_votes_independent_is_named_in_the_unit() -> None:
    _, counts = _votes()
    request = FitRequest(n_rounds=10)
    board = compute_leaderboard(counts, request)
    record = {"asked": "auto", "used": "none", "reason": "6 annotators, fewer than 20: independent"}
    unit = describe_intervals(board, request, None, record)["unit"]
    assert unit == "votes (--cluster auto: 6 annotators, fewer than 20: independent)"


def test_fits_in_words() -> None:
    assert describe_fit(METHODS["bt"]) == "Bradley-Terry (logistic), ties count as half a win to each side"
    options = ModelOptions(prior=150.0, half_life=86400.0, both_bad="exclude", per_model_position=True)
    text = describe_fit(method_spec("glenn-david-position", options))
    assert text.startswith("Thurstone-Mosteller (normal), ties by Glenn and David's threshold (tau)")
    for part in (
        "a left-side advantage per model",
        "prior of sd 150",
        "half-life 86400",
        "both-bad votes left out",
    ):
        assert part in text
