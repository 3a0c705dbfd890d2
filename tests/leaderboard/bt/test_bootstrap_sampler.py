"""The Poisson-then-correct multinomial sampler against the exact law and numpy's multinomial."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from leaderboard.bt.bootstrap import draw_multinomial

#: Smallest p-value accepted from a goodness-of-fit test on seeded draws (a false alarm is 1 in 1,000).
P_MIN = 1e-3
#: Moment checks: allowed distance from theory in standard errors.
Z_MAX = 5.0


def _exact_table(counts: np.ndarray) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Every outcome of Multinomial(N, counts / N) with its probability."""
    n = int(counts.sum())
    p = counts / n
    cells = [c for c in itertools.product(range(n + 1), repeat=len(counts)) if sum(c) == n]
    pmf = np.array([stats.multinomial.pmf(c, n, p) for c in cells])
    return cells, pmf


def _chi_square_p(draws: np.ndarray, cells: list[tuple[int, ...]], pmf: np.ndarray) -> float:
    index = {c: i for i, c in enumerate(cells)}
    observed = np.bincount([index[tuple(int(v) for v in row)] for row in draws], minlength=len(cells))
    return float(stats.chisquare(observed, pmf * draws.shape[0]).pvalue)


def _biased(counts: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """A plausible wrong sampler: Poisson, then remove the excess by category (``p``), not by item."""
    n = int(counts.sum())
    x = rng.poisson(counts.astype(float), size=(size, counts.size))
    for row in x:
        while row.sum() > n:
            k = rng.choice(counts.size, p=counts / n)
            row[k] -= row[k] > 0
        if row.sum() < n:
            row += rng.multinomial(n - int(row.sum()), counts / n)
    return x


def test_rows_sum_to_n_and_both_corrections_run() -> None:
    counts = np.array([0, 3, 40, 1, 200, 7, 0, 1000])
    x = draw_multinomial(counts, 400, np.random.default_rng(0))
    assert x.shape == (400, 8) and x.dtype == np.int64
    assert np.all(x.sum(axis=1) == counts.sum()) and np.all(x >= 0)
    assert np.all(x[:, counts == 0] == 0)
    raw = np.random.default_rng(0).poisson(counts.astype(float), size=(400, 8)).sum(axis=1)
    assert np.any(raw > counts.sum()) and np.any(raw < counts.sum())  # both branches exercised


def test_exact_law_on_a_small_case() -> None:
    """Chi-square of 40,000 draws against the enumerated multinomial pmf: ours and numpy's pass."""
    counts = np.array([1, 2, 3])
    cells, pmf = _exact_table(counts)
    ours = draw_multinomial(counts, 40_000, np.random.default_rng(11))
    numpy_ = np.random.default_rng(12).multinomial(6, counts / 6, size=40_000)
    assert _chi_square_p(ours, cells, pmf) > P_MIN
    assert _chi_square_p(numpy_, cells, pmf) > P_MIN
    # the test has power: a wrong correction is caught
    assert _chi_square_p(_biased(counts, 40_000, np.random.default_rng(13)), cells, pmf) < P_MIN


def test_two_sample_against_numpy() -> None:
    """Per-category counts from ours and from numpy's multinomial come from one distribution."""
    counts = np.array([5, 1, 30, 12, 2])
    n = int(counts.sum())
    ours = draw_multinomial(counts, 20_000, np.random.default_rng(21))
    ref = np.random.default_rng(22).multinomial(n, counts / n, size=20_000)
    for k in range(counts.size):
        values = np.union1d(ours[:, k], ref[:, k])
        table = np.array([[np.sum(d[:, k] == v) for v in values] for d in (ours, ref)])
        table = table[:, table.sum(axis=0) >= 10]  # pool-free: drop the sparse tail only
        assert stats.chi2_contingency(table).pvalue > P_MIN


def test_moments_match_theory() -> None:
    """Means, variances and covariances of ``Multinomial(N, p)`` within Monte-Carlo error."""
    counts = np.array([400, 5, 120, 60, 15, 400])
    n = int(counts.sum())
    p = counts / n
    rows = 20_000
    x = draw_multinomial(counts, rows, np.random.default_rng(31)).astype(float)
    mean_se = np.sqrt(n * p * (1 - p) / rows)
    assert np.all(np.abs(x.mean(axis=0) - n * p) < Z_MAX * mean_se)
    cov = np.cov(x, rowvar=False)
    theory = n * (np.diag(p) - np.outer(p, p))
    # standard error of a sample covariance for near-normal counts: sqrt((s_ii s_jj + s_ij^2) / rows)
    se = np.sqrt((np.outer(np.diag(theory), np.diag(theory)) + theory**2) / rows)
    assert np.all(np.abs(cov - theory) < Z_MAX * se)


def test_same_generator_state_same_draws_and_bad_input() -> None:
    counts = np.array([3, 0, 9, 4])
    a = draw_multinomial(counts, 50, np.random.default_rng(5))
    b = draw_multinomial(counts, 50, np.random.default_rng(5))
    assert np.array_equal(a, b)
    for bad in (np.array([1.5, 2.0]), np.array([-1, 3]), np.zeros(3), np.ones((2, 2))):
        with pytest.raises(ValueError):
            draw_multinomial(bad, 2, np.random.default_rng(0))
    assert math.isclose(draw_multinomial(np.array([7.0]), 3, np.random.default_rng(0)).sum(), 21)
