"""Votes of unequal weight in one cell: the sandwich and the bootstrap count each vote's own weight.

A cell's likelihood needs only its weight total, but the variance of that total is a sum over its votes;
taking every vote at the cell's mean weight understates it (``sum w^2 >= (sum w)^2 / n``). The direct
computations here are written out vote by vote, apart from the package's cell machinery.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from leaderboard.battles import Battles
from leaderboard.bt.bootstrap import bootstrap_ratings, draw_weight_totals
from leaderboard.bt.clusters import cluster_cells
from leaderboard.bt.fit import BTFit, fit_bt
from leaderboard.bt.intervals import sandwich_intervals
from leaderboard.bt.spec import BTSpec
from leaderboard.data import Outcome, PairCounts

MODELS = ("m0", "m1", "m2", "m3")
DAVIDSON_POSITION = BTSpec(position="common", ties="davidson")


def _battles(n: int = 240, seed: int = 11) -> Battles:
    """Every pair both ways, ties included; weights spread within every cell; two votes per annotator."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(1, 4, n)) % 4
    strength = np.array([0.0, 0.5, 0.9, 1.4])
    h = 0.5 * (strength[a] - strength[b] + 0.2)
    d = np.exp(h) + np.exp(-h) + 0.6
    u = rng.random(n)
    outcome = np.where(
        u < np.exp(h) / d, Outcome.MODEL_A, np.where(u < (np.exp(h) + 0.6) / d, Outcome.TIE, Outcome.MODEL_B)
    ).astype(np.int8)
    return Battles(
        models=MODELS,
        model_a=a,
        model_b=b,
        outcome=outcome,
        annotator=np.arange(n) // 2,
        weight=rng.choice([0.2, 1.0, 5.0], n),
    )


def _vote_scores(fit: BTFit, votes: Battles) -> np.ndarray:
    """Per-vote gradients of the log-likelihood w.r.t. ``fit.x``, from the formulas, one row per vote."""
    a, b = votes.model_a, votes.model_b
    n, m = len(votes), len(fit.models)
    sign = np.select([votes.outcome == Outcome.MODEL_A, votes.outcome == Outcome.MODEL_B], [1.0, -1.0], 0.0)
    tie = (votes.outcome == Outcome.TIE).astype(float)
    rows = np.arange(n)
    if fit.spec.is_plain:  # x is the centred log10 strength; a tie scores half a win
        ln = math.log(fit.base)
        p = 1.0 / (1.0 + np.exp(-(fit.x[a] - fit.x[b]) * ln))
        g = ln * ((sign + 1.0) / 2.0 - p)
        out = np.zeros((n, m))
        np.add.at(out, (rows, a), g)
        np.add.at(out, (rows, b), -g)
        return out
    # Davidson with a common position term: x = (strengths, the last at 0; position; log nu)
    beta = np.append(fit.x[: m - 1], 0.0)
    t = fit.x[-1]
    h = 0.5 * (beta[a] - beta[b] + fit.x[m - 1])
    d = np.exp(h) + np.exp(-h) + np.exp(t)
    l_u = 0.5 * (sign - (np.exp(h) - np.exp(-h)) / d)
    design = np.zeros((n, m))
    np.add.at(design, (rows, a), 1.0)
    np.add.at(design, (rows, b), -1.0)
    design[:, m - 1] = 1.0  # the last model's column is the position's
    return np.column_stack([design * l_u[:, None], tie - np.exp(t) / d])


def _direct_se(fit: BTFit, meat: np.ndarray) -> np.ndarray:
    h_inv = np.linalg.pinv(fit.hessian, hermitian=True)
    cov = h_inv @ meat @ h_inv
    if fit.coef_map is not None:
        cov = fit.coef_map @ cov @ fit.coef_map.T
    return np.asarray(fit.scale * np.sqrt(np.diag(cov)))


def _mean_weight(counts: PairCounts) -> PairCounts:
    """The same cells without the squared weights: each vote at its cell's mean weight (the old way)."""
    return replace(counts, weight_sq=None)


@pytest.mark.parametrize("spec", [BTSpec(), DAVIDSON_POSITION], ids=["plain", "davidson-position"])
def test_the_sandwich_sums_each_votes_own_squared_weight(spec: BTSpec) -> None:
    votes = _battles()
    assert votes.weight is not None
    counts = votes.counts()
    assert np.any(counts.weight_spread > 0)  # weights really differ within cells
    fit = fit_bt(counts, spec=spec)
    g = _vote_scores(fit, votes) * votes.weight[:, None]
    meat = g.T @ g
    scale = float(np.abs(meat).max())
    np.testing.assert_allclose(fit.score_outer, meat, rtol=0, atol=1e-9 * scale)
    se = sandwich_intervals(counts, fit=fit).se
    np.testing.assert_allclose(se, _direct_se(fit, meat), rtol=1e-9)


