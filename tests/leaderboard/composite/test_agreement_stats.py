"""Agreement coefficients against published textbook values and against the libraries they use."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from leaderboard.composite.agreement_stats import (
    cohen_kappa,
    cohen_kappa_interval,
    item_counts,
    multi_rater,
    rate_interval,
)

#: Krippendorff (2011), "Computing Krippendorff's alpha-reliability", example C: 4 observers, 12 units,
#: values 1-5, missing data (None). Published: nominal 0.743, interval 0.849.
KRIPPENDORFF_C = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]
#: Krippendorff (2011) example A: 2 coders, 10 units, binary. Published nominal alpha 0.095.
KRIPPENDORFF_A = [[0, 1, 0, 0, 0, 0, 0, 0, 1, 0], [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]]
#: Fleiss (1971), Table 1: 30 patients, 6 psychiatrists each, 5 diagnoses; published kappa 0.430.
FLEISS_1971 = [
    [4, 4, 4, 4, 4, 4], [2, 2, 2, 5, 5, 5], [2, 3, 3, 3, 3, 5], [5, 5, 5, 5, 5, 5], [2, 2, 2, 4, 4, 4],
    [1, 1, 3, 3, 3, 3], [3, 3, 3, 3, 5, 5], [1, 1, 3, 3, 3, 4], [1, 1, 4, 4, 4, 4], [5, 5, 5, 5, 5, 5],
    [1, 4, 4, 4, 4, 4], [1, 2, 4, 4, 4, 4], [2, 2, 2, 3, 3, 3], [1, 4, 4, 4, 4, 4], [2, 2, 4, 4, 4, 5],
    [3, 3, 3, 3, 3, 5], [1, 1, 1, 4, 5, 5], [1, 1, 1, 1, 1, 2], [2, 2, 4, 4, 4, 4], [1, 3, 3, 5, 5, 5],
    [5, 5, 5, 5, 5, 5], [2, 4, 4, 4, 4, 4], [2, 2, 4, 5, 5, 5], [1, 1, 4, 4, 4, 4], [1, 4, 4, 4, 4, 5],
    [2, 2, 2, 2, 2, 4], [1, 1, 1, 1, 5, 5], [2, 2, 4, 4, 4, 4], [1, 3, 3, 3, 3, 3], [5, 5, 5, 5, 5, 5],
]  # fmt: skip


def table_of(units: Sequence[Sequence[int | None]], values: list[int]) -> np.ndarray:
    """Units-by-value counts of a coders-by-units matrix (None: not coded)."""
    return np.array([[sum(1 for v in unit if v == x) for x in values] for unit in units])


def test_krippendorff_published_examples() -> None:
    units = [list(col) for col in zip(*KRIPPENDORFF_C, strict=True)]
    res = multi_rater(table_of(units, [1, 2, 3, 4, 5]), values=[1, 2, 3, 4, 5], samples=50)
    assert res["krippendorff_alpha_nominal"].value == pytest.approx(0.743, abs=1e-3)
    assert res["krippendorff_alpha_interval"].value == pytest.approx(0.849, abs=1e-3)
    assert res["krippendorff_alpha_nominal"].n == 11  # unit 12 has one value: not pairable
    units = [list(col) for col in zip(*KRIPPENDORFF_A, strict=True)]
    res = multi_rater(table_of(units, [0, 1]), values=[0, 1], samples=50)
    assert res["krippendorff_alpha_nominal"].value == pytest.approx(0.095, abs=1e-3)


def test_fleiss_1971_table() -> None:
    res = multi_rater(table_of(FLEISS_1971, [1, 2, 3, 4, 5]), values=[1, 2, 3, 4, 5], samples=50)
    assert res["fleiss_kappa"].value == pytest.approx(0.430, abs=1e-3)


def test_cohen_classic_tables() -> None:
    # Fleiss, Cohen and Everitt (1969) proportions (x100): kappa 0.492 (p_o 0.70, p_e 0.41).
    table = np.array([[44, 7, 9], [5, 20, 5], [1, 3, 6]])
    x = np.repeat([0, 0, 0, 1, 1, 1, 2, 2, 2], table.ravel())
    y = np.repeat([0, 1, 2] * 3, table.ravel())
    assert cohen_kappa(x, y) == pytest.approx(0.492, abs=1e-3)
    # The two-category textbook case: 20 yes-yes, 5 yes-no, 10 no-yes, 15 no-no -> 0.400.
    x = np.repeat([1, 1, 0, 0], [20, 5, 10, 15])
    y = np.repeat([1, 0, 1, 0], [20, 5, 10, 15])
    assert cohen_kappa(x, y) == pytest.approx(0.400, abs=1e-3)
    assert math.isnan(cohen_kappa([], [])) and math.isnan(cohen_kappa([1, 1], [1, 1]))


def test_ours_equal_the_libraries_on_random_tables() -> None:
    import krippendorff
    from statsmodels.stats.inter_rater import fleiss_kappa

    rng = np.random.default_rng(3)
    for _ in range(5):
        counts = rng.multinomial(rng.integers(2, 6), [0.5, 0.2, 0.3], size=60)
        ours = multi_rater(counts, samples=10)
        a = krippendorff.alpha(value_counts=counts, value_domain=[-1, 0, 1], level_of_measurement="interval")
        assert ours["krippendorff_alpha_interval"].value == pytest.approx(a, abs=1e-9)
        equal = rng.multinomial(4, [0.5, 0.2, 0.3], size=60)
        assert multi_rater(equal, samples=10)["fleiss_kappa"].value == pytest.approx(
            fleiss_kappa(equal), abs=1e-9
        )
        # the vectorised sums (used by the bootstrap) against the library point values
        from leaderboard.composite.agreement_stats import _features, _from_sums

        sums = _features(counts).sum(axis=0)[None, :]
        assert _from_sums(sums, np.array([-1.0, 0.0, 1.0]))[0, 5] == pytest.approx(a, abs=1e-9)


def test_tie_conventions_and_gwet_by_hand() -> None:
    # item 1: L L (agree); item 2: L T (half); item 3: L R (disagree); item 4: T T (agree)
    counts = item_counts([1, 1, 2, 2, 3, 3, 4, 4], [-1, -1, -1, 0, -1, 1, 0, 0])
    res = multi_rater(counts, samples=20)
    assert res["agreement_exact"].value == pytest.approx(0.5)
    assert res["agreement_ties_half"].value == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert res["agreement_without_ties"].value == pytest.approx(0.5) and res["agreement_without_ties"].n == 2
    # Gwet AC1: pi = (mean shares) L 1.25/4? item shares: (1,0,0), (.5,.5,0), (.5,0,.5), (0,1,0)
    pi = np.array([2.0, 1.5, 0.5]) / 4
    p_e = float((pi * (1 - pi)).sum() / 2)
    assert res["gwet_ac1"].value == pytest.approx((0.5 - p_e) / (1 - p_e))


def test_intervals_bracket_and_shrink() -> None:
    rng = np.random.default_rng(1)
    small = rng.multinomial(3, [0.6, 0.1, 0.3], size=40)
    big = rng.multinomial(3, [0.6, 0.1, 0.3], size=4000)
    for name in ("fleiss_kappa", "krippendorff_alpha_nominal", "gwet_ac1"):
        s, b = multi_rater(small)[name], multi_rater(big)[name]
        assert s.low <= s.value <= s.high and b.low <= b.value <= b.high
        assert (b.high - b.low) < (s.high - s.low) / 4
    k = cohen_kappa_interval(rng.integers(-1, 2, 300), rng.integers(-1, 2, 300))
    assert k.low < 0 < k.high and k.n == 300
    r = rate_interval(np.arange(1000) // 2, rng.random(1000) < 0.7)
    assert r.low < 0.7 < r.high and r.n == 500
