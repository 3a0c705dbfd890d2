"""The online-rater family: replay equals step-by-step updates, forecasts, and the shared properties.

Every rater is checked the same way: symmetric under a side swap when position is off (and not when it
is on), monotone in the outcome, ties skipped in ``ignore`` mode, replay equal to the steps, and rolling
forecasts that never look at the vote they forecast.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderboard.online.elo import EloConfig, EloRater, EloState
from leaderboard.online.elo_schedules import FideK, UscfK
from leaderboard.online.federations import ChessState, FideRater, UscfRater
from leaderboard.online.glicko2 import Glicko2Rater, Glicko2State
from leaderboard.online.raters import OnlineRater, davidson_probabilities, rolling_forecasts, score_of
from leaderboard.online.trueskill import TrueSkillRater, TrueSkillState

TOL = 1e-9
SWAP = (1, 0, 2, 3)

RATERS: dict[str, OnlineRater[Any]] = {
    "elo": EloRater(EloConfig(k=32.0), tie_nu=0.5),
    "elo-fide-cap": EloRater(EloConfig(initial=1500.0), schedule=FideK(), max_difference=400.0),
    "elo-uscf-ignore": EloRater(EloConfig(initial=1500.0), schedule=UscfK(), ties="ignore"),
    "elo-davidson": EloRater(EloConfig(k=24.0, davidson_nu=0.7), ties="davidson"),
    "fide": FideRater(tie_nu=0.4),
    "fide-ignore": FideRater(ties="ignore"),
    "uscf": UscfRater(tie_nu=0.4),
    "uscf-ignore": UscfRater(ties="ignore"),
    "glicko2": Glicko2Rater(period_length=5.0, nu=0.4),
    "glicko2-davidson": Glicko2Rater(ties="davidson", nu=0.8, period_length=3.0),
    "glicko2-ignore": Glicko2Rater(ties="ignore", tau=0.8),
    "trueskill": TrueSkillRater(),
    "trueskill-ignore": TrueSkillRater(ties="ignore", draw_probability=0.2),
}


def _stream(
    seed: int, n: int = 400, n_models: int = 6
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n_models, n)
    b = (a + rng.integers(1, n_models, n)) % n_models
    times = np.cumsum(rng.exponential(1.0, n))
    return a, b, rng.integers(0, 4, n), times


def _state(rater: OnlineRater[Any], x: float, spread: float) -> Any:
    """A state ``x`` (in -1..1) of the way up the rater's usual range, with uncertainty ``spread`` (0..1)."""
    if isinstance(rater, EloRater):
        r = rater.config.initial + 600.0 * x
        return EloState(rating=r, games=int(60 * spread), peak=r + 50.0 * spread)
    if isinstance(rater, FideRater | UscfRater):
        r, games = rater.initial_rating + 600.0 * x, int(60 * spread)
        return ChessState(rating=r, games=games, peak=r + 50.0 * spread, points=games / 2)
    if isinstance(rater, Glicko2Rater):
        return Glicko2State(1500.0 + 600.0 * x, 30.0 + 300.0 * spread, 0.04 + 0.04 * spread, period=0)
    assert isinstance(rater, TrueSkillRater)
    return TrueSkillState(25.0 + 20.0 * x, 0.5 + 8.0 * spread)


def _level(rater: OnlineRater[Any], state: Any) -> float:
    """The number a leaderboard would show: rating after the open period (Glicko-2), mean (TrueSkill)."""
    if isinstance(rater, EloRater | FideRater | UscfRater):
        return float(state.rating)
    if isinstance(rater, Glicko2Rater):
        return float(rater.settle(state).rating)
    return float(state.mu)


def _same(x: Any, y: Any) -> bool:
    return bool(
        np.allclose(
            np.asarray(list(vars(x).values()), dtype=float),
            np.asarray(list(vars(y).values()), dtype=float),
            rtol=1e-9,
            atol=1e-9,
        )
    )


unit = st.floats(min_value=-1.0, max_value=1.0)
spread = st.floats(min_value=0.0, max_value=1.0)


@pytest.mark.parametrize("name", sorted(RATERS))
def test_replay_equals_step_by_step(name: str) -> None:
    rater = RATERS[name]
    a, b, o, times = _stream(11)
    states = [rater.initial() for _ in range(6)]
    for i, j, code, t in zip(a.tolist(), b.tolist(), o.tolist(), times.tolist(), strict=True):
        sa, sb = rater.advance(states[i], t), rater.advance(states[j], t)
        if code >= 2 and rater.ties == "ignore":
            continue
        states[i], states[j] = rater.update(sa, sb, code)
    assert rater.replay(a, b, o, n_models=6, times=times) == states  # exact


