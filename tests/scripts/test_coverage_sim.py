"""The coverage study and the cluster benchmark run end to end on tiny inputs (they cannot rot)."""

from __future__ import annotations

import json

import pytest

from tests.script_modules import load_script


def test_coverage_sim_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    sim = load_script("coverage_sim")
    args = ["--boards", "4", "--rounds", "100", "--votes", "4000", "--models", "5", "--target-votes", "40000"]
    assert sim.main([*args, "--scenario", "annotator"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    (row,) = result["scenarios"]
    assert row["scenario"] == "annotator" and row["cluster"] == "annotator"
    # side bias differing between annotators: clustering must widen the position interval. The sandwich
    # ratio is exact (about 1.37 here); the bootstrap's is a Monte Carlo estimate of about 1.4 that two
    # boards of 30 rounds put anywhere from 1.13 to 1.56 with the seed (or with the order the clusters are
    # numbered in), so four boards of 100 rounds and a margin for their noise
    assert row["bootstrap+cluster"]["position_width"] > 1.2 * row["bootstrap"]["position_width"]
    assert row["sandwich+cluster"]["position_width"] > 1.3 * row["sandwich"]["position_width"]
    for kind in ("bootstrap", "bootstrap+cluster", "sandwich", "sandwich+cluster"):
        assert all(0.0 <= row[kind][p] <= 1.0 for p in ("ratings", "position", "tie"))


def test_bench_cluster_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_script("bench_cluster")
    assert bench.main(["--votes", "5000", "--models", "8", "--annotators", "50", "--rounds", "20"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["clusters"] == [50] and result["iid_seconds"] > 0 and result["cluster_seconds"] > 0
