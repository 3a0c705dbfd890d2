"""Online Elo: the textbook formula, symmetry, zero-sum, schedules and replay equality."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderboard import EloConfig, Outcome, expected_score, replay_elo, update_elo

TOL = 1e-9
ratings = st.floats(min_value=-3000, max_value=5000, allow_nan=False)
outcomes = st.sampled_from(list(Outcome))
SWAP = {
    Outcome.MODEL_A: Outcome.MODEL_B,
    Outcome.MODEL_B: Outcome.MODEL_A,
    Outcome.TIE: Outcome.TIE,
    Outcome.BOTHBAD: Outcome.BOTHBAD,
}


def test_expected_score_textbook() -> None:
    assert expected_score(1400, 1000) == pytest.approx(1 / (1 + 10 ** (-1)), abs=TOL)
    assert expected_score(1000, 1000) == 0.5
    assert expected_score(0, 1e6) >= 0.0


def test_update_values() -> None:
    a, b = update_elo(1000, 1000, Outcome.MODEL_A)
    assert a == pytest.approx(1002.0) and b == pytest.approx(998.0)
    a, b = update_elo(1100, 1000, Outcome.BOTHBAD, config=EloConfig(k=32))
    assert a == pytest.approx(1100 + 32 * (0.5 - expected_score(1100, 1000)))


@given(ratings, ratings, outcomes)
def test_zero_sum(ra: float, rb: float, o: Outcome) -> None:
    a, b = update_elo(ra, rb, o)
    assert (a - ra) + (b - rb) == pytest.approx(0.0, abs=1e-9)


@given(ratings, ratings, outcomes)
def test_swapping_sides_and_outcome_keeps_deltas(ra: float, rb: float, o: Outcome) -> None:
    a, b = update_elo(ra, rb, o)
    b2, a2 = update_elo(rb, ra, SWAP[o])
    assert a2 - ra == pytest.approx(a - ra, abs=1e-9)
    assert b2 - rb == pytest.approx(b - rb, abs=1e-9)


@settings(max_examples=50)
@given(ratings, ratings, outcomes, st.floats(min_value=0.0, max_value=3.0))
def test_davidson_zero_sum_and_reduces(ra: float, rb: float, o: Outcome, nu: float) -> None:
    cfg = EloConfig(davidson_nu=nu)
    a, b = update_elo(ra, rb, o, config=cfg)
    assert (a - ra) + (b - rb) == pytest.approx(0.0, abs=1e-9)
    plain = update_elo(ra, rb, o, config=EloConfig(davidson_nu=0.0))
    assert plain == update_elo(ra, rb, o)


def test_davidson_expected_score_formula() -> None:
    nu, ra, rb = 0.8, 1200.0, 1000.0
    pa, pb = 10 ** (ra / 400), 10 ** (rb / 400)
    e = (pa + nu / 2 * math.sqrt(pa * pb)) / (pa + pb + nu * math.sqrt(pa * pb))
    a, _ = update_elo(ra, rb, Outcome.MODEL_A, config=EloConfig(k=10, davidson_nu=nu))
    assert a == pytest.approx(ra + 10 * (1 - e), abs=1e-9)


def test_provisional_schedule() -> None:
    cfg = EloConfig(k=10, provisional=((30, 40.0), (100, 20.0)))
    assert [cfg.k_for(g) for g in (0, 29, 30, 99, 100)] == [40, 40, 20, 20, 10]
    a, b = update_elo(1000, 1000, Outcome.MODEL_A, config=cfg, games_a=0, games_b=200)
    assert a == pytest.approx(1020.0) and b == pytest.approx(995.0)


def test_replay_equals_sequential_updates() -> None:
    votes: list[tuple[str, str, Outcome | str]] = [
        ("x", "y", "model_a"),
        ("y", "z", "tie"),
        ("z", "x", Outcome.BOTHBAD),
        ("x", "z", "model_b"),
    ]
    cfg = EloConfig(k=16, provisional=((2, 32.0),))
    r = {"x": 1000.0, "y": 1000.0, "z": 1000.0}
    g = {"x": 0, "y": 0, "z": 0}
    for a, b, o in votes:
        code = o if isinstance(o, Outcome) else {"model_a": 0, "model_b": 1, "tie": 2}[o]
        r[a], r[b] = update_elo(r[a], r[b], code, config=cfg, games_a=g[a], games_b=g[b])
        g[a] += 1
        g[b] += 1
    out = replay_elo([v[0] for v in votes], [v[1] for v in votes], [v[2] for v in votes], config=cfg)
    assert out.as_dict() == r  # bit for bit
    assert out.games.tolist() == [3, 2, 3]


def test_bad_inputs() -> None:
    with pytest.raises(ValueError):
        update_elo(1000, 1000, 7)
    with pytest.raises(ValueError):
        EloConfig(scale=0)
    with pytest.raises(ValueError):
        replay_elo(["a"], ["b"], ["nope"])
