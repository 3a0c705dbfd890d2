"""The model-based pairing math: closed-form gains equal the brute-force drop, the uniform floor holds,
votes-needed estimates are tight, and inverse-propensity weighted fits under the shipped policy get
intervals that cover (each vote's own squared weight in the sandwich)."""

from __future__ import annotations

import numpy as np
import pytest

from leaderboard import sandwich_intervals
from leaderboard.design.pairing import (
    CRITERIA,
    DEFAULT_FLOOR,
    PairDesign,
    _criterion_matrix,
    adjacent_votes_needed,
    board_votes_needed,
    fisher_information,
    optimal_shares,
    pair_gains,
    pair_probabilities,
    rating_covariance,
)
from leaderboard.evaluation.simulate import simulate_adaptive_battles


def _board(m: int = 7, seed: int = 3) -> tuple[PairDesign, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    design = PairDesign.of(m)
    theta = rng.normal(0.0, 0.7, m)
    theta -= theta.mean()
    votes = rng.integers(0, 40, len(design)).astype(float)
    return design, theta, fisher_information(design, theta, votes)


def test_fisher_information_is_the_sum_of_rank_one_terms() -> None:
    design, theta, info = _board()
    votes = np.arange(len(design), dtype=float)
    info = fisher_information(design, theta, votes)
    expected = np.zeros_like(info)
    for k, (i, j) in enumerate(zip(design.lo, design.hi, strict=True)):
        p = 1.0 / (1.0 + np.exp(-(theta[i] - theta[j])))
        d = np.zeros(design.n_models)
        d[i], d[j] = 1.0, -1.0
        expected += votes[k] * p * (1.0 - p) * np.outer(d, d)
    np.testing.assert_allclose(info, expected, atol=1e-12)


@pytest.mark.parametrize("criterion", CRITERIA)
def test_gain_equals_the_brute_force_drop_of_the_criterion(criterion: str) -> None:
    design, theta, info = _board()
    cov = rating_covariance(info)
    gains = pair_gains(design, theta, cov, criterion=criterion)  # type: ignore[arg-type]
    a = _criterion_matrix(criterion, theta, cov)  # type: ignore[arg-type]
    before = np.trace(a @ cov)
    w = design.vote_information(theta)
    for k in (0, 5, len(design) - 1):
        one = np.zeros(len(design))
        one[k] = 1.0
        after = np.trace(a @ rating_covariance(info + fisher_information(design, theta, one)))
        # Sherman-Morrison on the prior-regularised inverse: equal up to the centring of the prior.
        assert gains[k] == pytest.approx(before - after, rel=2e-3), (k, w[k])
    assert np.all(gains >= 0.0)


def test_gains_favour_the_pairs_of_a_model_nobody_has_seen() -> None:
    design, theta, _ = _board(m=6)
    votes = np.where((design.lo == 5) | (design.hi == 5), 0.0, 50.0)
    cov = rating_covariance(fisher_information(design, theta, votes))
    for criterion in CRITERIA:
        gains = pair_gains(design, theta, cov, criterion=criterion)
        newcomer = (design.lo == 5) | (design.hi == 5)
        assert gains[newcomer].min() > gains[~newcomer].max(), criterion


def test_probabilities_keep_a_uniform_floor_and_sum_to_one() -> None:
    gains = np.array([0.0, 1.0, 100.0, 0.0])
    probs = pair_probabilities(gains, floor=0.2, power=2.0)
    assert probs.sum() == pytest.approx(1.0)
    assert probs.min() == pytest.approx(0.2 / 4)
    assert probs[2] > probs[1] > probs[0]
    np.testing.assert_allclose(pair_probabilities(np.zeros(4)), 0.25)
    np.testing.assert_allclose(pair_probabilities(np.array([np.nan, 1.0])), 0.5)
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="floor"):
            pair_probabilities(gains, floor=bad)


def _mean_sd(design: PairDesign, theta: np.ndarray, shares: np.ndarray) -> float:
    cov = rating_covariance(fisher_information(design, theta, 1e6 * shares))
    return float(np.sqrt(np.diag(cov)).mean())


