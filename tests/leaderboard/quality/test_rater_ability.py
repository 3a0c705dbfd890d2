"""The rater-ability model: exact derivatives, recovery of discriminations, shrinkage, and its row in the
held-out comparison."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from leaderboard import BTSpec, fit_bt, simulate_battles
from leaderboard.battles import Battles
from leaderboard.evaluation.held_out import RATERS_METHOD, evaluate_methods, split_battles
from leaderboard.quality.rater_ability import RaterAbilityFit, fit_rater_ability, rater_ability_proba
from leaderboard.quality.rater_likelihood import RaterProblem

TRUTH = np.linspace(850, 1150, 6)
#: Three annotators: a noisy one, an ordinary one, a sharp one (geometric mean 1, what the prior centres).
DISC = np.array([1 / 3, 1.0, 3.0])


def _votes(n: int = 9000, seed: int = 1) -> Battles:
    return simulate_battles(
        TRUTH, n, random_state=seed, position=40, nu=0.4, n_annotators=3, annotator_discrimination=DISC
    )


@pytest.mark.parametrize("position_sd", [None, 0.7])
def test_gradient_and_hessian_are_the_derivatives_of_the_objective(position_sd: float | None) -> None:
    sim = simulate_battles(TRUTH, 600, random_state=2, position=30, nu=0.5, n_annotators=4)
    assert sim.annotator is not None and sim.sided is None
    codes = np.where(np.arange(len(sim)) % 7 == 0, -1, sim.annotator)  # some votes without an annotator
    sided = np.arange(len(sim)) % 5 != 0  # and some that do not know their side
    problem = RaterProblem(replace(sim, annotator=codes, sided=sided), codes, 4, 0.5, position_sd)
    assert problem.size == len(TRUTH) - 1 + 1 + 1 + 4 + (4 if position_sd else 0)
    x = np.random.default_rng(0).normal(0.0, 0.4, problem.size)
    _, grad = problem.value_grad(x)
    numeric = approx_fprime(x, lambda z: problem.value_grad(z)[0], 1e-7)
    assert np.max(np.abs(numeric - grad)) < 1e-5
    step = 1e-6
    columns = [
        (problem.value_grad(x + step * e)[1] - problem.value_grad(x - step * e)[1]) / (2 * step)
        for e in np.eye(problem.size)
    ]
    numeric_h = np.array(columns) * problem.total
    hess = problem.hessian(x)
    assert np.max(np.abs(numeric_h - hess)) < 1e-4 * np.max(np.abs(hess))
    linear = slice(0, problem.n_linear)  # the cheap diagonal is exact where eta is linear
    np.testing.assert_allclose(problem.hessian_diagonal(x)[linear], np.diag(hess)[linear], rtol=1e-9)


#: Four annotators' own left-side advantages (Elo): two LLM-judge-like opposites and two mild ones.
SIDES = np.array([350.0, -135.0, 0.0, 165.0])


def _sided_votes(n_each: int, seed: int) -> Battles:
    """Votes of four annotators, each with its own side bias (the common discrimination 1)."""
    parts = [
        simulate_battles(TRUTH, n_each, random_state=seed + k, position=float(p), nu=0.4)
        for k, p in enumerate(SIDES)
    ]
    return Battles(
        models=parts[0].models,
        model_a=np.concatenate([p.model_a for p in parts]),
        model_b=np.concatenate([p.model_b for p in parts]),
        outcome=np.concatenate([p.outcome for p in parts]),
        annotator=np.repeat(np.arange(len(SIDES), dtype=np.int64), n_each),
    )


def test_per_annotator_position_offsets_recover_each_side_bias_and_forecast_better() -> None:
    votes = _sided_votes(2500, seed=10)
    train, test = split_battles(votes, test_fraction=0.25, random_state=0)
    shared = fit_rater_ability(train)
    own = fit_rater_ability(train, position_sd="estimate")
    elo = 400 / math.log(10)
    assert own.position_sd is not None and shared.position_sd is None and shared.position_offsets.size == 0
    # each annotator's own term within its interval of the truth (on its discrimination's scale, about 1)
    own_elo = (own.position + own.position_offsets) * own.discrimination * elo
    assert np.all(np.abs(own_elo - SIDES) < 4 * own.se_annotator_position * elo + 10), own_elo
    # the estimated spread is the annotators' (sample sd of SIDES: 209 Elo), not the votes' noise
    assert 120 < own.position_sd * elo < 320
    # the pooled term's error carries that spread: about sd / sqrt(4), not the shared fit's few Elo
    assert own.se_position * elo > 60 > 4 * shared.se_position * elo
    assert own.n_params == shared.n_params + 4

    def loss(fit: RaterAbilityFit) -> float:
        proba = rater_ability_proba(fit, test)
        column = np.array([0, 2, 1, 1])[test.outcome.astype(np.int64)]
        return float(-np.mean(np.log(proba[np.arange(len(test)), column])))

    assert loss(own) < loss(shared) - 0.02
    # a newcomer or an anonymous vote gets the common term, not some annotator's
    probe = replace(test.take(np.arange(3)), annotator=np.array([9, -1, 9]))
    np.testing.assert_allclose(own.vote_position(probe.annotator, 3), own.position)


def test_annotators_without_their_own_side_bias_get_no_spread() -> None:
    """One side bias for all: the estimated spread of the offsets is at its floor, and the fit is the
    shared-term one (the votes' noise is not taken for annotators' differences)."""
    votes = _votes(6000, seed=5)
    shared = fit_rater_ability(votes)
    own = fit_rater_ability(votes, position_sd="estimate")
    assert own.position_sd is not None and own.position_sd <= 0.011
    assert own.position == pytest.approx(shared.position, abs=2e-3)
    np.testing.assert_allclose(own.log_a, shared.log_a, atol=2e-3)


def test_a_tight_offset_prior_gives_the_shared_position_fit() -> None:
    votes = _sided_votes(800, seed=20)
    shared = fit_rater_ability(votes)
    tight = fit_rater_ability(votes, position_sd=1e-5)
    np.testing.assert_allclose(tight.position_offsets, 0.0, atol=1e-6)
    assert tight.position == pytest.approx(shared.position, abs=1e-4)
    np.testing.assert_allclose(tight.log_a, shared.log_a, atol=1e-4)
    with pytest.raises(ValueError, match="position_sd"):
        fit_rater_ability(votes, position_sd=0.0)
    with pytest.raises(ValueError, match="position_sd"):
        fit_rater_ability(votes, position_sd="guess")  # type: ignore[arg-type]


def test_recovers_each_annotators_discrimination() -> None:
    fit = fit_rater_ability(_votes())
    assert fit.labels == ("annotator-0", "annotator-1", "annotator-2")
    np.testing.assert_allclose(fit.discrimination, DISC, rtol=0.2)
    low = np.exp(fit.log_a - 1.96 * fit.se_log_a)
    high = np.exp(fit.log_a + 1.96 * fit.se_log_a)
    assert np.all(low < DISC) and np.all(DISC < high)
    np.testing.assert_allclose(fit.rating - fit.rating.mean(), TRUTH - TRUTH.mean(), atol=45)
    assert 20 < fit.position * 400 / math.log(10) < 60


def test_an_annotator_with_few_votes_stays_near_one() -> None:
    sim = _votes(6000)
    # a fourth annotator with five votes, each against the better model: alone it would look contrarian
    few = np.flatnonzero(sim.model_a > sim.model_b)[:5]
    assert sim.annotator is not None
    annotator = sim.annotator.copy()
    annotator[few] = 3
    outcome = sim.outcome.copy()
    outcome[few] = 1  # the right (weaker) side wins
    votes = replace(sim, annotator=annotator, outcome=outcome)
    fit = fit_rater_ability(votes)
    loose = fit_rater_ability(votes, prior_sd=5.0)
    assert fit.n_votes[3] == 5
    assert loose.discrimination[3] < 0.1  # its votes alone say "no discrimination at all"
    assert 0.5 < fit.discrimination[3] < 1.0  # the prior keeps it near 1
    assert fit.discrimination[2] > 2  # the well-observed sharp annotator keeps its estimate
    # the data fix only ratios of discriminations (the prior fixes their scale): those agree
    ratio = fit.discrimination[2] / fit.discrimination[1]
    assert loose.discrimination[2] / loose.discrimination[1] == pytest.approx(ratio, rel=0.15)


def test_a_tight_prior_gives_the_unweighted_davidson_position_fit() -> None:
    sim = _votes(4000)
    fit = fit_rater_ability(sim, prior_sd=1e-4)
    plain = fit_bt(sim.counts(), spec=BTSpec(position="common", ties="davidson"))
    np.testing.assert_allclose(fit.discrimination, 1.0, atol=1e-3)
    np.testing.assert_allclose(fit.theta, plain.theta, atol=2e-3)
    assert fit.position == pytest.approx(float(plain.position[0]), abs=2e-3)
    assert fit.log_nu == pytest.approx(plain.log_nu, abs=2e-3)


def test_forecasts_a_newcomer_and_an_anonymous_vote_with_discrimination_one() -> None:
    sim = _votes(3000)
    fit = fit_rater_ability(sim)
    probe = sim.take(np.arange(4))
    newcomer = replace(probe, annotator=np.array([7, -1, 7, -1]))
    plain_a = replace(fit, log_a=np.zeros(3))
    np.testing.assert_allclose(rater_ability_proba(fit, newcomer), rater_ability_proba(plain_a, newcomer))
    rows = rater_ability_proba(fit, sim)
    np.testing.assert_allclose(rows.sum(axis=1), 1.0)


def test_refuses_votes_it_cannot_fit() -> None:
    sim = _votes(500)
    with pytest.raises(ValueError, match="annotator ids"):
        fit_rater_ability(replace(sim, annotator=None))
    with pytest.raises(ValueError, match="prior_sd"):
        fit_rater_ability(sim, prior_sd=0.0)
    with pytest.raises(ValueError, match="prior_sd"):
        fit_rater_ability(sim, prior_sd=math.nan)
    with pytest.raises(ValueError, match="models"):
        fit_rater_ability(sim.take(np.zeros(0, dtype=np.int64)))


def test_held_out_comparison_has_a_raters_row_only_with_annotators() -> None:
    sim = _votes(6000, seed=3)
    train, test = split_battles(sim, test_fraction=0.25, random_state=0)
    rows = {r.method: r for r in evaluate_methods(train, test)}
    raters = rows[RATERS_METHOD]
    # annotators this different: weighting their votes forecasts held-out votes better
    assert raters.log_loss < rows["davidson-position"].log_loss - 0.005
    assert raters.n_params == len(TRUTH) + 2 + 3 + 3  # and each annotator's position offset
    assert set(raters.parameters_fitted) >= {
        "position_advantage_elo",
        "discrimination:annotator-2",
        "position:annotator-2",
    }
    without = {
        r.method for r in evaluate_methods(replace(train, annotator=None), replace(test, annotator=None))
    }
    assert RATERS_METHOD not in without


def test_votes_without_ties_or_known_sides_fit_without_those_terms() -> None:
    sim = simulate_battles(TRUTH, 3000, random_state=4, n_annotators=3, annotator_discrimination=DISC)
    assert not np.any(sim.outcome >= 2)
    fit = fit_rater_ability(replace(sim, sided=np.zeros(len(sim), dtype=bool)))
    assert fit.log_nu is None and fit.position == 0.0 and not fit.has_position
    assert fit.n_params == len(TRUTH) + 3
    proba = rater_ability_proba(fit, sim)
    assert np.all(proba[:, 1] == 0.0)
    assert fit.discrimination[0] < fit.discrimination[1] < fit.discrimination[2]
