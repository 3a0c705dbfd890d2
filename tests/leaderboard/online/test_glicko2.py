"""Glicko-2: Glickman's worked example, rating periods, inactivity, Davidson ties and convergence."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderboard.online.glicko2 import GLICKO_SCALE, Glicko2Rater, Glicko2State

GOLDEN = Path(__file__).parent / "golden"
TOL = 1e-9


def _example() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN / "glicko2_glickman_example.json").read_text())
    return data


def _play(rater: Glicko2Rater, player: Glicko2State, case: dict[str, Any]) -> Glicko2State:
    for opp in case["opponents"]:
        other = Glicko2State(opp["rating"], opp["deviation"], 0.06, period=player.period)
        player, _ = rater.update(player, other, 0 if opp["score"] == 1.0 else 1)
    return player


def test_glickman_worked_example() -> None:
    case = _example()
    rater = Glicko2Rater(tau=case["tau"])
    start = Glicko2State(**case["player"], period=0)
    played = _play(rater, start, case)
    want = case["expected"]
    v = 1.0 / played.information
    assert v == pytest.approx(want["v"]["value"], abs=want["v"]["tolerance"])
    assert v * played.gradient == pytest.approx(want["delta"]["value"], abs=want["delta"]["tolerance"])
    rated = rater.settle(played)
    for key in ("rating", "deviation", "volatility"):
        assert getattr(rated, key) == pytest.approx(want[key]["value"], abs=want[key]["tolerance"]), key
    assert rated.period == 1 and rated.games == 0
    # advance() to the next period gives the same rated state; one idle period more only widens it.
    assert rater.advance(played, 1.0) == rated
    later = rater.advance(played, 2.5)
    assert later.rating == rated.rating and later.period == 2
    phi = rated.deviation / GLICKO_SCALE
    assert later.deviation == pytest.approx(math.sqrt(phi**2 + rated.volatility**2) * GLICKO_SCALE, rel=1e-12)


def test_order_within_a_period_does_not_matter() -> None:
    case = _example()
    rater = Glicko2Rater(tau=case["tau"])
    start = Glicko2State(**case["player"], period=0)
    forward = rater.settle(_play(rater, start, case))
    backward = rater.settle(_play(rater, start, {"opponents": case["opponents"][::-1]}))
    for key in ("rating", "deviation", "volatility"):
        assert getattr(backward, key) == pytest.approx(getattr(forward, key), rel=1e-12)


def test_games_in_a_period_use_the_ratings_at_its_start() -> None:
    rater = Glicko2Rater(period_length=10.0)
    a, b, c = (rater.advance(rater.initial(), 0.0) for _ in range(3))
    a, b = rater.update(a, b, 0)  # b loses, but its rating stays put until the period ends
    assert b.rating == 1500.0 and b.games == 1
    c_vs_b, _ = rater.update(c, b, 1)
    c_vs_fresh, _ = rater.update(c, rater.advance(rater.initial(), 0.0), 1)
    assert c_vs_b.gradient == c_vs_fresh.gradient
    assert rater.advance(b, 10.0).rating < 1500.0 < rater.advance(a, 10.0).rating


@settings(max_examples=50)
@given(
    idle=st.integers(min_value=0, max_value=40),
    deviation=st.floats(min_value=30.0, max_value=350.0),
    volatility=st.floats(min_value=0.01, max_value=0.3),
)
def test_deviation_grows_with_inactivity_up_to_the_cap(
    idle: int, deviation: float, volatility: float
) -> None:
    rater = Glicko2Rater(period_length=7.0)
    state = Glicko2State(1600.0, deviation, volatility, period=3)
    later = rater.advance(state, 7.0 * (3 + idle) + 0.5)
    phi = deviation / GLICKO_SCALE
    grown = math.sqrt(phi**2 + idle * volatility**2) * GLICKO_SCALE
    assert later.deviation == pytest.approx(min(grown, 350.0), rel=1e-12)
    assert later.rating == 1600.0 and later.volatility == volatility and later.period == 3 + idle
    unbounded = Glicko2Rater(period_length=7.0, max_deviation=None).advance(state, 7.0 * (3 + idle))
    assert unbounded.deviation == pytest.approx(grown, rel=1e-12)


def test_a_new_model_enters_at_the_vote_time_without_widening() -> None:
    rater = Glicko2Rater(period_length=2.0)
    entered = rater.advance(rater.initial(), 101.0)
    assert entered.period == 50 and entered.deviation == 350.0
    with pytest.raises(ValueError, match="backwards"):
        rater.advance(entered, 99.0)
    with pytest.raises(ValueError, match="advance both"):
        rater.update(entered, rater.initial(), 0)


def test_davidson_with_small_nu_approaches_half() -> None:
    case = _example()
    half = Glicko2Rater(tau=case["tau"])
    start = Glicko2State(**case["player"], period=0)
    want = half.settle(_play(half, start, case))
    near = Glicko2Rater(tau=case["tau"], ties="davidson", nu=1e-9)
    got = near.settle(_play(near, start, case))
    assert got.rating == pytest.approx(want.rating, abs=1e-6)
    assert got.deviation == pytest.approx(want.deviation, abs=1e-6)


def test_davidson_terms_are_the_derivatives_of_the_likelihood() -> None:
    nu, s_a, s_b = 0.7, 1500.0, 1620.0
    rater = Glicko2Rater(ties="davidson", nu=nu)
    a = Glicko2State(s_a, 80.0, 0.06, period=0)
    b = Glicko2State(s_b, 120.0, 0.06, period=0)
    g = 1.0 / math.sqrt(1.0 + 3.0 * (b.deviation / GLICKO_SCALE) ** 2 / math.pi**2)

    def loglik(mu_a: float, outcome: int) -> float:
        d = g * (mu_a - s_b / GLICKO_SCALE)
        z = math.exp(d / 2) + math.exp(-d / 2) + nu
        return math.log((math.exp(d / 2), math.exp(-d / 2), nu, nu)[outcome] / z)

    h = 1e-5
    mu = s_a / GLICKO_SCALE
    for outcome in (0, 1, 2):
        new_a, _ = rater.update(a, b, outcome)
        grad = (loglik(mu + h, outcome) - loglik(mu - h, outcome)) / (2 * h)
        curv = -(loglik(mu + h, outcome) - 2 * loglik(mu, outcome) + loglik(mu - h, outcome)) / h**2
        assert new_a.gradient == pytest.approx(grad, rel=1e-6)
        assert new_a.information == pytest.approx(curv, rel=1e-4)


def test_forecast_uses_both_deviations() -> None:
    rater = Glicko2Rater()
    a = Glicko2State(1700.0, 50.0, 0.06, period=0)
    b = Glicko2State(1500.0, 50.0, 0.06, period=0)
    sure, _, _ = rater.expected(a, b)
    unsure, _, _ = rater.expected(a, Glicko2State(1500.0, 300.0, 0.06, period=0))
    phi = math.hypot(50.0, 50.0) / GLICKO_SCALE
    g = 1.0 / math.sqrt(1.0 + 3.0 * phi**2 / math.pi**2)
    assert sure == pytest.approx(1.0 / (1.0 + 10 ** (-g * 200.0 / 400.0)), rel=1e-12)
    assert 0.5 < unsure < sure
    assert Glicko2Rater(nu=0.5).expected(a, b)[1] > 0.0 == rater.expected(a, b)[1]


def test_volatility_iteration_that_cannot_converge_raises() -> None:
    case = _example()
    start = Glicko2State(**case["player"], period=0)
    stingy = Glicko2Rater(tau=case["tau"], max_iterations=1)
    with pytest.raises(RuntimeError, match="did not converge"):
        stingy.settle(_play(stingy, start, case))


def test_replay_with_times_gives_per_period_batches() -> None:
    rater = Glicko2Rater(period_length=1.0)
    a = np.array([0, 0, 0])
    b = np.array([1, 2, 3])
    o = np.array([0, 1, 1])
    start = [
        Glicko2State(1500.0, 200.0, 0.06),
        Glicko2State(1400.0, 30.0, 0.06),
        Glicko2State(1550.0, 100.0, 0.06),
        Glicko2State(1700.0, 300.0, 0.06),
    ]
    states = rater.replay(a, b, o, n_models=4, times=[0.1, 0.5, 0.9], start=start)
    rated = rater.advance(states[0], 1.0)
    assert rated.rating == pytest.approx(1464.05, abs=0.01)
    one_by_one = rater.replay(a, b, o, n_models=4, times=[0.0, 1.0, 2.0], start=start)
    assert rater.advance(one_by_one[0], 3.0).rating != pytest.approx(rated.rating, abs=0.1)


def test_bad_settings_raise() -> None:
    for kwargs in (
        {"ties": "davidson"},
        {"nu": -0.1},
        {"tau": 0.0},
        {"period_length": 0.0},
        {"max_deviation": 100.0},
        {"max_iterations": 0},
        {"ties": "maybe"},
    ):
        with pytest.raises(ValueError):
            Glicko2Rater(**kwargs)
