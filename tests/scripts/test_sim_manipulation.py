"""The manipulation simulation, small: every attack moves the target, the review undoes it, honest voters
are left alone, and the bots are caught. The full-size three-seed run is the script itself."""

from __future__ import annotations

import json

import pytest

from tests.script_modules import load_script

SMALL = [
    "--honest", "1000", "--votes", "15000", "--sybils", "30", "--riggers", "3", "--rigger-seen", "250",
    "--deanon", "5", "--deanon-seen", "300", "--bots", "10", "--bot-min", "60", "--seeds", "1",
]  # fmt: skip


def test_small_simulation_of_every_attack(capsys: pytest.CaptureFixture[str]) -> None:
    sim = load_script("sim_manipulation")
    assert sim.main(SMALL) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["scenarios"]
    assert set(result) == set(sim.SCENARIOS)
    for name in sim.TARGETED:
        row = result[name]
        assert row["shift_off"] > 0.5 * row["rank_gap"], name  # the attack works without the review
        assert row["cut_on_min"] >= 0.8, name
        assert row["cut_robust_min"] >= 0.6, name
    for name in ("left_bots", "random_bots"):
        assert result[name]["attackers_caught_min"] >= 0.9, name
    for name, row in result.items():
        assert row["honest_flagged_rate_max"] <= 0.01, name
        assert row["honest_board_move_max"] <= 1.0, name
    assert result["honest"]["robust_board_move"] <= 1.0


def test_unknown_scenario_is_refused() -> None:
    sim = load_script("sim_manipulation")
    with pytest.raises(SystemExit):
        sim.main(["--scenarios", "honest,nonsense"])
