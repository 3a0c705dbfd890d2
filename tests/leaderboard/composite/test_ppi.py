"""PPI++ on the human scale: unbiased whatever the judge (a useless judge's intervals still cover the
human-only target), narrower than human-only with a judge that predicts the human votes, and the
battles split from the composite's input as labelled (human and judge) and unlabelled (judge only)."""

from __future__ import annotations

import numpy as np
import pytest

from leaderboard.composite.model import CompositeData
from leaderboard.composite.ppi import PPIBattles, fit_ppi, ppi_battles

UNIT = 400 / np.log(10)
TRUTH = np.array([-1.0, -0.5, 0.0, 0.3, 0.6, 1.0])  # natural units
N_LABELLED, N_UNLABELLED = 500, 5000


def simulate(rng: np.random.Generator, judge: str) -> tuple[PPIBattles, np.ndarray]:
    """Each battle has its own chance ``p`` of the lower-numbered model winning, Beta-distributed around
    the Bradley-Terry probability (so the human-only target is ``TRUTH``); a human votes once with
    chance ``p``. The good judge reports ``p`` itself, the useless one a uniform number."""
    m = len(TRUTH)
    total = N_LABELLED + N_UNLABELLED
    a = rng.integers(0, m, total)
    b = (a + rng.integers(1, m, total)) % m
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    mean = 1 / (1 + np.exp(-(TRUTH[lo] - TRUTH[hi])))
    p = rng.beta(mean, 1 - mean)  # concentration 1: half the vote's variance is the battle's
    y = (rng.random(total) < p).astype(float)
    f = p if judge == "good" else rng.random(total)
    lab, unl = slice(0, N_LABELLED), slice(N_LABELLED, None)
    battles = PPIBattles(
        models=tuple(f"m{i}" for i in range(m)),
        lab_a=lo[lab], lab_b=hi[lab], y=y[lab], f_lab=f[lab],
        unl_a=lo[unl], unl_b=hi[unl], f_unl=f[unl],
    )  # fmt: skip
    return battles, 1000 + UNIT * (TRUTH - TRUTH.mean())


@pytest.mark.parametrize("judge", ["useless", "good"])
def test_ppi_covers_the_human_target_and_a_good_judge_narrows_it(judge: str) -> None:
    rng = np.random.default_rng(7 if judge == "good" else 3)
    covered, ratio, lams, errors = [], [], [], []
    for _ in range(40):
        battles, truth = simulate(rng, judge)
        fit = fit_ppi(battles)
        low, high = fit.intervals(0.95)
        covered.append((low <= truth) & (truth <= high))
        ratio.append(np.mean(fit.rating_se) / np.mean(fit.human_se))
        lams.append(fit.lam)
        errors.append(fit.rating - truth)
    coverage = float(np.mean(covered))
    bias = np.abs(np.mean(errors, axis=0))
    # 240 intervals at 95%: a coverage below 0.85 would be far outside binomial noise
    assert coverage >= 0.85, coverage
    # no systematic error: the mean error is small against a single fit's standard error (~30 points)
    assert bias.max() < 12, bias
    if judge == "useless":
        assert np.mean(lams) < 0.3  # the tuned lambda all but switches the judge off
        assert np.mean(ratio) < 1.1  # and costs little
    else:
        assert np.mean(lams) > 0.5
        assert np.mean(ratio) < 0.8  # clearly narrower than human votes alone


def test_fixed_lambda_zero_is_the_human_only_fit() -> None:
    battles, _ = simulate(np.random.default_rng(1), "good")
    fit = fit_ppi(battles, lam=0.0)
    np.testing.assert_allclose(fit.rating, fit.human_rating, atol=1e-6)
    with pytest.raises(ValueError, match="lambda"):
        fit_ppi(battles, lam=1.5)


def test_ppi_battles_split_labelled_and_unlabelled() -> None:
    # battle 0 (x-y): a human and the judge in both orders; battle 1 (y-z): the judge only;
    # battle 2 (x-z): a human only (not used); battle 3 (x-z): a human and the judge
    data = CompositeData(
        models=("x", "y", "z"),
        sources=("human", "judge"),
        model_a=np.array([0, 1, 0, 1, 2, 0, 2, 0]),
        model_b=np.array([1, 0, 1, 2, 1, 2, 0, 2]),
        source=np.array([0, 1, 1, 1, 1, 0, 0, 1]),
        score=np.array([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.5]),
        tie=np.array([False] * 7 + [True]),
        battle=np.array([0, 0, 0, 1, 1, 2, 3, 3]),
    )
    battles = ppi_battles(data)
    assert battles.lab_a.tolist() == [0, 0] and battles.lab_b.tolist() == [1, 2]
    # scores are the lower-numbered model's: the human on battle 3 voted z over x
    assert battles.y.tolist() == [1.0, 0.0]
    assert battles.f_lab.tolist() == [0.5, 0.5]  # the judge contradicted itself, then tied
    assert battles.unl_a.tolist() == [1] and battles.f_unl.tolist() == [0.5]
    one_human = np.array([0, 1, 1, 1, 1, 1, 1, 1])  # human votes on battle 0 only
    with pytest.raises(ValueError, match="at least two battles"):
        ppi_battles(CompositeData(**{**data.__dict__, "source": one_human}))


def test_bootstrap_over_battles_agrees_with_the_sandwich() -> None:
    """The percentile bootstrap over battles (labelled and unlabelled resampled apart, lambda fixed at
    the point fit's) gives intervals about as wide as the PPI++ sandwich, around the same ratings; with
    lambda 0 its rounds are the human-only fit's bootstrap."""
    from leaderboard.composite.ppi import bootstrap_ppi

    battles, _ = simulate(np.random.default_rng(5), "good")
    fit = fit_ppi(battles)
    low, high, samples = bootstrap_ppi(battles, fit, rounds=300, seed=2)
    s_low, s_high = fit.intervals(0.95)
    ratio = np.mean(high - low) / np.mean(s_high - s_low)
    assert 0.8 < ratio < 1.25, ratio
    assert np.max(np.abs(samples.mean(axis=0) - fit.rating)) < 0.25 * np.mean(fit.rating_se)
    human = fit_ppi(battles, lam=0.0)
    h_low, h_high, _ = bootstrap_ppi(battles, human, rounds=300, seed=2)
    assert np.mean(h_high - h_low) > np.mean(high - low)  # the judge narrows the bootstrap too
