"""Clustered votes: the cluster bootstrap, the cluster-robust sandwich and the per-cluster cell counts."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from leaderboard import (
    Battles,
    BTSpec,
    FitRequest,
    PairCounts,
    bootstrap_ratings,
    cluster_cells,
    compute_leaderboard,
    fit_bt,
    parse_cluster,
    sandwich_intervals,
    simulate_battles,
)

TRUTH = np.linspace(850, 1150, 8)
DAVIDSON_POSITION = BTSpec(position="common", ties="davidson")


def test_parse_cluster() -> None:
    assert parse_cluster("annotator") == ("annotator",)
    assert parse_cluster("prompt, annotator") == ("annotator", "prompt")
    assert parse_cluster(None) == () and parse_cluster("none") == ()
    with pytest.raises(ValueError, match="--cluster"):
        parse_cluster("judge")


def test_cluster_cells_count_every_vote_once() -> None:
    sim = simulate_battles(TRUTH, 3000, random_state=2, n_annotators=40, n_prompts=70, tie_rate=0.2)
    counts = sim.counts()
    for by, levels in (("annotator", (40,)), ("prompt", (70,)), ("annotator,prompt", (40, 70))):
        clusters = cluster_cells(sim, counts, by)
        assert clusters.n_levels == levels
        assert np.allclose(np.asarray(clusters.members.sum(axis=0)).ravel(), counts.vote_counts)
    one = cluster_cells(sim, counts, "annotator")
    per_annotator = np.asarray(one.members.sum(axis=1)).ravel()
    assert sim.annotator is not None
    # clusters are numbered in order of first appearance (as a store and its export both see them)
    _, first = np.unique(sim.annotator, return_index=True)
    in_order = np.argsort(first)
    assert np.array_equal(per_annotator, np.bincount(sim.annotator, minlength=40)[in_order])


def test_cluster_cells_refuses_what_it_cannot_use() -> None:
    sim = simulate_battles(TRUTH, 500, random_state=3, n_annotators=10)
    with pytest.raises(ValueError, match="prompt ids"):
        cluster_cells(sim, sim.counts(), "prompt")
    other = simulate_battles(TRUTH, 500, random_state=4, n_annotators=10)
    with pytest.raises(ValueError, match="aggregate"):
        cluster_cells(sim, other.counts(), "annotator")
    with pytest.raises(ValueError, match="time buckets"):
        cluster_cells(sim, sim.counts(bucket_seconds=0.1), "annotator")


def test_missing_ids_stand_alone() -> None:
    sim = simulate_battles(TRUTH, 400, random_state=5, n_annotators=4)
    ids = sim.annotator.copy()  # type: ignore[union-attr]
    ids[:10] = -1
    clusters = cluster_cells(replace(sim, annotator=ids), sim.counts(), "annotator")
    assert clusters.n_levels == (len(np.unique(ids[10:])) + 10,)


@pytest.mark.parametrize("spec", [BTSpec(), DAVIDSON_POSITION])
def test_singleton_clusters_give_the_vote_sandwich(spec: BTSpec) -> None:
    """One vote per cluster: the cluster meat is the per-vote meat times G / (G - 1)."""
    sim = simulate_battles(TRUTH, 2000, random_state=6, position=40, nu=0.4, tie_rate=0.0)
    sim = replace(sim, annotator=np.arange(len(sim)))
    counts = sim.counts()
    fit = fit_bt(counts, spec=spec)
    plain = sandwich_intervals(counts, fit=fit)
    clustered = sandwich_intervals(counts, fit=fit, clusters=cluster_cells(sim, counts, "annotator"))
    factor = np.sqrt(len(sim) / (len(sim) - 1))
    assert np.allclose(clustered.se, plain.se * factor, rtol=1e-8)
    assert clustered.kind == "sandwich:annotator"


def _annotator_board(seed: int) -> tuple[Battles, PairCounts]:
    sim = simulate_battles(
        TRUTH,
        6000,
        random_state=seed,
        position=50,
        nu=0.5,
        n_annotators=30,
        annotator_sd=60,
        annotator_position_sd=120,
    )
    return sim, sim.counts()


def test_clustered_intervals_widen_under_annotator_dependence() -> None:
    sim, counts = _annotator_board(7)
    clusters = cluster_cells(sim, counts, "annotator")
    fit = fit_bt(counts, spec=DAVIDSON_POSITION)
    iid = bootstrap_ratings(counts, fit=fit, n_rounds=150, random_state=1)
    clu = bootstrap_ratings(counts, fit=fit, n_rounds=150, random_state=1, clusters=clusters)
    sw = sandwich_intervals(counts, fit=fit, clusters=clusters)
    sw_iid = sandwich_intervals(counts, fit=fit)

    def width(extra: dict[str, tuple[float, float, float]], name: str) -> float:
        return extra[name][2] - extra[name][1]

    name = "position_advantage_elo"
    # side bias sd 120 over 30 annotators: sd of the mean about 22 points, against about 5 from votes
    assert width(clu.extra, name) > 2.5 * width(iid.extra, name)
    assert width(sw.extra, name) > 2.5 * width(sw_iid.extra, name)
    assert 0.7 < width(clu.extra, name) / width(sw.extra, name) < 1.4
    assert np.mean(clu.ci_high - clu.ci_low) > 1.3 * np.mean(iid.ci_high - iid.ci_low)


def test_cluster_bootstrap_is_seeded_and_thread_independent() -> None:
    sim, counts = _annotator_board(8)
    clusters = cluster_cells(sim, counts, "annotator")
    one = bootstrap_ratings(counts, n_rounds=60, random_state=3, n_jobs=1, clusters=clusters)
    two = bootstrap_ratings(counts, n_rounds=60, random_state=3, n_jobs=2, clusters=clusters)
    plain = bootstrap_ratings(counts, n_rounds=60, random_state=3)
    assert np.array_equal(one.ratings, two.ratings)
    assert not np.array_equal(one.ratings, plain.ratings)


def test_two_way_clusters_are_no_narrower_than_either_way() -> None:
    sim = simulate_battles(
        TRUTH, 6000, random_state=9, n_annotators=40, annotator_sd=50, n_prompts=60, prompt_sd=50
    )
    counts = sim.counts()
    fit = fit_bt(counts)
    widths = {}
    for by in ("annotator", "prompt", "annotator,prompt"):
        boot = bootstrap_ratings(counts, fit=fit, n_rounds=200, clusters=cluster_cells(sim, counts, by))
        widths[by] = float(np.mean(boot.ci_high - boot.ci_low))
    assert widths["annotator,prompt"] > 0.95 * max(widths["annotator"], widths["prompt"])
    sw = sandwich_intervals(counts, fit=fit, clusters=cluster_cells(sim, counts, "annotator,prompt"))
    assert np.all(np.isfinite(sw.se)) and np.all(sw.se > 0)


def test_compute_leaderboard_records_the_clustering() -> None:
    sim, counts = _annotator_board(10)
    clusters = cluster_cells(sim, counts, "annotator")
    board = compute_leaderboard(counts, FitRequest(n_rounds=40), clusters=clusters)
    assert board.parameters["cluster"] == "annotator" and board.parameters["cluster_counts"] == [30]
    sw = compute_leaderboard(
        counts, FitRequest(method="davidson-position", interval="sandwich"), clusters=clusters
    )
    assert sw.parameters["cluster"] == "annotator"
    assert "cluster" not in compute_leaderboard(counts, FitRequest(n_rounds=20)).parameters
