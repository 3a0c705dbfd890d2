"""`arena evaluate --method composite`: the source-aware composite as one more row of the held-out
comparison, fitted on votes that carry who cast them; refused, with the reason, when no vote names a judge."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from arena.cli.main import app

runner = CliRunner(env={"COLUMNS": "400"})  # error messages unwrapped


def _battles_file(path: Path, *, with_judge: bool) -> Path:
    """Humans without a side preference, and a steep judge that leans hard to the left answer: a pooled
    fit forecasts neither well, the composite forecasts each as itself."""
    rng = np.random.default_rng(7)
    strength = {"a": 1.2, "b": 0.5, "c": 0.0, "d": -0.6, "e": -1.1}
    names = list(strength)
    rows = []
    for i in range(700):
        left, right = rng.choice(names, 2, replace=False)
        gap = strength[left] - strength[right]
        judged = with_judge and i % 2 == 1
        eta = 2.0 * gap + 1.5 if judged else gap
        verdict = "model_a" if rng.random() < 1 / (1 + np.exp(-eta)) else "model_b"
        if rng.random() < 0.1:
            verdict = "tie"
        who = "llm-j" if judged else f"ann{i % 5}"
        rows.append(
            {"question_id": f"p{i // 2}", "model_a": left, "model_b": right, "winner": verdict, "judge": who}
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_evaluate_composite_row_beats_pooled_fits(tmp_path: Path) -> None:
    source = _battles_file(tmp_path / "battles.jsonl", with_judge=True)
    args = ["evaluate", "--from", str(source), "--method", "composite", "--json", "--rounds", "200"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = {r["method"]: r for r in json.loads(result.output[result.output.index("[") :])}
    composite = rows["composite"]
    assert composite["n_test"] == rows["bt-position"]["n_test"] > 100
    # the judge's own left-side advantage is learned (1.5 logits over a steepness of 2: about 130 Elo)
    judge_pos = composite["parameters_fitted"]["position_llm-j"]
    assert 60 < judge_pos["value"] < 220 and judge_pos["ci_low"] < judge_pos["value"] < judge_pos["ci_high"]
    human_pos = composite["parameters_fitted"]["position_human"]
    assert human_pos["ci_low"] < 0 < human_pos["ci_high"] or abs(human_pos["value"]) < 60
    # forecasting each source as itself beats every pooled batch fit on the held-out votes
    for pooled in ("bt", "bt-position", "davidson-position"):
        assert composite["log_loss"] < rows[pooled]["log_loss"], (pooled, composite["log_loss"])


def test_evaluate_composite_refuses_votes_without_sources(tmp_path: Path) -> None:
    source = _battles_file(tmp_path / "battles.jsonl", with_judge=False)
    result = runner.invoke(app, ["evaluate", "--from", str(source), "--method", "composite"])
    assert result.exit_code == 2 and "needs each vote's source" in result.output, result.output
    assert "battles.jsonl" in result.output
    for extra, message in ((["--method", "elo"], "unknown method"), (["--language", "en"], "no filters")):
        args = [
            "evaluate",
            "--from",
            str(source),
            *(["--method", "composite"] if "--method" not in extra else []),
            *extra,
        ]
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and message in result.output, result.output