@pytest.mark.parametrize("name", sorted(RATERS))
def test_replay_continues_from_a_start(name: str) -> None:
    rater = RATERS[name]
    a, b, o, times = _stream(12)
    whole = rater.replay(a, b, o, n_models=6, times=times)
    half = rater.replay(a[:150], b[:150], o[:150], n_models=6, times=times[:150])
    frozen = list(half)
    rest = rater.replay(a[150:], b[150:], o[150:], n_models=6, times=times[150:], start=half)
    assert rest == whole and half == frozen


@pytest.mark.parametrize("name", sorted(RATERS))
def test_rolling_forecasts_only_look_back(name: str) -> None:
    rater = RATERS[name]
    a, b, o, times = _stream(13, n=200)
    proba = rolling_forecasts(rater, a, b, o, n_models=6, times=times)
    assert proba.shape == (200, 3)
    assert np.allclose(proba.sum(axis=1), 1.0, atol=1e-12) and (proba >= 0).all()
    first = rater.expected(rater.advance(rater.initial(), times[0]), rater.advance(rater.initial(), times[0]))
    assert proba[0].tolist() == list(first)
    flipped = o.copy()
    flipped[100] = 1 if o[100] != 1 else 0
    again = rolling_forecasts(rater, a, b, flipped, n_models=6, times=times)
    assert np.array_equal(again[:101], proba[:101])  # the forecast of vote 100 does not see vote 100
    assert not np.array_equal(again[101:], proba[101:])  # later forecasts do


@pytest.mark.parametrize("name", sorted(RATERS))
@settings(max_examples=60, deadline=None)
@given(xa=unit, xb=unit, ua=spread, ub=spread, outcome=st.sampled_from([0, 1, 2, 3]))
def test_symmetric_under_side_swap(
    name: str, xa: float, xb: float, ua: float, ub: float, outcome: int
) -> None:
    rater = RATERS[name]
    sa, sb = _state(rater, xa, ua), _state(rater, xb, ub)
    left, right = rater.update(sa, sb, outcome)
    right2, left2 = rater.update(sb, sa, SWAP[outcome])
    assert _same(left, left2) and _same(right, right2)
    pl, pt, pr = rater.expected(sa, sb)
    assert np.allclose(rater.expected(sb, sa), (pr, pt, pl), atol=1e-12)


@pytest.mark.parametrize("name", ["elo", "glicko2", "trueskill"])
def test_left_advantage_breaks_the_symmetry(name: str) -> None:
    favouring_left: dict[str, OnlineRater[Any]] = {
        "elo": EloRater(EloConfig(k=32.0), left_advantage=30.0),
        "glicko2": Glicko2Rater(left_advantage=30.0),
        "trueskill": TrueSkillRater(left_advantage=1.0),
    }
    on = favouring_left[name]
    sa = sb = on.initial() if name != "glicko2" else Glicko2State(1500.0, 100.0, 0.06, period=0)
    pl, _, pr = on.expected(sa, sb)
    assert pl > pr
    left, _ = on.update(sa, sb, 0)
    _, left2 = on.update(sb, sa, 1)
    assert _level(on, left) < _level(on, left2)  # winning from the favoured side earns less


@pytest.mark.parametrize("name", sorted(RATERS))
@settings(max_examples=60, deadline=None)
@given(xa=unit, xb=unit, ua=spread, ub=spread)
def test_monotone_in_the_outcome(name: str, xa: float, xb: float, ua: float, ub: float) -> None:
    rater = RATERS[name]
    sa, sb = _state(rater, xa, ua), _state(rater, xb, ub)
    win, tie, loss = (rater.update(sa, sb, code) for code in (0, 2, 1))
    left = [_level(rater, s[0]) for s in (win, tie, loss)]
    right = [_level(rater, s[1]) for s in (win, tie, loss)]
    assert left[0] >= left[1] - TOL and left[1] >= left[2] - TOL and left[0] > left[2]
    assert right[0] <= right[1] + TOL and right[1] <= right[2] + TOL and right[0] < right[2]


@pytest.mark.parametrize("name", [n for n in sorted(RATERS) if RATERS[n].ties == "ignore"])
def test_ignored_ties_change_nothing(name: str) -> None:
    rater = RATERS[name]
    sa, sb = _state(rater, 0.3, 0.5), _state(rater, -0.2, 0.1)
    for code in (2, 3):
        assert rater.update(sa, sb, code) == (sa, sb)
    a, b, o, times = _stream(14)
    decisive = o < 2
    assert rater.replay(a, b, o, n_models=6, times=times) == rater.replay(
        a[decisive], b[decisive], o[decisive], n_models=6, times=times[decisive]
    )


