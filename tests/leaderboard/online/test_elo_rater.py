"""EloRater: the live standings' Elo as an online rater, with caps, tie modes and forecasts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from leaderboard.online.elo import (
    EloConfig,
    EloRater,
    EloState,
    expected_score,
    replay_elo_indices,
    update_elo,
)
from leaderboard.online.elo_schedules import FideK, FixedK
from leaderboard.online.raters import rolling_forecasts

TOL = 1e-9
ratings = st.floats(min_value=-3000, max_value=5000, allow_nan=False)
games = st.integers(min_value=0, max_value=200)
outcomes = st.sampled_from([0, 1, 2, 3])


def _stream(seed: int, n: int = 2000, n_models: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n_models, n)
    b = (a + rng.integers(1, n_models, n)) % n_models
    return a, b, rng.integers(0, 4, n)


@pytest.mark.parametrize(
    "config",
    [EloConfig(), EloConfig(k=16.0, provisional=((5, 40.0), (20, 24.0))), EloConfig(k=8.0, davidson_nu=0.6)],
)
def test_same_floats_as_the_live_replay(config: EloConfig) -> None:
    a, b, o = _stream(5)
    rater = EloRater(config, ties="davidson" if config.davidson_nu else "half")
    states = rater.replay(a, b, o, n_models=7)
    live = replay_elo_indices(a, b, o, models=tuple("abcdefg"), config=config)
    assert [s.rating for s in states] == live.rating.tolist()  # bit for bit
    assert [s.games for s in states] == live.games.tolist()
    assert all(s.peak >= max(s.rating, config.initial) for s in states)


@given(ratings, ratings, games, games, outcomes)
def test_update_is_update_elo(ra: float, rb: float, ga: int, gb: int, o: int) -> None:
    config = EloConfig(k=10.0, provisional=((30, 40.0),))
    new_a, new_b = EloRater(config).update(EloState(ra, ga, ra), EloState(rb, gb, rb), o)
    assert (new_a.rating, new_b.rating) == update_elo(ra, rb, o, config=config, games_a=ga, games_b=gb)


@given(ratings, ratings, outcomes, st.floats(min_value=1.0, max_value=800.0), st.floats(-100.0, 100.0))
def test_zero_sum_with_one_k_for_both(ra: float, rb: float, o: int, cap: float, adv: float) -> None:
    for rater in (
        EloRater(EloConfig(k=20.0), max_difference=cap, left_advantage=adv),
        EloRater(schedule=FixedK(32.0), ties="ignore"),
        EloRater(EloConfig(davidson_nu=1.2), ties="davidson", max_difference=cap),
    ):
        new_a, new_b = rater.update(EloState(ra, 50, ra), EloState(rb, 50, rb), o)
        assert (new_a.rating - ra) + (new_b.rating - rb) == pytest.approx(0.0, abs=1e-9)


def test_fide_schedule_is_not_zero_sum_between_new_and_top_players() -> None:
    rater = EloRater(EloConfig(initial=1500.0), schedule=FideK())
    new_a, new_b = rater.update(EloState(2450.0, 5, 2450.0), EloState(2450.0, 500, 2500.0), 0)
    assert new_a.rating - 2450.0 == pytest.approx(20.0) and new_b.rating - 2450.0 == pytest.approx(-5.0)


@given(ratings, ratings)
def test_cap_bounds_the_expectation(ra: float, rb: float) -> None:
    rater = EloRater(EloConfig(), max_difference=400.0)
    e = rater.expected_score(ra, rb)
    assert expected_score(-400.0, 0.0) - TOL <= e <= expected_score(400.0, 0.0) + TOL
    if abs(ra - rb) <= 400.0:
        assert e == pytest.approx(expected_score(ra, rb), abs=1e-12)


def test_tie_modes() -> None:
    a, b = EloState(1100.0, 3, 1100.0), EloState(1000.0, 3, 1000.0)
    half = EloRater(EloConfig(k=32.0)).update(a, b, 2)
    assert half[0].rating == pytest.approx(1100.0 + 32.0 * (0.5 - expected_score(1100.0, 1000.0)))
    assert EloRater(EloConfig(k=32.0), ties="ignore").update(a, b, 3) == (a, b)
    nu = 0.9
    dav = EloRater(EloConfig(k=32.0, davidson_nu=nu), ties="davidson").update(a, b, 2)
    assert dav == tuple(
        EloState(r, 4, max(p, r))
        for r, p in zip(
            update_elo(1100.0, 1000.0, 2, config=EloConfig(k=32.0, davidson_nu=nu)),
            (1100.0, 1000.0),
            strict=True,
        )
    )
    with pytest.raises(ValueError, match="davidson_nu"):
        EloRater(EloConfig(), ties="davidson")
    with pytest.raises(ValueError, match="davidson_nu"):
        EloRater(EloConfig(davidson_nu=0.5), ties="half")
    with pytest.raises(ValueError, match="tie mode"):
        EloRater(ties="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        EloRater(max_difference=0.0)
    with pytest.raises(ValueError, match="tie_nu"):
        EloRater(EloConfig(davidson_nu=0.5), ties="davidson", tie_nu=0.5)


def test_forecasts() -> None:
    plain = EloRater(EloConfig())
    a, b = EloState(1200.0, 0, 1200.0), EloState(1000.0, 0, 1000.0)
    assert plain.expected(a, b) == pytest.approx(
        (expected_score(1200.0, 1000.0), 0.0, expected_score(1000.0, 1200.0))
    )
    nu = 0.8
    pa, pb = 10 ** (1200 / 400), 10 ** (1000 / 400)
    z = pa + pb + nu * math.sqrt(pa * pb)
    want = (pa / z, nu * math.sqrt(pa * pb) / z, pb / z)
    assert EloRater(EloConfig(), tie_nu=nu).expected(a, b) == pytest.approx(want, rel=1e-12)
    dav = EloRater(EloConfig(davidson_nu=nu), ties="davidson")
    assert dav.expected(a, b) == pytest.approx(want, rel=1e-12)
    p_left, p_tie, _ = dav.expected(a, b)
    assert p_left + p_tie / 2 == pytest.approx(dav.expected_score(1200.0, 1000.0), abs=1e-12)


def test_rolling_forecasts_match_a_hand_loop() -> None:
    a, b, o = _stream(9, n=300)
    rater = EloRater(EloConfig(k=24.0), tie_nu=0.4)
    rating = [1000.0] * 7
    rows = []
    for i, j, code in zip(a.tolist(), b.tolist(), o.tolist(), strict=True):
        rows.append(rater.expected(EloState(rating[i]), EloState(rating[j])))
        rating[i], rating[j] = update_elo(rating[i], rating[j], code, config=rater.config)
    assert np.array_equal(rolling_forecasts(rater, a, b, o, n_models=7), np.asarray(rows))
