"""`arena evaluate`: the comparison table from a battles file, as a rich table and as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from arena.commands.evaluate import register
from leaderboard.data import OUTCOME_STRINGS, Outcome
from leaderboard.evaluate import simulate_battles

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


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
        4000, np.array([1100.0, 1000.0, 950.0, 900.0]), position_elo=60.0, nu=0.5, random_state=4
    )
    names = np.asarray(sim.models, dtype=object)
    frame = pd.DataFrame(
        {
            "model_a": names[sim.left],
            "model_b": names[sim.right],
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


def test_bad_split_is_refused(battles_file: Path) -> None:
    result = CliRunner().invoke(_app(), ["evaluate", "--from", str(battles_file), "--split", "sideways"])
    assert result.exit_code != 0


@pytest.mark.skipif(not (DATA / "vicuna80-llm-judge-battles.jsonl.gz").exists(), reason="shared data absent")
def test_real_battles_file_prints_the_table_and_a_significant_left_advantage() -> None:
    result = CliRunner().invoke(
        _app(),
        [
            "evaluate",
            "--from",
            str(DATA / "vicuna80-llm-judge-battles.jsonl.gz"),
            "--style",
            "--catalog",
            str(DATA / "vicuna80-catalog.jsonl.gz"),
        ],
    )
    assert result.exit_code == 0, result.output
    for method in ("elo", "bt", "davidson-position", "davidson-position+style"):
        assert method in result.output
    assert "significant at 95%" in result.output and "not significant" not in result.output
