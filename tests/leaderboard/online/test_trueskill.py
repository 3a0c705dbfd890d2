"""Two-player TrueSkill against the trueskill package's numbers (documented, recorded and live)."""

from __future__ import annotations

import importlib
import json
import math
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderboard.online.trueskill import TrueSkillRater, TrueSkillState, draw_margin

GOLDEN = Path(__file__).parent / "golden"


def _golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN / "trueskill_two_player.json").read_text())
    return data


def _oracle() -> ModuleType:
    """The trueskill package (dev extra); its source has escape sequences current Python warns about."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module("trueskill")


def test_documented_numbers() -> None:
    doc = _golden()["documented"]
    rater = TrueSkillRater()
    for outcome, key in ((0, "win"), (2, "draw")):
        a, b = rater.update(rater.initial(), rater.initial(), outcome)
        for state, want in ((a, doc[key]["new_a"]), (b, doc[key]["new_b"])):
            assert (state.mu, state.sigma) == pytest.approx(tuple(want), abs=doc["tolerance"]), key


def test_recorded_library_cases() -> None:
    data = _golden()
    rater = TrueSkillRater()
    for case in data["cases"]:
        a, b = rater.update(TrueSkillState(*case["a"]), TrueSkillState(*case["b"]), case["outcome"])
        assert (a.mu, a.sigma) == pytest.approx(tuple(case["new_a"]), abs=data["tolerance"]), case
        assert (b.mu, b.sigma) == pytest.approx(tuple(case["new_b"]), abs=data["tolerance"]), case


@settings(max_examples=150, deadline=None)
@given(
    mu_a=st.floats(min_value=0.0, max_value=50.0),
    mu_b=st.floats(min_value=0.0, max_value=50.0),
    sigma_a=st.floats(min_value=0.3, max_value=10.0),
    sigma_b=st.floats(min_value=0.3, max_value=10.0),
    outcome=st.sampled_from([0, 1, 2]),
    draw_probability=st.floats(min_value=0.01, max_value=0.6),
)
def test_agrees_with_the_library(
    mu_a: float, mu_b: float, sigma_a: float, sigma_b: float, outcome: int, draw_probability: float
) -> None:
    ts = _oracle()
    env = ts.TrueSkill(draw_probability=draw_probability, backend="scipy")
    ra, rb = env.create_rating(mu_a, sigma_a), env.create_rating(mu_b, sigma_b)
    if outcome == 0:
        want_a, want_b = ts.rate_1vs1(ra, rb, env=env)
    elif outcome == 1:
        want_b, want_a = ts.rate_1vs1(rb, ra, env=env)
    else:
        want_a, want_b = ts.rate_1vs1(ra, rb, drawn=True, env=env)
    rater = TrueSkillRater(draw_probability=draw_probability)
    a, b = rater.update(TrueSkillState(mu_a, sigma_a), TrueSkillState(mu_b, sigma_b), outcome)
    assert (a.mu, a.sigma, b.mu, b.sigma) == pytest.approx(
        (want_a.mu, want_a.sigma, want_b.mu, want_b.sigma), rel=1e-8, abs=1e-8
    )


def test_draw_margin_matches_the_library() -> None:
    ts = _oracle()
    env = ts.TrueSkill(backend="scipy")
    assert draw_margin(0.1, 25.0 / 6.0) == pytest.approx(ts.calc_draw_margin(0.1, 2, env), rel=1e-12)


def test_forecast_of_two_certain_equals_is_the_draw_probability() -> None:
    rater = TrueSkillRater(tau=0.0, draw_probability=0.25)
    sure = TrueSkillState(25.0, 1e-9)
    left, draw, right = rater.expected(sure, sure)
    assert draw == pytest.approx(0.25, abs=1e-12) and left == pytest.approx(right, abs=1e-15)
    gap = TrueSkillState(30.0, 2.0)
    c = math.sqrt(2 * rater.beta**2 + 2.0**2 + 1e-18)
    assert rater.expected(gap, sure)[0] == pytest.approx(
        0.5 * math.erfc(-(5.0 - rater.margin) / c / math.sqrt(2))
    )


@pytest.mark.parametrize("outcome", [0, 1, 2])
def test_long_shots_stay_finite(outcome: int) -> None:
    rater = TrueSkillRater()
    strong, weak = TrueSkillState(200.0, 1.0), TrueSkillState(0.0, 1.0)
    a, b = rater.update(weak, strong, outcome)
    for s in (a, b):
        assert math.isfinite(s.mu) and 0.0 < s.sigma <= math.hypot(1.0, rater.tau)
    if outcome == 0:
        assert a.mu > weak.mu + 1.0 and b.mu < strong.mu - 1.0  # the upset moves both a lot


def test_bad_settings_raise() -> None:
    with pytest.raises(ValueError, match="half"):
        TrueSkillRater(ties="half")
    with pytest.raises(ValueError, match="draw_probability"):
        TrueSkillRater(draw_probability=0.0)
    with pytest.raises(ValueError, match="draw_probability"):
        TrueSkillRater(draw_probability=1.0)
    with pytest.raises(ValueError):
        TrueSkillRater(sigma=0.0)
    assert TrueSkillRater(ties="ignore", draw_probability=0.0).margin == 0.0
