"""The manipulation simulation runs end to end, catches cheats and undoes most of their effect."""

from __future__ import annotations

import json

import pytest

from tests.script_modules import load_script


def test_short_simulation(capsys: pytest.CaptureFixture[str]) -> None:
    sim = load_script("sim_manipulation")
    assert (
        sim.main(["--honest", "200", "--per-kind", "8", "--votes", "80", "--seeds", "1", "--seed", "4"]) == 0
    )
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["recall_left"] >= 0.6
    assert result["recall_testable"] >= 0.6
    assert result["false_flag_rate"] <= 0.02
    assert result["target_shift_off"] > 5.0
    assert abs(result["target_shift_on"]) < result["target_shift_off"] / 2
