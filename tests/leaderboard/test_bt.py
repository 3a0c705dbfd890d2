"""Bradley-Terry: aggregated == per-vote fit, sklearn == Newton, properties, errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression

from leaderboard import (
    DisconnectedComparisonError,
    NonConvergenceError,
    Outcome,
    UnboundedRatingWarning,
    aggregate_battles,
    aggregate_codes,
    fit_bt,
    simulate_battles,
)

ELO_TOL = 1e-6


def _per_vote_fit(sim_a: np.ndarray, sim_b: np.ndarray, out: np.ndarray, m: int) -> np.ndarray:
    """The notebook way: one design row per vote (a tie is two rows of weight 1), no aggregation."""
    rows, ys, ws = [], [], []
    for a, b, o in zip(sim_a, sim_b, out, strict=True):
        x = np.zeros(m)
        x[a], x[b] = math.log(10), -math.log(10)
        if o in (Outcome.MODEL_A, Outcome.MODEL_B):
            rows.append(x)
            ys.append(1 if o == Outcome.MODEL_A else 0)
            ws.append(2.0)
        else:
            rows += [x, x]
            ys += [1, 0]
            ws += [1.0, 1.0]
    # last model's column dropped (its coefficient is 0), so Newton's method sees a regular problem
    clf = LogisticRegression(C=np.inf, fit_intercept=False, solver="newton-cholesky", tol=1e-14, max_iter=100)
    clf.fit(np.array(rows)[:, :-1], np.array(ys), sample_weight=np.array(ws))
    full = np.append(clf.coef_[0], 0.0)
    coef = full - full.mean()
    ratings: np.ndarray = 400 * coef + 1000
    return ratings


def test_aggregated_fit_equals_per_vote_fit() -> None:
    sim = simulate_battles(np.linspace(900, 1150, 6), 1500, random_state=11, tie_rate=0.2)
    fit = fit_bt(sim.counts())
    ref = _per_vote_fit(sim.model_a, sim.model_b, sim.outcome, 6)
    assert np.max(np.abs(fit.rating - ref)) < ELO_TOL


def test_sklearn_alone_agrees_with_polished_newton() -> None:
    sim = simulate_battles(
        np.random.default_rng(2).normal(1000, 80, 20), 20_000, random_state=3, tie_rate=0.1
    )
    polished = fit_bt(sim.counts())
    raw = fit_bt(sim.counts(), polish=False)
    assert polished.solver.endswith("newton") and raw.solver == "sklearn-lbfgs"
    assert np.max(np.abs(polished.rating - raw.rating)) < 1e-2
    # the polished optimum has a zero gradient
    assert abs(polished.rating.mean() - 1000) < 1e-9


def test_recovers_truth_and_anchor() -> None:
    truth = np.array([800.0, 1000.0, 1100.0, 1300.0])
    sim = simulate_battles(truth, 200_000, random_state=5)
    fit = fit_bt(sim.counts(), anchor=("model-001", 1000.0))
    assert fit.rating[1] == pytest.approx(1000.0)
    assert np.max(np.abs(fit.rating - truth)) < 10


votes = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 4), st.sampled_from([0, 1, 2, 3])).filter(
        lambda v: v[0] != v[1]
    ),
    min_size=30,
    max_size=80,
)
BASE = [(i, j, o) for i in range(5) for j in range(5) if i != j for o in (0, 1)]  # keeps the MLE finite


@settings(max_examples=25, deadline=None)
@given(votes, st.permutations(range(5)))
def test_relabelling_permutes_ratings(extra: list[tuple[int, int, int]], perm: list[int]) -> None:
    data = np.array(BASE + extra)
    names = [f"m{k}" for k in range(5)]
    c1 = aggregate_codes(data[:, 0], data[:, 1], data[:, 2], models=names)
    p = np.array(perm)
    c2 = aggregate_codes(p[data[:, 0]], p[data[:, 1]], data[:, 2], models=names)
    r1, r2 = fit_bt(c1).rating, fit_bt(c2).rating
    assert np.allclose(r2[p], r1, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(votes, st.integers(0, 4), st.integers(0, 3))
def test_adding_a_win_never_lowers_rating(extra: list[tuple[int, int, int]], winner: int, shift: int) -> None:
    data = BASE + extra
    loser = (winner + 1 + shift) % 5
    names = [f"m{k}" for k in range(5)]
    arr = np.array(data)
    before = fit_bt(aggregate_codes(arr[:, 0], arr[:, 1], arr[:, 2], models=names)).rating[winner]
    arr2 = np.array([*data, (winner, loser, 0)])
    after = fit_bt(aggregate_codes(arr2[:, 0], arr2[:, 1], arr2[:, 2], models=names)).rating[winner]
    assert after >= before - 1e-9


def test_disconnected_raises() -> None:
    c = aggregate_battles(
        ["a", "c", "a", "c"], ["b", "d", "b", "d"], ["model_a", "model_a", "model_b", "model_b"]
    )
    with pytest.raises(DisconnectedComparisonError, match="2 parts"):
        fit_bt(c)


def test_only_wins_warns_or_raises() -> None:
    a = ["a", "b", "a", "b", "c"]
    b = ["b", "a", "c", "c", "b"]
    w = ["model_a", "model_b", "model_a", "model_a", "model_a"]  # a beats everyone; b and c trade wins
    c = aggregate_battles(a, b, w)
    with pytest.warns(UnboundedRatingWarning, match="a"):
        fit = fit_bt(c)
    assert fit.unbounded == ("a",) and np.all(np.isfinite(fit.rating)) and fit.ridge > 0
    with pytest.raises(DisconnectedComparisonError):
        fit_bt(c, on_unbounded="raise")


def test_non_convergence_raises() -> None:
    sim = simulate_battles(np.linspace(700, 1400, 12), 5000, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(NonConvergenceError):
            fit_bt(sim.counts(), max_iter=1, polish=False)
        with pytest.raises(NonConvergenceError):
            fit_bt(sim.counts(), max_iter=1, polish=True)
