"""The style-controlled board: a model that wins only through length, separation, rank changes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from leaderboard.battles import Battles
from leaderboard.bt.compute import compute_leaderboard
from leaderboard.bt.request import FitRequest
from leaderboard.data import Outcome
from leaderboard.style.board import (
    compute_style_board,
    expand_style,
    separating_features,
    style_board_table,
)

N_MODELS = 5
N_VOTES = 6000
#: Elo points one standard unit of relative length difference is worth to the voters.
LENGTH_EFFECT = 120.0
#: The verbose model writes answers this much longer (in units of the covariate) than the others.
VERBOSITY = 1.2
VERBOSE = 0
ROUNDS = 60


def _length_biased_votes(seed: int = 3) -> tuple[Battles, np.ndarray]:
    """Votes where every model is equally strong except through length: model 0 writes longer answers."""
    rng = np.random.default_rng(seed)
    true = np.array([1000.0, 1000.0, 1040.0, 960.0, 1000.0])
    a = rng.integers(0, N_MODELS, N_VOTES)
    b = (a + rng.integers(1, N_MODELS, N_VOTES)) % N_MODELS
    verbosity = np.where(np.arange(N_MODELS) == VERBOSE, VERBOSITY, 0.0)
    length = verbosity[a] - verbosity[b] + 0.3 * rng.standard_normal(N_VOTES)
    markdown = 0.5 * rng.standard_normal(N_VOTES)
    u = (true[a] - true[b] + LENGTH_EFFECT * length) * math.log(10) / 400
    outcome = np.where(rng.random(N_VOTES) < 1 / (1 + np.exp(-u)), Outcome.MODEL_A, Outcome.MODEL_B)
    battles = Battles(
        models=tuple(f"m{k}" for k in range(N_MODELS)),
        model_a=a,
        model_b=b,
        outcome=outcome.astype(np.int8),
        features=np.column_stack([length, markdown]),
        feature_names=("length", "headers"),
    )
    return battles, true


def test_a_model_winning_through_length_alone_is_put_back_by_style_control() -> None:
    battles, true = _length_biased_votes()
    default = compute_leaderboard(battles.counts(), FitRequest(n_rounds=ROUNDS, random_state=1))
    style = compute_style_board(
        battles, features=("length",), default=default, request=FitRequest(n_rounds=ROUNDS, random_state=1)
    )
    board = style.leaderboard
    k = board.models.index(f"m{VERBOSE}")
    # ratings are centred at 1000 on average; compare with the true ratings centred alike
    truth = true[VERBOSE] - true.mean() + board.rating.mean()
    assert board.ci_low[k] <= truth <= board.ci_high[k]
    d = default.models.index(f"m{VERBOSE}")
    default_truth = true[VERBOSE] - true.mean() + default.rating.mean()
    assert default.ci_low[d] > default_truth + 50
    assert default.rank[d] == 1 and board.rank[k] > 1
    assert style.rank_change[k] == default.rank[d] - board.rank[k] < 0
    coef = board.parameters_fitted["style_length_elo"]
    assert coef["ci_low"] > 0
    described = style.describe()
    assert described["features"] == ["length"]
    assert described["coefficients_elo"]["length"]["value"] == coef["value"]


def test_the_same_votes_and_seed_give_the_same_style_board() -> None:
    battles, _ = _length_biased_votes()
    default = compute_leaderboard(battles.counts(), FitRequest(n_rounds=0, interval="none"))
    one = compute_style_board(
        battles, features=("length",), default=default, request=FitRequest(n_rounds=20, random_state=4)
    )
    two = compute_style_board(
        battles, features=("length",), default=default, request=FitRequest(n_rounds=20, random_state=4)
    )
    assert np.array_equal(one.leaderboard.ci_low, two.leaderboard.ci_low)
    table = style_board_table(one)
    assert list(table.columns)[-1] == "rank_change"
    assert table["rank_change"].dtype == np.int64


def test_a_covariate_that_separates_the_votes_is_reported_and_left_out() -> None:
    battles, _ = _length_biased_votes()
    decisive = np.where(battles.outcome == Outcome.MODEL_A, 1.0, -1.0)
    bold = decisive * np.abs(np.random.default_rng(0).standard_normal(len(battles)))
    separated = Battles(
        models=battles.models,
        model_a=battles.model_a,
        model_b=battles.model_b,
        outcome=battles.outcome,
        features=np.column_stack([battles.features[:, 0], bold]),  # type: ignore[index]
        feature_names=("length", "bold"),
    )
    assert separating_features(separated) == ("bold",)
    assert separating_features(battles) == ()
    default = compute_leaderboard(separated.counts(), FitRequest(n_rounds=0, interval="none"))
    style = compute_style_board(
        separated,
        features=("length", "bold"),
        default=default,
        request=FitRequest(n_rounds=0, interval="none"),
    )
    assert style.features == ("length",)
    assert style.separating == ("bold",)
    assert "style_bold_elo" not in style.leaderboard.parameters_fitted
    with pytest.raises(ValueError, match="separate"):
        compute_style_board(
            separated, features=("bold",), default=default, request=FitRequest(n_rounds=0, interval="none")
        )


def test_votes_without_texts_are_left_out_and_counted() -> None:
    battles, _ = _length_biased_votes()
    features = battles.features.copy()  # type: ignore[union-attr]
    features[:10] = np.nan
    gappy = Battles(
        models=battles.models,
        model_a=battles.model_a,
        model_b=battles.model_b,
        outcome=battles.outcome,
        features=features,
        feature_names=battles.feature_names,
    )
    default = compute_leaderboard(gappy.counts(), FitRequest(n_rounds=0, interval="none"))
    style = compute_style_board(
        gappy, features=("length",), default=default, request=FitRequest(n_rounds=0, interval="none")
    )
    assert style.n_votes_without_texts == 10
    assert style.leaderboard.n_votes == N_VOTES - 10


def test_style_groups_expand_to_covariates() -> None:
    assert expand_style(["length", "markdown"]) == ("length", "headers", "lists", "bold")
    assert expand_style(["markdown", "bold"]) == ("headers", "lists", "bold")
    with pytest.raises(ValueError, match="unknown style feature"):
        expand_style(["colour"])
