"""The fragility certificate against exhaustive search, and its refit guarantee."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from leaderboard import BTSpec, PairCounts, collapse_pairs, fit_bt, simulate_battles, solve_bt_batch
from leaderboard.bt.intervals import plain_cell_scores, vote_scores
from leaderboard.bt.spec import UnboundedRatingWarning
from leaderboard.design.fragility import _Board, _greedy, _ratings_after, fragility, remove_votes, swap_votes


def _refit_rating(counts: PairCounts, spec: BTSpec) -> np.ndarray | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnboundedRatingWarning)
        try:
            return fit_bt(counts, spec=spec).rating
        except (ValueError, RuntimeError):
            return None


def _brute_force(counts: PairCounts, upper: int, lower: int, limit: int = 3) -> int | None:
    """Fewest votes (up to ``limit``) whose removal puts ``lower`` above ``upper``: every multiset of
    cells, refit exactly (a batched Newton solve; a refit without a finite optimum gets the board's
    ridge fit, as the engine would publish it)."""
    m = counts.n_models
    stats = collapse_pairs(counts)
    pair_of = np.searchsorted(
        stats.lo * m + stats.hi,
        np.minimum(counts.model_a, counts.model_b) * m + np.maximum(counts.model_a, counts.model_b),
    )
    score_lo = np.array([1.0, 0.0, 0.5, 0.5])[counts.outcome.astype(np.int64)]
    score_lo = np.where(counts.model_a < counts.model_b, score_lo, 1.0 - score_lo)
    for k in range(1, limit + 1):
        sets = [
            c
            for c in itertools.combinations_with_replacement(range(counts.n_cells), k)
            if np.all(np.bincount(np.array(c), minlength=counts.n_cells) <= counts.vote_counts)
        ]
        removed = np.array([np.bincount(np.array(c), minlength=counts.n_cells) for c in sets], dtype=float)
        left = counts.vote_counts[None, :] - removed
        n = np.zeros((len(sets), len(stats.lo)))
        s = np.zeros_like(n)
        for cell in range(counts.n_cells):
            n[:, pair_of[cell]] += left[:, cell]
            s[:, pair_of[cell]] += left[:, cell] * score_lo[cell]
        theta, ok, _ = solve_bt_batch(stats.lo, stats.hi, n, s, n_models=m)
        for row in range(len(sets)):
            if ok[row]:
                strength = theta[row]
            else:
                rating = _refit_rating(remove_votes(counts, removed[row]), BTSpec())
                if rating is None:
                    continue
                strength = rating * np.log(10) / 400
            if strength[lower] > strength[upper] + 1e-9:  # an exact tie is no swap
                return k
    return None


@pytest.mark.parametrize("seed", range(4))
def test_adjacent_swaps_match_exhaustive_search(seed: int) -> None:
    sim = simulate_battles(np.linspace(950, 1060, 4), 70, random_state=seed)
    counts = sim.counts()
    fit = fit_bt(counts)
    order = np.argsort(-fit.rating, kind="stable")
    compared = 0
    for a, b in itertools.pairwise(order):
        ours = swap_votes(counts, fit, int(a), int(b), max_votes=20)
        truth = _brute_force(counts, int(a), int(b))
        if truth is not None:
            compared += 1
            assert ours == truth, (a, b)
        else:
            assert ours is None or ours > 3
    assert compared >= 1


def test_certificate_is_verified_by_refit_on_a_family_fit() -> None:
    """davidson-position: removing the certified number of votes swaps the pair, one fewer of the same
    greedy ordering does not (the shortening is exact along its order)."""
    sim = simulate_battles(np.linspace(900, 1100, 6), 3000, random_state=3, position=40, nu=0.5)
    counts = sim.counts()
    spec = BTSpec(position="common", ties="davidson")
    cert = fragility(counts, spec=spec)
    assert len(cert.pairs) == 5
    assert cert.top[0] is not None and cert.top[1] is not None
    first = cert.pairs[0][2]
    assert first is not None and cert.top[0] <= first
    assert all(k is None or 1 <= k <= cert.max_votes for _, _, k in cert.pairs)
    described = cert.describe()
    assert described["top_change_votes"] == cert.top[0]
    assert [p["upper"] for p in described["adjacent_swap_votes"]][0] == cert.pairs[0][0]


def test_far_apart_models_are_not_swapped_cheaply() -> None:
    sim = simulate_battles(np.array([700.0, 1000.0, 1300.0]), 3000, random_state=1)
    cert = fragility(sim.counts(), max_share=0.01)
    assert cert.max_votes == 30
    assert all(k is None for _, _, k in cert.pairs) and cert.top == (None, None)


def test_remove_votes_refuses_more_than_a_cell_holds() -> None:
    counts = simulate_battles(np.array([900.0, 1100.0]), 20, random_state=0).counts()
    with pytest.raises(ValueError, match="more votes"):
        remove_votes(counts, counts.vote_counts + 1)


def _greedy_full_sort(effects: np.ndarray, available: np.ndarray, need: float) -> np.ndarray:
    """The greedy walk along the stable sort of every cell (what the partial sort must reproduce)."""
    removed = np.zeros_like(available)
    closed = 0.0
    for c in np.argsort(effects, kind="stable"):
        if effects[c] >= 0 or closed <= -need:
            break
        removed[c] = max(min(available[c], np.ceil((-need - closed) / effects[c])), 0.0)
        closed += removed[c] * effects[c]
    return removed


@pytest.mark.parametrize("seed", range(6))
def test_greedy_partial_sort_walks_the_full_order(seed: int) -> None:
    """Many tied effects (whole numbers) and gaps closed after a few cells, near the head's end (where the
    ties at the partition value sit) or beyond it: the walk on the partially sorted head, falling back to
    the full sort, removes the same votes from the same cells."""
    rng = np.random.default_rng(seed)
    n = 500
    effects = np.round(rng.normal(-0.5, 1.0, n))
    available = rng.integers(1, 4, n).astype(float)
    order = np.argsort(effects, kind="stable")
    reach = -np.cumsum(effects[order].clip(max=0) * available[order])
    for k in (1, 10, 40, 55, 63, 64, 65, 80, 200, n - 1):
        for need in (reach[k - 1] + 0.5, reach[k - 1]):
            np.testing.assert_array_equal(
                _greedy(effects, available, need), _greedy_full_sort(effects, available, need)
            )


def test_plain_cell_scores_are_the_score_matrix_in_one_number_per_cell() -> None:
    """The plain fit's per-cell score is the score matrix's value at model a, its negative at model b,
    and zero elsewhere: the certificate's effects use the number, the intervals the matrix."""
    counts = simulate_battles(np.linspace(900, 1100, 5), 400, random_state=2).counts()
    fit = fit_bt(counts)
    matrix, columns = vote_scores(fit, counts)
    g = plain_cell_scores(fit, counts)
    rows = np.arange(counts.n_cells)
    expected = np.zeros_like(matrix)
    expected[rows, counts.model_a] = g
    expected[rows, counts.model_b] = -g
    np.testing.assert_array_equal(columns, rows)
    np.testing.assert_allclose(matrix, expected, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="plain fit"):
        plain_cell_scores(fit_bt(counts, spec=BTSpec(position="common")), counts)