def test_optimal_shares_are_uniform_for_equal_models_and_beat_uniform_otherwise() -> None:
    design = PairDesign.of(6)
    equal = optimal_shares(design, np.zeros(6))
    np.testing.assert_allclose(equal, 1.0 / len(design), rtol=1e-9)
    _, theta, _ = _board(m=6)
    shares = optimal_shares(design, theta)
    uniform = np.full(len(design), 1.0 / len(design))
    assert shares.sum() == pytest.approx(1.0)
    assert _mean_sd(design, theta, shares) < 0.99 * _mean_sd(design, theta, uniform)
    # A stationary point: moving a little of the votes between any two pairs does not narrow the board.
    best = _mean_sd(design, theta, shares)
    for k in range(len(design)):
        for j in (0, len(design) // 2, len(design) - 1):
            moved = shares.copy()
            step = min(0.05 * moved[j], 1e-3)
            moved[j] -= step
            moved[k] += step
            assert _mean_sd(design, theta, moved) >= best * (1 - 1e-5), (k, j)


def test_optimal_shares_on_top_of_known_votes_go_to_the_newcomers_and_are_optimal() -> None:
    design, theta, _ = _board(m=6)
    newcomer = (design.lo == 5) | (design.hi == 5)
    prior = fisher_information(design, theta, np.where(newcomer, 0.0, 400.0))
    n = 300.0

    def mean_sd(shares: np.ndarray) -> float:
        cov = rating_covariance(prior + fisher_information(design, theta, n * shares))
        return float(np.sqrt(np.diag(cov)).mean())

    shares = optimal_shares(design, theta, scale=n, information=prior)
    assert shares.sum() == pytest.approx(1.0)
    assert shares[newcomer].sum() > 0.8  # the known models hardly need more
    best = mean_sd(shares)
    assert best < 0.9 * mean_sd(np.full(len(design), 1.0 / len(design)))
    for k in range(len(design)):
        for j in range(len(design)):
            moved = shares.copy()
            step = min(0.05 * moved[j], 1e-3)
            moved[j] -= step
            moved[k] += step
            assert mean_sd(moved) >= best * (1 - 1e-5), (k, j)


def test_blend_weighs_the_width_and_the_neighbour_gaps_equally() -> None:
    design, theta, info = _board()
    cov = rating_covariance(info)
    blend = _criterion_matrix("blend", theta, cov)
    width = _criterion_matrix("width", theta, cov)
    neighbour = _criterion_matrix("neighbour", theta, cov)
    assert np.trace(blend @ cov) == pytest.approx(2.0)
    gains = pair_gains(design, theta, cov, criterion="blend")
    relative = pair_gains(design, theta, cov, criterion="width") / np.trace(width @ cov) + pair_gains(
        design, theta, cov, criterion="neighbour"
    ) / np.trace(neighbour @ cov)
    np.testing.assert_allclose(gains, relative, rtol=1e-9)


def test_board_votes_needed_is_tight() -> None:
    design, theta, info = _board()
    probs = np.full(len(design), 1.0 / len(design))
    target = 0.25
    n = board_votes_needed(design, theta, info, probs, half_width=target)
    assert n is not None and n > 100

    def half_width(votes: int) -> float:
        cov = rating_covariance(info + votes * fisher_information(design, theta, probs))
        return float(1.959963984540054 * np.sqrt(np.diag(cov)).mean())

    assert half_width(n) <= target < half_width(int(n * 0.98))
    assert board_votes_needed(design, theta, info, probs, half_width=10.0) == 0
    assert board_votes_needed(design, theta, info, probs, half_width=1e-4, limit=1000) is None


def test_adjacent_votes_needed_separates_each_neighbour_pair() -> None:
    design, theta, info = _board()
    probs = np.full(len(design), 1.0 / len(design))
    needed = adjacent_votes_needed(design, theta, info, probs)
    order = np.argsort(-theta)
    assert len(needed) == design.n_models - 1
    for (upper, lower), n in zip(zip(order[:-1], order[1:], strict=True), needed, strict=True):
        assert n is not None
        cov = rating_covariance(info + n * fisher_information(design, theta, probs))
        se = np.sqrt(cov[upper, upper] + cov[lower, lower] - 2 * cov[upper, lower])
        assert theta[upper] - theta[lower] >= 1.959963984540054 * se * (1 - 1e-9)


def _coverage(boards: int, models: int, votes: int) -> tuple[float, float]:
    rng = np.random.default_rng(7)
    hits = total = 0
    weights_spread = []
    for k in range(boards):
        truth = rng.normal(0.0, 100.0, models)
        truth -= truth.mean()
        battles = simulate_adaptive_battles(
            truth, votes, random_state=k, floor=DEFAULT_FLOOR, batch=200, shipped=True
        )
        assert battles.weight is not None
        weights_spread.append(float(battles.weight.max() / battles.weight.min()))
        iv = sandwich_intervals(battles.counts())
        centred = truth + iv.rating.mean()
        hits += int(np.sum((iv.ci_low <= centred) & (centred <= iv.ci_high)))
        total += models
    return hits / total, float(np.median(weights_spread))


def test_weighted_fit_covers_under_the_shipped_policy_quick() -> None:
    # Its inverse propensities differ forty-fold within a cell; taking each cell's votes at their mean
    # weight covered 0.88 here, a policy as smooth as pair_probabilities' could not tell the two apart.
    coverage, spread = _coverage(boards=30, models=8, votes=3000)
    assert spread > 20.0  # the policy really is adaptive: propensities differ many-fold
    assert 0.93 <= coverage <= 0.97


@pytest.mark.slow
def test_weighted_fit_covers_under_the_shipped_policy() -> None:
    coverage, spread = _coverage(boards=120, models=12, votes=8000)
    assert spread > 20.0
    assert 0.93 <= coverage <= 0.97
