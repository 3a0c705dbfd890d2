"""Forecast scores beyond the log-loss: per-vote losses, AUC, calibration, the fitted scale, the paired
bootstrap; each checked against the plain computation on small data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from leaderboard.bt.fit import fit_bt
from leaderboard.data import aggregate_codes
from leaderboard.evaluation.calibration import (
    auc_of,
    calibration_table,
    fitted_scale,
    implied_difference,
    paired_bootstrap_difference,
    vote_log_losses,
)
from leaderboard.evaluation.held_out import score_forecasts
from leaderboard.evaluation.simulate import simulate_battles

TRUE = np.array([1000.0, 1200.0, 900.0, 1350.0, 1100.0])
SCALE_TOL = 25.0


def test_vote_log_losses_are_minus_log_of_the_observed_column() -> None:
    proba = np.array([[0.5, 0.2, 0.3], [0.1, 0.3, 0.6], [0.25, 0.5, 0.25], [0.2, 0.4, 0.4]])
    outcome = np.array([0, 1, 2, 3])
    expected = -np.log([0.5, 0.6, 0.5, 0.4])
    assert np.allclose(vote_log_losses(proba, outcome), expected)
    assert score_forecasts(proba, outcome)["log_loss"] == pytest.approx(expected.mean())


def test_auc_counts_correctly_ordered_pairs_of_decisive_votes() -> None:
    rng = np.random.default_rng(3)
    p_left = rng.random(40)
    tie = np.full(40, 0.1)
    proba = np.column_stack([(1 - tie) * p_left, tie, (1 - tie) * (1 - p_left)])
    outcome = np.where(rng.random(40) < p_left, 0, 1)
    outcome[:5] = 2  # ties take no part
    pos = p_left[5:][outcome[5:] == 0]
    neg = p_left[5:][outcome[5:] == 1]
    pairs = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    assert auc_of(proba, outcome) == pytest.approx(pairs / (pos.size * neg.size))
    assert math.isnan(auc_of(proba[:3], np.array([0, 0, 2])))


def test_calibration_table_bins_by_implied_difference() -> None:
    # implied differences of 0 and of +-400 log10(3) = +-190.8 points
    proba = np.array([[0.45, 0.1, 0.45], [0.45, 0.1, 0.45], [0.6, 0.2, 0.2], [0.2, 0.2, 0.6]])
    outcome = np.array([0, 2, 1, 1])
    assert np.allclose(implied_difference(proba), [0.0, 0.0, 400 * math.log10(3), -400 * math.log10(3)])
    table = calibration_table(proba, outcome)
    by_low = {row["low"]: row for row in table}
    assert sum(row["n"] for row in table) == 4
    even = by_low[0.0]
    assert (
        even["n"] == 2 and even["expected"] == pytest.approx(0.5) and even["observed"] == pytest.approx(0.75)
    )
    assert by_low[100.0]["observed"] == 0.0 and by_low[100.0]["expected"] == pytest.approx(0.7)
    assert by_low[-200.0]["expected"] == pytest.approx(0.3)


@pytest.mark.parametrize("scale", [400.0, 480.0])
def test_fitted_scale_recovers_the_scale_that_generated_the_votes(scale: float) -> None:
    b = simulate_battles(TRUE, 30_000, scale=scale, random_state=5)
    diff = TRUE[b.model_a] - TRUE[b.model_b]
    fit = fitted_scale(diff, b.outcome)
    assert fit["scale"] == pytest.approx(scale, abs=SCALE_TOL)
    assert fit["slope"] == pytest.approx(400.0 / fit["scale"])


def test_fitted_scale_of_bradley_terry_on_its_own_votes_is_exactly_one() -> None:
    # the Bradley-Terry MLE is stationary along the direction that stretches all ratings
    b = simulate_battles(TRUE, 4000, tie_rate=0.2, random_state=9)
    fit = fit_bt(aggregate_codes(b.model_a, b.model_b, b.outcome, models=b.models))
    diff = fit.rating[b.model_a] - fit.rating[b.model_b]
    assert fitted_scale(diff, b.outcome)["slope"] == pytest.approx(1.0, abs=1e-6)
    assert math.isnan(fitted_scale(np.zeros(3), np.array([0, 1, 2]))["slope"])


def test_fitted_scale_of_separated_outcomes_is_nan_and_too_few_steps_raise() -> None:
    separated = fitted_scale(np.array([100.0, -100.0, 50.0]), np.array([0, 1, 0]))
    assert math.isnan(separated["slope"]) and math.isnan(separated["scale"])
    b = simulate_battles(TRUE, 500, scale=480.0, random_state=1)
    with pytest.raises(RuntimeError):
        fitted_scale(TRUE[b.model_a] - TRUE[b.model_b], b.outcome, max_iter=1)


def test_paired_bootstrap_of_a_constant_shift_and_of_noise() -> None:
    rng = np.random.default_rng(0)
    a = rng.random(500)
    assert paired_bootstrap_difference(a, a + 0.1, n_rounds=200) == pytest.approx((0.1, 0.1, 0.1))
    b = a + rng.normal(0.05, 0.2, size=500)
    diff, low, high = paired_bootstrap_difference(a, b, n_rounds=500, random_state=1)
    assert diff == pytest.approx(float(np.mean(b - a)))
    assert low < diff < high and high - low < 0.1
    assert paired_bootstrap_difference(a, b, n_rounds=500, random_state=1) == (diff, low, high)
    with pytest.raises(ValueError):
        paired_bootstrap_difference(a, b[:-1])