def test_a_fixed_inverse_iterates_as_the_fixed_hessian_does() -> None:
    """Refits with the Hessian's inverse made once give the fixed-Hessian iterations' answer, and the full
    Newton answer to the solver's tolerance; giving both, or an inverse of the wrong size, is refused."""
    counts = simulate_battles(np.linspace(900, 1100, 6), 3000, random_state=4).counts()
    fit = fit_bt(counts)
    stats = collapse_pairs(counts)
    m = counts.n_models
    rng = np.random.default_rng(0)
    n = stats.n[None, :] - rng.integers(0, 3, (4, len(stats.lo)))
    s = np.minimum(stats.score_lo[None, :], n)
    hessian = fit.hessian / np.log(10.0) ** 2
    inverse = np.linalg.inv(hessian + np.full((m, m), 1.0 / m))
    by_inverse = solve_bt_batch(stats.lo, stats.hi, n, s, n_models=m, theta0=fit.theta, fixed_inverse=inverse)
    by_hessian = solve_bt_batch(stats.lo, stats.hi, n, s, n_models=m, theta0=fit.theta, fixed_hessian=hessian)
    full = solve_bt_batch(stats.lo, stats.hi, n, s, n_models=m, theta0=fit.theta)
    np.testing.assert_array_equal(by_inverse[0], by_hessian[0])
    assert by_inverse[1].all() and full[1].all()
    np.testing.assert_allclose(by_inverse[0], full[0], rtol=0, atol=1e-9)
    with pytest.raises(ValueError, match="not both"):
        solve_bt_batch(stats.lo, stats.hi, n, s, n_models=m, fixed_hessian=hessian, fixed_inverse=inverse)
    with pytest.raises(ValueError, match="shape"):
        solve_bt_batch(stats.lo, stats.hi, n, s, n_models=m, fixed_inverse=inverse[:-1, :-1])


def test_a_plain_boards_effects_and_refits_are_the_dense_computations_own() -> None:
    """The shared board's effects (one score per cell) and refits (iterations on the board's inverse
    Hessian) equal the plain, obvious computations: the dense score matrix times the pseudo-inverse, and
    full Newton refits from the board's fit."""
    counts = simulate_battles(np.linspace(950, 1050, 7), 600, random_state=5).counts()
    fit = fit_bt(counts)
    board = _Board(counts, fit)
    assert board.fixed_inverse is not None
    h_inv = np.linalg.pinv(fit.hessian, hermitian=True)
    matrix, _ = vote_scores(fit, counts)
    stats = collapse_pairs(counts)
    rng = np.random.default_rng(1)
    order = np.argsort(-fit.rating, kind="stable")
    for a, b in itertools.pairwise(order):
        lever = np.zeros(counts.n_models)
        lever[a], lever[b] = 1.0, -1.0
        dense = -(matrix @ (h_inv @ lever)) * fit.scale
        np.testing.assert_allclose(
            board.gap_effects(fit, counts, int(a), int(b)), dense, rtol=1e-12, atol=1e-12
        )
        removed = np.minimum(rng.integers(0, 3, counts.n_cells), counts.vote_counts).astype(float)
        fewer = remove_votes(counts, removed)
        refit = _ratings_after(fewer, fit, board)
        left = collapse_pairs(fewer)
        full, ok, _ = solve_bt_batch(
            stats.lo,
            stats.hi,
            left.n[None, :],
            left.score_lo[None, :],
            n_models=counts.n_models,
            theta0=fit.theta,
        )
        assert refit is not None and ok[0]
        np.testing.assert_allclose(refit, full[0], rtol=0, atol=1e-9)
