"""The composite simulation runs end to end on a tiny board and prints the JSON the issue asks for."""

from __future__ import annotations

import json

import pytest

from tests.script_modules import load_script


def test_composite_sim_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    sim = load_script("composite_sim")
    assert sim.main(["--replicates", "2", "--human-votes", "1500", "--judged", "6000"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result["scenarios"]) == {"single", "panel", "useless"}
    for row in result["scenarios"].values():
        assert {"coverage", "width_ratio", "old_coverage", "old_width_ratio", "tau_elo"} <= set(row)
        assert 0.0 <= row["coverage"] <= 1.0 and row["width_ratio"] > 0
    # a judge that shares the humans' ratings narrows the intervals; a coin-flipping one does not
    assert result["scenarios"]["single"]["width_ratio"] < 0.9
    assert result["scenarios"]["useless"]["width_ratio"] > 0.95


def test_bench_composite_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_script("bench_composite")
    assert bench.main(["--votes", "6000", "--sources", "3", "--models", "6", "--rounds", "5"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["votes"] == 6000 and figures["sources"] == 3
    for key in ("composite_fit_s", "composite_bootstrap_s", "plain_fit_s", "plain_bootstrap_s"):
        assert figures[key] > 0
    assert figures["bootstrap_ratio"] == figures["composite_bootstrap_s"] / figures["plain_bootstrap_s"]
