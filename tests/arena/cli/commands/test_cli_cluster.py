"""arena recompute --cluster: clustered intervals from a battles file whose judges are the annotators."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from arena.cli.main import build_app
from leaderboard import simulate_battles


def _file(tmp_path: Path, n_judges: int) -> Path:
    sim = simulate_battles(
        np.linspace(900, 1100, 5),
        3000,
        random_state=2,
        position=40,
        nu=0.4,
        n_annotators=n_judges,
        annotator_position_sd=150,
    )
    winner = np.array(["model_a", "model_b", "tie", "tie (bothbad)"])[sim.outcome]
    assert sim.annotator is not None
    path = tmp_path / f"battles-{n_judges}.jsonl"
    with path.open("w") as out:
        for a, b, w, j in zip(sim.model_a, sim.model_b, winner, sim.annotator, strict=True):
            row = {"model_a": sim.models[a], "model_b": sim.models[b], "winner": str(w), "judge": f"j{j}"}
            out.write(json.dumps(row) + "\n")
    return path


def _run(path: Path, out: Path, *extra: str) -> dict[str, object]:
    args = ["recompute", "--from", str(path), "--method", "davidson-position", "--bootstrap", "100"]
    result = CliRunner().invoke(build_app(), [*args, "--no-plots", "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    meta: dict[str, object] = json.loads((out / "metadata.json").read_text())
    # the output says what the intervals are over, and so whether `auto` clustered
    intervals = meta["intervals"]
    assert isinstance(intervals, dict)
    assert f"intervals: 95% percentile bootstrap, 100 rounds, over {intervals['unit']}" in " ".join(
        result.output.split()
    )
    return meta


def test_cluster_by_annotator_widens_the_position_interval(tmp_path: Path) -> None:
    path = _file(tmp_path, 30)
    plain = _run(path, tmp_path / "plain", "--cluster", "none")
    clustered = _run(path, tmp_path / "clustered", "--cluster", "annotator")
    auto = _run(path, tmp_path / "auto")  # the default
    params = clustered["parameters"]
    assert isinstance(params, dict) and params["cluster"] == "annotator" and params["cluster_counts"] == [30]
    assert "cluster" not in plain["parameters"]  # type: ignore[operator]
    assert auto["parameters"]["cluster"] == "annotator"  # type: ignore[index]
    assert auto["clustering"] == {  # what was asked, what was used, and why
        "asked": "auto",
        "used": "annotator",
        "annotators": 30,
        "prompts": 0,
        "min_clusters": 20,
        "reason": "votes resampled and summed by cluster (30 annotators)",
    }
    assert "clustering" not in plain
    assert auto["intervals"] == {
        "level": 0.95,
        "method": "percentile bootstrap",
        "rounds": 100,
        "unit": "annotator clusters (30 annotators)",
        "coverage": (
            "marginal: each model's interval covers its own rating at the level; the intervals of all "
            "models together cover less (no simultaneous adjustment)"
        ),
        "fit": (
            "Bradley-Terry (logistic), ties by Davidson's model (tie propensity nu), one left-side advantage"
        ),
        "ranks": (
            "rank_low and rank_high are the 2.5% and 97.5% quantiles of the model's rank over the "
            "bootstrap rounds (marginal, like the intervals)"
        ),
        "rank_ub": "1 + the models whose lower bound is above this model's upper bound",
    }
    assert plain["intervals"]["unit"] == "votes, as independent"  # type: ignore[index]

    def width(meta: dict[str, object]) -> float:
        fitted = meta["parameters_fitted"]["position_advantage_elo"]  # type: ignore[index]
        return float(fitted["ci_high"] - fitted["ci_low"])

    assert width(clustered) > 2 * width(plain)
    assert "adjacent_swap_votes" in clustered["fragility"]  # type: ignore[operator]


def test_auto_leaves_few_judges_independent_and_bad_values_are_refused(tmp_path: Path) -> None:
    path = _file(tmp_path, 4)
    auto = _run(path, tmp_path / "auto")
    assert "cluster" not in auto["parameters"]  # type: ignore[operator]
    clustering = auto["clustering"]
    assert isinstance(clustering, dict) and clustering["used"] == "none"
    assert clustering["reason"].startswith("4 annotators, fewer than 20")
    unit = auto["intervals"]["unit"]  # type: ignore[index]
    assert unit.startswith("votes (--cluster auto: 4 annotators, fewer than 20") and "independent" in unit
    # four judges, each with its own side bias (sd 150): each one's term, and a pooled interval that
    # admits their spread where the board's own interval (votes independent) does not
    judges = auto["judge_position"]
    assert isinstance(judges, dict) and [j["judge"] for j in judges["judges"]] == ["j0", "j1", "j2", "j3"]
    fitted = auto["parameters_fitted"]["position_advantage_elo"]  # type: ignore[index]
    pooled = judges["pooled"]
    assert pooled["ci_high"] - pooled["ci_low"] > 4 * (fitted["ci_high"] - fitted["ci_low"])
    assert judges["between_judge_sd"] > 50
    result = CliRunner().invoke(
        build_app(), ["recompute", "--from", str(path), "--out", str(tmp_path / "x"), "--cluster", "judge"]
    )
    assert result.exit_code != 0 and "--cluster" in result.output