@pytest.mark.parametrize("spec", [BTSpec(), DAVIDSON_POSITION], ids=["plain", "davidson-position"])
def test_taking_votes_at_their_cells_mean_weight_gives_narrower_intervals(spec: BTSpec) -> None:
    counts = _battles().counts()
    new = sandwich_intervals(counts, fit=fit_bt(counts, spec=spec))
    old = sandwich_intervals(counts, fit=fit_bt(_mean_weight(counts), spec=spec))
    np.testing.assert_allclose(new.rating, old.rating, atol=1e-9)  # the same estimate
    assert np.all(old.se < 0.97 * new.se)


@pytest.mark.parametrize("spec", [BTSpec(), DAVIDSON_POSITION], ids=["plain", "davidson-position"])
def test_the_cluster_sandwich_sums_each_clusters_own_weights(spec: BTSpec) -> None:
    votes = _battles()
    assert votes.weight is not None and votes.annotator is not None
    counts = votes.counts()
    clusters = cluster_cells(votes, counts, "annotator")
    assert clusters.weighted is not None
    fit = fit_bt(counts, spec=spec)
    g = _vote_scores(fit, votes) * votes.weight[:, None]
    groups = int(votes.annotator.max()) + 1
    per_cluster = np.zeros((groups, g.shape[1]))
    np.add.at(per_cluster, votes.annotator, g)
    meat = groups / (groups - 1) * per_cluster.T @ per_cluster
    se = sandwich_intervals(counts, fit=fit, clusters=clusters).se
    np.testing.assert_allclose(se, _direct_se(fit, meat), rtol=1e-9)
    old = sandwich_intervals(counts, fit=fit, clusters=replace(clusters, weighted=None)).se
    assert np.all(old < 0.97 * se)


def test_drawn_weight_totals_have_the_per_vote_mean_and_variance() -> None:
    rng = np.random.default_rng(0)
    draws = np.tile(np.array([0.0, 1.0, 3.0, 7.0]), (200_000, 1))
    mean, spread = np.array([2.0, 2.0, 2.0, 0.5]), np.array([1.5, 1.5, 1.5, 0.0])
    totals = draw_weight_totals(draws, mean, spread, rng) * mean  # back from votes at the mean weight
    np.testing.assert_allclose(totals[:, 0], 0.0)
    np.testing.assert_allclose(totals.mean(axis=0), [0.0, 2.0, 6.0, 3.5], rtol=0.01)
    np.testing.assert_allclose(totals[:, 1:3].var(axis=0), [1.5, 4.5], rtol=0.03)
    assert np.all(totals[:, 3] == 3.5)  # no spread: the draws as they were
    same = np.ones((3, 2))
    assert draw_weight_totals(same, np.ones(2), np.zeros(2), rng) is same


@pytest.mark.parametrize("spec", [BTSpec(), DAVIDSON_POSITION], ids=["plain", "davidson-position"])
def test_the_bootstrap_spreads_as_the_sandwich_and_wider_than_at_the_mean_weight(spec: BTSpec) -> None:
    counts = _battles(n=600, seed=5).counts()
    fit = fit_bt(counts, spec=spec)
    se = sandwich_intervals(counts, fit=fit).se
    sd = bootstrap_ratings(counts, fit=fit, n_rounds=150, random_state=1).ratings.std(axis=0)
    old_counts = _mean_weight(counts)
    old_fit = fit_bt(old_counts, spec=spec)
    old_sd = bootstrap_ratings(old_counts, fit=old_fit, n_rounds=150, random_state=1).ratings.std(axis=0)
    assert np.mean(sd) == pytest.approx(np.mean(se), rel=0.1)
    assert np.mean(old_sd) < 0.9 * np.mean(sd)


def test_equal_weights_within_cells_draw_the_same_rounds_bit_for_bit() -> None:
    votes = _battles()
    even = replace(votes, weight=np.where(votes.outcome == Outcome.TIE, 0.5, 2.0))
    counts = even.counts()
    assert counts.is_weighted and not np.any(counts.weight_spread > 0)
    for spec in (BTSpec(), DAVIDSON_POSITION):
        new = bootstrap_ratings(counts, fit=fit_bt(counts, spec=spec), n_rounds=20, random_state=3)
        old_counts = _mean_weight(counts)
        old = bootstrap_ratings(old_counts, fit=fit_bt(old_counts, spec=spec), n_rounds=20, random_state=3)
        assert new.ratings.tobytes() == old.ratings.tobytes()