@settings(max_examples=200)
@given(d=st.floats(min_value=-800.0, max_value=800.0), nu=st.floats(min_value=0.0, max_value=5.0))
def test_davidson_probabilities_match_the_formula(d: float, nu: float) -> None:
    pl, pt, pr = davidson_probabilities(d, nu)
    assert pl + pt + pr == pytest.approx(1.0, abs=1e-12)
    if abs(d) < 30:
        pa, pb = np.exp(d / 2), np.exp(-d / 2)
        z = pa + pb + nu
        assert (pl, pt, pr) == pytest.approx((pa / z, nu / z, pb / z), rel=1e-9, abs=1e-15)
    assert davidson_probabilities(-d, nu) == pytest.approx((pr, pt, pl), abs=1e-15)


def test_bad_streams_raise() -> None:
    rater = RATERS["elo"]
    with pytest.raises(ValueError, match="same length"):
        rater.replay([0, 1], [1], [0], n_models=2)
    with pytest.raises(ValueError, match="out of range"):
        rater.replay([0], [2], [0], n_models=2)
    with pytest.raises(ValueError, match="outcome code 5"):
        rater.replay([0], [1], [5], n_models=2)
    with pytest.raises(ValueError, match="itself"):
        rater.replay([1], [1], [0], n_models=2)
    with pytest.raises(ValueError, match="non-decreasing"):
        rater.replay([0, 1], [1, 0], [0, 0], n_models=2, times=[2.0, 1.0])
    with pytest.raises(ValueError, match="one state per model"):
        rater.replay([0], [1], [0], n_models=2, start=[rater.initial()])
    with pytest.raises(ValueError, match="outcome code"):
        score_of(4)
    with pytest.raises(ValueError, match="outcome code"):
        rater.update(rater.initial(), rater.initial(), -1)


def _simulated_davidson_votes(
    seed: int, n: int = 4000, n_models: int = 8, nu: float = 0.6
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Votes from known strengths (natural-log units, 0.4 apart) under Davidson's model with ties."""
    rng = np.random.default_rng(seed)
    strength = np.linspace(-1.4, 1.4, n_models)
    a = rng.integers(0, n_models, n)
    b = (a + rng.integers(1, n_models, n)) % n_models
    rows = [davidson_probabilities(float(d), nu) for d in strength[a] - strength[b]]
    p = np.asarray(rows)
    u = rng.random(n)
    outcome = np.where(u < p[:, 0], 0, np.where(u < p[:, 0] + p[:, 1], 2, 1))
    return a, b, outcome, strength


LEARNERS: dict[str, OnlineRater[Any]] = {
    "elo": EloRater(EloConfig(k=16.0), tie_nu=0.6),
    "elo-davidson": EloRater(EloConfig(k=16.0, davidson_nu=0.6), ties="davidson"),
    "fide": FideRater(tie_nu=0.6),
    "uscf": UscfRater(tie_nu=0.6),
    "glicko2": Glicko2Rater(nu=0.6, period_length=50.0),
    "trueskill": TrueSkillRater(draw_probability=0.2),
}


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_raters_learn_the_true_order_and_forecast_better_than_chance(name: str) -> None:
    rater = LEARNERS[name]
    a, b, o, strength = _simulated_davidson_votes(21)
    states = rater.replay(a, b, o, n_models=8)
    levels = [
        _level(rater, rater.advance(s, len(o)) if isinstance(rater, Glicko2Rater) else s) for s in states
    ]
    # Online ratings keep the noise of their last few dozen votes: neighbours 0.4 apart may swap.
    rank_corr = np.corrcoef(np.argsort(np.argsort(levels)), np.arange(8))[0, 1]
    assert rank_corr > 0.85
    proba = rolling_forecasts(rater, a, b, o, n_models=8)
    column = np.array([0, 2, 1, 1])[o]  # outcome code -> [left, tie, right] column
    late = np.arange(len(o)) >= len(o) // 2
    log_loss = -np.mean(np.log(np.clip(proba[late, column[late]], 1e-15, 1.0)))
    base = np.bincount(column[~late], minlength=3) / np.sum(~late)  # the early votes' outcome shares
    base_loss = -np.mean(np.log(base[column[late]]))
    assert log_loss < base_loss - 0.05
