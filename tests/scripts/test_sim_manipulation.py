"""The manipulation simulation runs end to end, catches cheats and undoes most of their effect."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "sim_manipulation.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sim_manipulation", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def test_short_simulation(capsys: pytest.CaptureFixture[str]) -> None:
    sim = load_script()
    assert (
        sim.main(["--honest", "200", "--per-kind", "8", "--votes", "80", "--seeds", "1", "--seed", "4"]) == 0
    )
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["recall_left"] >= 0.6
    assert result["recall_testable"] >= 0.6
    assert result["false_flag_rate"] <= 0.02
    assert result["target_shift_off"] > 5.0
    assert abs(result["target_shift_on"]) < result["target_shift_off"] / 2
