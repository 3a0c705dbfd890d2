"""The fit request: checked as it is made, each refusal naming its option, and handed whole to the fit."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from leaderboard import compute_leaderboard, simulate_battles
from leaderboard.bt.request import FitRequest, FitRequestError, ModelOptions, method_spec


@pytest.mark.parametrize(
    ("fields", "option", "message"),
    [
        ({"method": "nope"}, "method", "unknown method 'nope'; available: bt, bt-position, composite"),
        ({"interval": "jackknife"}, "interval", "interval must be one of"),
        ({"n_rounds": -1}, "n_rounds", "n_rounds must be 0 or more"),
        ({"level": 1.0}, "level", "level must be between 0 and 1"),
        ({"level": 0.0}, "level", "level must be between 0 and 1"),
        ({"anchor": ("m1", float("nan"))}, "anchor", "a finite rating"),
        ({"anchor": ("", 1000.0)}, "anchor", "a model and a finite rating"),
        ({"cluster": "annotator,model"}, "cluster", "--cluster must be one of"),
        ({"model": ModelOptions(prior=0.0)}, "model", "prior_sd must be positive"),
        ({"model": ModelOptions(half_life=-1.0)}, "model", "half_life must be positive"),
        ({"model": ModelOptions(both_bad="drop")}, "model", "unknown both_bad option 'drop'"),  # type: ignore[arg-type]
        ({"families": {"m1": "acme"}}, "families", "families are for --method composite"),
        ({"method": "composite", "rectify": "x"}, "rectify", "unknown rectification 'x'; available: ppi"),
        ({"rectify": "ppi"}, "rectify", "--rectify needs the votes with who cast them"),
    ],
)
def test_a_bad_request_is_refused_as_it_is_made_naming_its_option(
    fields: dict[str, object], option: str, message: str
) -> None:
    with pytest.raises(FitRequestError, match=re.escape(message)) as refused:
        FitRequest(**fields)  # type: ignore[arg-type]
    assert refused.value.option == option
    assert isinstance(refused.value, ValueError)  # what callers that know no request catch


def test_a_request_is_frozen_and_keeps_its_own_families() -> None:
    families = {"m1": "acme"}
    request = FitRequest(method="composite", families=families, rectify="ppi", style=["length"])  # type: ignore[arg-type]
    families["m2"] = "other"
    assert request.families == {"m1": "acme"} and request.style == ("length",)
    assert request.by_source and not FitRequest().by_source
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.method = "bt"  # type: ignore[misc]


def test_no_rounds_asks_for_no_bootstrap_and_clusters_are_checked_but_auto() -> None:
    assert FitRequest(n_rounds=0).interval == "none"
    assert FitRequest(n_rounds=0, interval="sandwich").interval == "sandwich"
    assert dataclasses.replace(FitRequest(), n_rounds=0).interval == "none"  # checked again when changed
    for cluster in ("auto", "AUTO", "none", "", "prompt", "prompt, annotator"):
        assert FitRequest(cluster=cluster).cluster == cluster


def test_model_options_describe_what_is_set_and_reach_the_spec() -> None:
    assert ModelOptions().describe() == {}
    model = ModelOptions(half_life=86_400.0, prior=50.0, both_bad="exclude", per_model_position=True)
    assert model.describe() == {
        "half_life": 86_400.0,
        "prior": 50.0,
        "both_bad": "exclude",
        "per_model_position": True,
    }
    spec = method_spec("davidson-position", model)
    assert (spec.half_life, spec.prior_sd, spec.both_bad, spec.position) == (
        86_400.0,
        50.0,
        "exclude",
        "per-model",
    )
    assert method_spec("bt", model).position == "none"  # per model only where the method has a position
    with pytest.raises(ValueError, match="needs each vote's source"):
        method_spec("composite")


def test_the_board_records_the_request_it_was_fitted_with() -> None:
    counts = simulate_battles(np.linspace(900, 1100, 5), 2000, random_state=7, tie_rate=0.2).counts()
    request = FitRequest(
        method="davidson",
        n_rounds=20,
        level=0.9,
        anchor=("model-000", 900.0),
        random_state=5,
        model=ModelOptions(prior=80.0, both_bad="exclude"),
    )
    board = compute_leaderboard(counts, request)
    assert board.method == "davidson" and board.interval == "bootstrap"
    parameters = board.parameters
    assert {
        k: parameters[k] for k in ("level", "n_rounds", "random_state", "anchor", "prior", "both_bad")
    } == {
        "level": 0.9,
        "n_rounds": 20,
        "random_state": 5,
        "anchor": ["model-000", 900.0],
        "prior": 80.0,
        "both_bad": "exclude",
    }
    assert board.rating[0] == pytest.approx(900.0)
    # the same request gives the same board
    np.testing.assert_array_equal(compute_leaderboard(counts, request).ci_low, board.ci_low)
