"""The method table, the fit request and compute_leaderboard: every method through the one fit and the one
bootstrap, asked for by one checked request."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from leaderboard import Leaderboard, Outcome, aggregate_codes, compute_leaderboard, simulate_battles
from leaderboard.bt.request import (
    METHODS,
    SOURCE_METHODS,
    FitRequest,
    ModelOptions,
    available_methods,
)

TRUE = np.array([1150.0, 1080.0, 1030.0, 1000.0, 960.0, 920.0])


def test_compute_leaderboard_fields_and_anchor() -> None:
    c = simulate_battles(np.linspace(900, 1200, 6), 6000, random_state=3, tie_rate=0.1).counts()
    lb = compute_leaderboard(c, FitRequest(n_rounds=100, anchor=("model-000", 900.0)))
    assert isinstance(lb, Leaderboard) and lb.method == "bt" and lb.interval == "bootstrap"
    assert lb.rating[0] == pytest.approx(900.0) and lb.ci_low[0] == pytest.approx(900.0)
    assert lb.rank.tolist() == [6, 5, 4, 3, 2, 1]
    assert np.all(lb.rank_low <= lb.rank) and np.all(lb.rank <= lb.rank_high)
    assert lb.battles.sum() == pytest.approx(2 * 6000) and lb.n_votes == 6000
    assert np.all((lb.win_rate > 0) & (lb.win_rate < 1))
    sw = compute_leaderboard(c, FitRequest(interval="sandwich"))
    assert np.all(sw.ci_low < sw.rating) and sw.parameters["n_rounds"] == 0
    none = compute_leaderboard(c, FitRequest(interval="none"))
    assert np.array_equal(none.ci_low, none.rating)
    with pytest.raises(ValueError):
        compute_leaderboard(c, FitRequest(method="nope"))


def test_method_table_is_explicit_and_needs_no_import_side_effects() -> None:
    names = (
        "bt",
        "bt-position",
        "composite",
        "davidson",
        "davidson-position",
        "glenn-david",
        "glenn-david-position",
        "tm",
        "tm-position",
    )
    assert available_methods() == names == tuple(sorted([*METHODS, *SOURCE_METHODS]))
    # a fresh interpreter that imports only the entry point sees the whole table
    code = "from leaderboard.bt.request import available_methods; print(','.join(available_methods()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ",".join(names)


def test_bt_takes_every_option_itself() -> None:
    sim = simulate_battles(TRUE, 3000, nu=0.5, random_state=14)
    counts = aggregate_codes(sim.model_a, sim.model_b, sim.outcome, models=sim.models)
    plain = compute_leaderboard(counts, FitRequest(method="bt", interval="none"))
    shrunk = compute_leaderboard(
        counts, FitRequest(method="bt", interval="none", model=ModelOptions(prior=50.0))
    )
    assert shrunk.method == "bt" == plain.method
    assert np.ptp(shrunk.rating) < np.ptp(plain.rating)
    assert shrunk.parameters["prior"] == 50.0


def test_methods_fill_a_leaderboard_and_plain_bt_matches_through_both_paths() -> None:
    sim = simulate_battles(TRUE, 6000, position=50.0, nu=0.5, random_state=12)
    counts = aggregate_codes(sim.model_a, sim.model_b, sim.outcome, models=sim.models)
    board = compute_leaderboard(counts, FitRequest(method="davidson-position", n_rounds=100, random_state=3))
    fitted = board.parameters_fitted
    assert set(fitted) == {"position_advantage_elo", "tie_propensity_nu"}
    assert fitted["position_advantage_elo"]["ci_low"] < 50.0 < fitted["position_advantage_elo"]["ci_high"]
    assert board.method == "davidson-position" and board.rank_low.min() == 1
    again = compute_leaderboard(counts, FitRequest(method="davidson-position", n_rounds=100, random_state=3))
    np.testing.assert_array_equal(board.ci_low, again.ci_low)
    # plain BT on the cells (no both-bad votes here, so excluding them only changes the path) equals the
    # fast path on pair statistics, point and sandwich intervals
    ours = compute_leaderboard(
        counts, FitRequest(method="bt", interval="sandwich", model=ModelOptions(both_bad="exclude"))
    )
    theirs = compute_leaderboard(counts, FitRequest(method="bt", interval="sandwich"))
    assert ours.parameters["optimiser_iterations"] > 0 and theirs.parameters["solver"] != "trust-exact"
    np.testing.assert_allclose(ours.rating, theirs.rating, atol=1e-6)
    np.testing.assert_allclose(ours.ci_high - ours.ci_low, theirs.ci_high - theirs.ci_low, rtol=1e-6)
    with pytest.raises(TypeError, match="colour"):
        ModelOptions(colour="red")  # type: ignore[call-arg]


def test_both_bad_rates_are_reported_per_model() -> None:
    sim = simulate_battles(TRUE, 3000, nu=0.5, random_state=13)
    outcome = sim.outcome.copy()
    worst = (sim.model_a == 5) | (sim.model_b == 5)
    flip = worst & (outcome == Outcome.TIE)
    outcome[flip] = Outcome.BOTHBAD
    counts = aggregate_codes(sim.model_a, sim.model_b, outcome, models=sim.models)
    board = compute_leaderboard(counts, FitRequest(method="davidson", interval="sandwich"))
    rates = {k.split(":")[1]: v for k, v in board.parameters_fitted.items() if k.startswith("both_bad_rate:")}
    assert rates[sim.models[5]]["value"] > 0.1
    assert rates[sim.models[0]]["value"] < rates[sim.models[5]]["value"]
    assert rates[sim.models[5]]["ci_low"] < rates[sim.models[5]]["value"] < rates[sim.models[5]]["ci_high"]
    excluded = compute_leaderboard(
        counts, FitRequest(method="davidson", interval="none", model=ModelOptions(both_bad="exclude"))
    )
    assert excluded.n_votes == board.n_votes


def test_both_bad_interval_is_wilsons() -> None:
    # 3 both-bad votes out of model a's 12 battles; Wilson's 95% score interval written out
    a = np.zeros(12, dtype=np.int64)
    b = np.array([1, 2] * 6)
    outcome = np.array([3, 3, 3, 2, 0, 1, 0, 1, 0, 1, 2, 0])
    counts = aggregate_codes(
        np.concatenate([a, [1, 2]]),
        np.concatenate([b, [2, 1]]),
        np.concatenate([outcome, [0, 0]]),
        models=("a", "b", "c"),
    )
    board = compute_leaderboard(counts, FitRequest(method="davidson", interval="none"))
    got = board.parameters_fitted["both_bad_rate:a"]
    z, n, p = 1.959963984540054, 12.0, 0.25
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert got["value"] == pytest.approx(p)
    assert got["ci_low"] == pytest.approx(centre - half, rel=1e-9)
    assert got["ci_high"] == pytest.approx(centre + half, rel=1e-9)
