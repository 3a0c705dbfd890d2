"""The review procedure: address groups pooled, refit without the flagged, and the random-effect tails."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from leaderboard.data import Outcome
from leaderboard.quality.overdispersion import population_sd, random_effect_tails, robust_offset
from leaderboard.quality.voter_review import address_components, review_voters

RATINGS = np.array([1200.0, 1100.0, 1000.0, 950.0, 900.0, 800.0])


def test_tails_are_calibrated_under_the_random_effect_null() -> None:
    # Cells of 60 yes/no events whose logits share a personal effect of sd 0.5: the upper-tail p-values
    # must be close to uniform, and the sd is recovered from the cells.
    rng = np.random.default_rng(0)
    n_cells, per = 3000, 60
    cell = np.repeat(np.arange(n_cells), per)
    u = rng.normal(0.0, 1.0, cell.size)
    effect = rng.normal(0.0, 0.5, n_cells)[cell]
    y = (rng.random(cell.size) < special.expit(u + effect)).astype(float)
    cap = np.ones(cell.size)
    sd = population_sd(cell, n_cells, u, cap, y)
    assert sd == pytest.approx(0.5, abs=0.08)
    upper, lower, _ = random_effect_tails(cell, n_cells, u, cap, y, sd=sd)
    for p in (upper, lower):
        assert np.mean(p < 0.05) == pytest.approx(0.05, abs=0.02)
        assert np.mean(p < 0.01) < 0.02
    # Ignoring the effect makes the same cells look extreme.
    naive, _, _ = random_effect_tails(cell, n_cells, u, cap, y, sd=0.0)
    assert np.mean(naive < 0.01) > 0.1


def test_population_sd_and_offset_resist_a_minority_of_extreme_cells() -> None:
    rng = np.random.default_rng(1)
    n_cells, per = 1000, 50
    cell = np.repeat(np.arange(n_cells), per)
    u = np.zeros(cell.size)
    y = (rng.random(cell.size) < 0.5).astype(float)
    y[cell < 50] = 1.0  # 5% of the cells always say yes (always-left bots)
    assert abs(robust_offset(cell, n_cells, u, y)) < 0.08
    assert population_sd(cell, n_cells, u, np.ones(cell.size), y) < 0.25


def test_address_components_join_annotators_through_shared_networks() -> None:
    who = np.array([1, 2, 2, 3, 4, 5])
    where = np.array([10, 10, 11, 11, 12, -1])
    comp = address_components(who, where)
    assert comp[1] == comp[2] == comp[3] == 1
    assert comp[4] == 4 and comp[5] == 5


def test_small_accounts_behind_one_network_are_caught_as_a_group() -> None:
    # Thirty accounts of 12 votes each (too few to test one by one) behind two networks, each voting
    # model 4 up whenever it appears; honest voters alone on their networks, a few sharing one.
    rng = np.random.default_rng(3)
    target = 4
    n_honest, per = 400, 30
    who = np.repeat(np.arange(n_honest), per)
    a = rng.integers(0, 6, who.size)
    b = (a + rng.integers(1, 6, who.size)) % 6
    p_left = 0.85 / (1 + 10 ** ((RATINGS[b] - RATINGS[a]) / 400))
    draw = rng.random(who.size)
    out = np.where(draw < p_left, Outcome.MODEL_A, np.where(draw < 0.85, Outcome.MODEL_B, Outcome.TIE))
    address = who.copy()
    address[who < 12] = 1_000  # a campus of twelve honest voters
    s_who = np.repeat(np.arange(30), 12) + 10_000
    s_a = np.full(s_who.size, target)
    s_b = (target + rng.integers(1, 6, s_who.size)) % 6
    flip = rng.random(s_who.size) < 0.5
    s_a, s_b = np.where(flip, s_b, s_a), np.where(flip, s_a, s_b)
    s_out = np.where(s_a == target, Outcome.MODEL_A, Outcome.MODEL_B)
    s_addr = 2_000 + (s_who % 2)
    review = review_voters(
        np.concatenate([who, s_who]),
        np.concatenate([a, s_a]),
        np.concatenate([b, s_b]),
        np.concatenate([out, s_out]).astype(np.int64),
        6,
        address=np.concatenate([address, s_addr]),
    )
    ids = review.stats.annotators
    sybil = ids >= 10_000
    assert review.flagged[sybil].all()
    assert all("group of 15" in (r or "") for r, s in zip(review.reasons, sybil, strict=True) if s)
    assert not review.flagged[~sybil].any()
    assert np.all(review.weights[sybil] < 0.05)
    # Without addresses each account is too small to flag.
    alone = review_voters(
        np.concatenate([who, s_who]),
        np.concatenate([a, s_a]),
        np.concatenate([b, s_b]),
        np.concatenate([out, s_out]).astype(np.int64),
        6,
    )
    assert not alone.flagged[sybil].any()
