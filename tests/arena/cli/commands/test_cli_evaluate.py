"""`arena evaluate`: the comparison table from a battles file, as a rich table and as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from arena.cli.commands.evaluate import register
from leaderboard.data import OUTCOME_STRINGS, Outcome
from leaderboard.evaluation.simulate import simulate_battles
from tests.real_data import VICUNA_CATALOG, VICUNA_JUDGES


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.callback()
    def main() -> None:
        """Test host for the command module."""

    return app


@pytest.fixture
def battles_file(tmp_path: Path) -> Path:
    sim = simulate_battles(
        np.array([1100.0, 1000.0, 950.0, 900.0]), 4000, position=60.0, nu=0.5, random_state=4
    )
    names = np.asarray(sim.models, dtype=object)
    frame = pd.DataFrame(
        {
            "model_a": names[sim.model_a],
            "model_b": names[sim.model_b],
            "winner": [OUTCOME_STRINGS[Outcome(int(o))] for o in sim.outcome],
            "tstamp": 1.7e9 + 86400 * 30 * sim.times(),
        }
    )
    path = tmp_path / "battles.jsonl"
    frame.to_json(path, orient="records", lines=True)
    return path


def test_json_table_has_every_method_with_fitted_extras(battles_file: Path) -> None:
    result = CliRunner().invoke(
        _app(), ["evaluate", "--from", str(battles_file), "--json", "--split", "time"]
    )
    assert result.exit_code == 0, result.output
    rows = {r["method"]: r for r in json.loads(result.output)}
    assert set(rows) >= {
        "elo",
        "bt",
        "bt-position",
        "davidson",
        "davidson-position",
        "davidson-position+time",
    }
    pos = rows["davidson-position"]["parameters_fitted"]["position_advantage_elo"]
    assert pos["ci_low"] < 60.0 < pos["ci_high"]
    assert rows["davidson-position"]["n_test"] == 800
    assert all(np.isfinite(r["aic"]) and r["log_loss"] > 0 for r in rows.values())


def test_every_system_is_listed_with_its_scores_and_the_verdict(battles_file: Path, tmp_path: Path) -> None:
    from leaderboard.bt.request import METHODS
    from leaderboard.evaluation.systems import online_raters

    out = tmp_path / "evaluation"
    result = CliRunner().invoke(
        _app(), ["evaluate", "--from", str(battles_file), "--json", "--out", str(out), "--rounds", "200"]
    )
    assert result.exit_code == 0, result.output
    rows = {r["method"]: r for r in json.loads(result.output)}
    online = set(online_raters(tie_rate=0.2))
    # the votes have times, so the split is by time and the online raters also forecast rolling
    assert set(METHODS) | online | {f"{name} (rolling)" for name in online} <= set(rows)
    assert {r["kind"] for r in rows.values()} == {"batch", "online", "rolling"}
    for r in rows.values():
        assert 0 < r["log_loss"] and 0 <= r["brier"] <= 2 and 0.5 < r["auc"] <= 1
        assert r["calibration"] and sum(b["n"] for b in r["calibration"]) == r["n_test"] == 800
    winners = [r for r in rows.values() if "verdict" in r]
    assert len(winners) == 1 and winners[0]["rank_log_loss"] == 1
    verdict = winners[0]["verdict"]
    runner_up = rows[verdict["runner_up"]]
    assert runner_up["rank_log_loss"] == 2
    assert verdict["log_loss_difference"] == pytest.approx(runner_up["log_loss"] - winners[0]["log_loss"])
    assert verdict["ci_low"] <= verdict["log_loss_difference"] <= verdict["ci_high"]
    assert json.loads((out / "evaluate.json").read_text()) == json.loads(result.output)
    assert (out / "calibration.svg").stat().st_size > 0 and (out / "calibration.png").stat().st_size > 0


def test_bad_split_is_refused(battles_file: Path) -> None:
    result = CliRunner().invoke(_app(), ["evaluate", "--from", str(battles_file), "--split", "sideways"])
    assert result.exit_code != 0


def test_real_battles_file_prints_the_table_and_a_significant_left_advantage() -> None:
    result = CliRunner().invoke(
        _app(),
        [
            "evaluate",
            "--from",
            str(VICUNA_JUDGES),
            "--style",
            "--catalog",
            str(VICUNA_CATALOG),
        ],
    )
    assert result.exit_code == 0, result.output
    for method in ("elo", "bt", "davidson-position", "davidson-position+style"):
        assert method in result.output
    assert "significant at 95%" in result.output and "not significant" not in result.output


def test_style_rows_from_the_database_fit_style_coefficients(tmp_path: Path) -> None:
    from votes.db import make_engine
    from votes.imports.demo import load_demo
    from votes.imports.files import import_file
    from votes.migrate import upgrade_database

    url = f"sqlite:///{tmp_path}/arena.db"
    upgrade_database(url)
    engine = make_engine(url)
    try:
        load_demo(engine, n_votes=800, seed=1)
        bare = tmp_path / "bare.jsonl"
        bare.write_text(json.dumps({"model_a": "aurora-70b", "model_b": "fable-1b", "winner": "tie"}) + "\n")
        import_file(engine, bare)
    finally:
        engine.dispose()
    result = CliRunner().invoke(_app(), ["evaluate", "--style", "--database-url", url, "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["method"]: r for r in json.loads(result.output)}
    assert {"bt", "davidson-position", "bt-position+style", "davidson-position+style"} <= set(rows)
    style = rows["davidson-position+style"]
    coefficients = {k: v for k, v in style["parameters_fitted"].items() if k.startswith("style_")}
    assert "style_length_elo" in coefficients
    assert all(v["ci_low"] <= v["value"] <= v["ci_high"] for v in coefficients.values())
    # the one vote without answer texts is left out of the style rows only
    assert style["votes_without_texts"] == 1
    assert style["n_train"] + style["n_test"] == 800
    assert rows["bt"]["n_train"] + rows["bt"]["n_test"] == 801
    assert "votes_without_texts" not in rows["bt"]


def test_real_judges_get_a_raters_row_position_terms_and_prompt_clusters() -> None:
    path = str(VICUNA_JUDGES)
    result = CliRunner().invoke(_app(), ["evaluate", "--from", path, "--json", "--cluster", "prompt"])
    assert result.exit_code == 0, result.output
    rows = {r["method"]: r for r in json.loads(result.output)}
    raters = rows["davidson-position+raters"]
    assert {"discrimination:llm-gpt4", "discrimination:llm-claude", "position:llm-bard"} <= set(
        raters["parameters_fitted"]
    )
    assert raters["parameters_fitted"]["position:llm-bard"]["value"] > 250  # its own side term, not the pool
    by_judge = rows["davidson-position"]["position_by_annotator"]
    assert [j["judge"] for j in by_judge["judges"]] == ["llm-bard", "llm-claude", "llm-gpt35", "llm-gpt4"]
    for j in by_judge["judges"]:
        assert j["ci_low"] < j["shrunk"] < j["ci_high"]
    verdict = next(r["verdict"] for r in rows.values() if "verdict" in r)
    assert verdict["n_test"] == 1312 and verdict["ci_low"] < verdict["log_loss_difference"]
    text = CliRunner().invoke(_app(), ["evaluate", "--from", path])
    assert "Left-side advantage per annotator" in text.output and "llm-bard: +351.0" in text.output


def test_a_file_without_ties_leaves_out_the_tie_models_and_says_why(tmp_path: Path) -> None:
    sim = simulate_battles(np.array([1100.0, 1000.0, 950.0, 900.0]), 1500, position=60.0, random_state=5)
    names = np.asarray(sim.models, dtype=object)
    decisive = sim.outcome < 2
    path = tmp_path / "no-ties.jsonl"
    pd.DataFrame(
        {
            "model_a": names[sim.model_a[decisive]],
            "model_b": names[sim.model_b[decisive]],
            "winner": [OUTCOME_STRINGS[Outcome(int(o))] for o in sim.outcome[decisive]],
        }
    ).to_json(path, orient="records", lines=True)
    result = CliRunner().invoke(_app(), ["evaluate", "--from", str(path), "--rounds", "100"])
    assert result.exit_code == 0, result.output
    reason = "the training votes have no ties, so a tie parameter cannot be estimated"
    lines = [line for line in result.output.splitlines() if reason in line]
    assert len(lines) == 1  # one line, naming every row left out
    for left_out in ("davidson-position", "glenn-david", "elo-k4/davidson", "trueskill/davidson"):
        assert left_out in lines[0]
    assert "│ bt-position" in result.output and "│ davidson" not in result.output
    assert "selected on these test votes" in result.output
    as_json = CliRunner().invoke(_app(), ["evaluate", "--from", str(path), "--json", "--rounds", "100"])
    assert as_json.exit_code == 0, as_json.output
    rows = {r["method"] for r in json.loads(as_json.stdout)}
    assert "bt-position" in rows and not any(r.startswith(("davidson", "glenn-david")) for r in rows)
    winner = next(r for r in json.loads(as_json.stdout) if "verdict" in r)
    assert winner["verdict"]["selected_on"].startswith("the test votes")
