"""Every rating system on one split: online rows as replay and as rolling forecasts, and the verdict."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from leaderboard.evaluation.calibration import vote_log_losses
from leaderboard.evaluation.held_out import evaluate_methods, every_method, split_battles
from leaderboard.evaluation.simulate import simulate_battles
from leaderboard.evaluation.systems import online_raters, online_scores, pick_winner
from leaderboard.online.elo import EloConfig, EloRater
from leaderboard.online.raters import rolling_forecasts

TRUE = np.array([1000.0, 1150.0, 1300.0, 900.0, 1050.0])


def test_the_roster_has_every_rater_and_tie_mode_that_applies() -> None:
    names = set(online_raters(tie_rate=0.2))
    for family in ("elo-k4", "glicko2"):
        assert {f"{family}/ignore", f"{family}/half", f"{family}/davidson"} <= names
    for federation in ("elo-fide", "elo-uscf"):  # a draw is half a point: no Davidson rows
        assert {f"{federation}/ignore", f"{federation}/half"} <= names
        assert f"{federation}/davidson" not in names
    assert {"trueskill/davidson", "trueskill/ignore"} <= names and "trueskill/half" not in names
    assert not any(n.endswith("/davidson") for n in online_raters(tie_rate=0.0))


def test_online_and_rolling_rows_are_the_raters_own_forecasts() -> None:
    b = simulate_battles(TRUE, 1500, nu=0.5, random_state=2)
    train, test = split_battles(b, how="time", test_fraction=0.2)
    rater = EloRater(config=EloConfig(k=16.0), ties="half", tie_nu=0.3)
    rows = {r.method: r for r in online_scores(train, test, rolling=True, raters={"elo16": rater})}
    assert set(rows) == {"elo16", "elo16 (rolling)"}
    n = len(b.models)
    # rolling: each test vote forecast from every vote before it
    stream = rolling_forecasts(rater, b.model_a, b.model_b, b.outcome, n_models=n, times=b.times())
    expected = vote_log_losses(stream[len(train) :], test.outcome)
    assert np.allclose(rows["elo16 (rolling)"].vote_losses, expected)
    # online: frozen at the end of training
    states = rater.replay(train.model_a, train.model_b, train.outcome, n_models=n)
    frozen = np.array(
        [rater.expected(states[i], states[j]) for i, j in zip(test.model_a, test.model_b, strict=True)]
    )
    assert np.allclose(rows["elo16"].vote_losses, vote_log_losses(frozen, test.outcome))
    assert rows["elo16"].kind == "online" and rows["elo16 (rolling)"].kind == "rolling"
    assert rows["elo16"].log_loss != rows["elo16 (rolling)"].log_loss


def test_without_times_the_rolling_stream_is_the_training_votes_then_the_test_votes() -> None:
    b = replace(simulate_battles(TRUE, 600, nu=0.5, random_state=3), time=None)
    train, test = split_battles(b, how="time", test_fraction=0.25)
    rater = EloRater(config=EloConfig(k=16.0), ties="half", tie_nu=0.3)
    rows = {r.method: r for r in online_scores(train, test, rolling=True, raters={"elo16": rater})}
    stream = rolling_forecasts(rater, b.model_a, b.model_b, b.outcome, n_models=len(b.models))
    expected = vote_log_losses(stream[len(train) :], test.outcome)
    assert np.allclose(rows["elo16 (rolling)"].vote_losses, expected)


def test_verdict_names_the_best_row_and_brackets_its_margin() -> None:
    b = simulate_battles(TRUE, 8000, position=60.0, nu=0.5, random_state=4)
    train, test = split_battles(b, how="time", test_fraction=0.25)
    rows = evaluate_methods(train, test, methods=every_method(half_life=None, prior_sd=200.0, style=False))
    rows += online_scores(train, test, rolling=True)
    assert {"tm", "glenn-david-position", "elo-fide/half (rolling)", "glicko2/davidson"} <= {
        r.method for r in rows
    }
    verdict = pick_winner(rows, n_rounds=300)
    ranked = sorted(rows, key=lambda r: r.log_loss)
    assert verdict.winner == ranked[0].method and verdict.runner_up == ranked[1].method
    assert "position" in verdict.winner  # the data have a left-side advantage only those rows model
    assert verdict.difference == pytest.approx(ranked[1].log_loss - ranked[0].log_loss)
    assert verdict.ci_low <= verdict.difference <= verdict.ci_high
    best_online = next(r for r in ranked if r.kind == "online")
    online_margin = verdict.margins[best_online.method]
    assert online_margin[0] == pytest.approx(best_online.log_loss - ranked[0].log_loss)
    assert {r.kind for r in rows if r.method in verdict.margins} == {"batch", "online", "rolling"}
    # against a row without position the margin is clearly positive
    plain = next(r for r in rows if r.method == "elo-k4/half")
    assert pick_winner([ranked[0], plain], n_rounds=300).ci_low > 0
    with pytest.raises(ValueError):
        pick_winner(rows[:1])
