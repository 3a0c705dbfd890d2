"""Model comparison: scoring rules, splits, and that the matching method wins on simulated data."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from leaderboard.battles import Battles
from leaderboard.data import parse_outcome
from leaderboard.evaluation.held_out import default_methods, evaluate_methods, score_forecasts, split_battles
from leaderboard.evaluation.methods import NO_SIDES, NO_TIES, data_gaps
from leaderboard.evaluation.simulate import simulate_battles
from leaderboard.evaluation.systems import left_out_rows
from tests.real_data import VICUNA_JUDGES

TRUE = np.array([1150.0, 1080.0, 1030.0, 1000.0, 960.0, 920.0])


def _table(rows: list) -> dict[str, object]:  # type: ignore[type-arg]
    return {r.method: r for r in rows}


def test_scores_of_known_forecasts() -> None:
    outcome = np.array([0, 1, 2, 3])
    perfect = np.array([[1.0, 0, 0], [0, 0, 1.0], [0, 1.0, 0], [0, 1.0, 0]])
    s = score_forecasts(perfect, outcome)
    assert s["log_loss"] == pytest.approx(0.0, abs=1e-12)
    assert s["brier"] == pytest.approx(0.0)
    assert s["accuracy"] == 1.0
    uniform = np.full((4, 3), 1 / 3)
    s = score_forecasts(uniform, outcome)
    assert s["log_loss"] == pytest.approx(math.log(3))
    assert s["brier"] == pytest.approx(2 / 3)


def test_splits_are_seeded_and_time_split_tests_the_newest() -> None:
    sim = simulate_battles(TRUE, 1000, nu=0.3, random_state=0)
    a, b = split_battles(sim, how="random", test_fraction=0.25, random_state=3)
    c, d = split_battles(sim, how="random", test_fraction=0.25, random_state=3)
    np.testing.assert_array_equal(b.model_a, d.model_a)
    assert len(a) == 750 and len(b) == 250
    train, test = split_battles(sim, how="time", test_fraction=0.25)
    assert train.times().max() <= test.times().min()


def test_davidson_position_wins_when_data_have_position_bias_and_ties() -> None:
    sim = simulate_battles(TRUE, 20_000, position=50.0, nu=0.6, random_state=21)
    train, test = split_battles(sim, how="random", test_fraction=0.3, random_state=1)
    # no drift here, so no time-weighted row (with a long half-life it is the same model plus noise)
    methods = default_methods(half_life=None, prior_sd=200.0, style=False)
    table = _table(evaluate_methods(train, test, methods=methods))
    best_loss = min(table.values(), key=lambda r: r.log_loss).method  # type: ignore[attr-defined]
    best_aic = min(table.values(), key=lambda r: r.aic).method  # type: ignore[attr-defined]
    assert best_aic == "davidson-position"
    assert best_loss in ("davidson-position", "davidson-position+prior")
    dp = table["davidson-position"]
    assert dp.log_loss < table["bt"].log_loss < table["elo"].log_loss + 0.01  # type: ignore[attr-defined]
    assert abs(dp.parameters_fitted["position_advantage_elo"]["value"] - 50.0) < 15  # type: ignore[attr-defined]
    assert abs(dp.parameters_fitted["tie_propensity_nu"]["value"] - 0.6) < 0.08  # type: ignore[attr-defined]


def test_time_weighted_method_wins_on_a_time_split_with_drift() -> None:
    after = TRUE.copy()
    after[5], after[0] = 1250.0, 900.0
    sim = simulate_battles(
        TRUE, 20_000, position=40.0, nu=0.5, change_at=0.55, ratings_after=after, random_state=8
    )
    train, test = split_battles(sim, how="time", test_fraction=0.2)
    rows = evaluate_methods(train, test, half_life=0.1)
    best = min(rows, key=lambda r: r.log_loss)
    assert best.method == "davidson-position+time"


def test_style_rows_win_when_style_moves_votes() -> None:
    sim = simulate_battles(
        TRUE, 12_000, position=30.0, nu=0.4, n_features=2, style=np.array([80.0, 0.0]), random_state=6
    )
    train, test = split_battles(sim, how="random", test_fraction=0.3, random_state=2)
    table = _table(evaluate_methods(train, test))
    best = min(table.values(), key=lambda r: r.log_loss).method  # type: ignore[attr-defined]
    assert best == "davidson-position+style"
    coef = table["davidson-position+style"].parameters_fitted  # type: ignore[attr-defined]
    assert abs(coef["style_x0_elo"]["value"] - 80.0) < 20 and abs(coef["style_x1_elo"]["value"]) < 20


def test_real_llm_judge_battles_show_first_position_bias() -> None:
    import pandas as pd

    frame = pd.read_json(VICUNA_JUDGES, lines=True)
    models = tuple(sorted(set(frame.model_a) | set(frame.model_b)))
    index = {m: i for i, m in enumerate(models)}
    battles = Battles(
        models=models,
        model_a=frame.model_a.map(index).to_numpy(np.int64),
        model_b=frame.model_b.map(index).to_numpy(np.int64),
        outcome=np.array([parse_outcome(w) for w in frame.winner], dtype=np.int64),
    )
    train, test = split_battles(battles, how="random", test_fraction=0.2, random_state=0)
    table = _table(evaluate_methods(train, test))
    dp = table["davidson-position"]
    assert dp.log_loss < table["bt"].log_loss  # type: ignore[attr-defined]
    assert dp.aic < table["davidson"].aic - 50  # type: ignore[attr-defined]
    assert dp.parameters_fitted["position_advantage_elo"]["ci_low"] > 40  # type: ignore[attr-defined]


def test_rows_the_votes_cannot_identify_are_left_out_with_the_reason() -> None:
    b = simulate_battles(np.array([1000.0, 1100.0, 950.0]), 900, position=50.0, random_state=3)
    decisive = b.take(np.flatnonzero(b.outcome < 2))
    train, test = split_battles(decisive, how="random", random_state=0)
    assert data_gaps(train) == {"ties": NO_TIES}
    rows = {r.method for r in evaluate_methods(train, test, all_methods=True)}  # no failed fit
    assert {"bt", "bt-position", "tm"} <= rows and not rows & {"davidson", "glenn-david-position"}
    gone = left_out_rows(train)
    assert gone["davidson-position"] == NO_TIES and gone["elo-k4/davidson"] == NO_TIES
    assert "bt-position" not in gone
    unsided = replace(train, sided=np.zeros(len(train), dtype=bool))
    assert data_gaps(unsided)["position"] == NO_SIDES
    rows = {r.method for r in evaluate_methods(unsided, test, all_methods=True)}
    assert "bt" in rows and not any("position" in r for r in rows)
