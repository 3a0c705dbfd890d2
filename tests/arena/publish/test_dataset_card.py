"""A snapshot folder is a dataset: ``datasets.load_dataset(folder)`` gives the leaderboard, offline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from arena.cli.main import build_app
from arena.publish.recompute import voters_record
from leaderboard.battles import Battles
from leaderboard.snapshot.dataset_card import CARD_FILE, MODELS_FILE
from tests.real_data import VICUNA_JUDGES


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "snapshot"
    args = ["recompute", "--from", str(VICUNA_JUDGES), "--bootstrap", "10"]
    result = CliRunner().invoke(build_app(), [*args, "--no-plots", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_load_dataset_gives_the_leaderboard_split(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import datasets  # imported here: it reads the offline switches above when it is first imported

    loaded = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "cache"))
    assert list(loaded) == ["leaderboard"]
    board = loaded["leaderboard"].to_pandas()
    expected = pd.read_csv(folder / "leaderboard.csv", keep_default_na=False)
    assert list(board["model"]) == list(expected["model"])
    assert board["rating"].tolist() == pytest.approx(expected["rating"].tolist())
    models = datasets.load_dataset(str(folder), "models", cache_dir=str(tmp_path / "cache"))["models"]
    assert models.column_names[:3] == ["model", "organisation", "licence"]
    assert sorted(models["model"]) == sorted(expected["model"])


def test_card_and_models_are_in_the_manifest(folder: Path) -> None:
    meta = json.loads((folder / "metadata.json").read_text())
    assert {CARD_FILE, MODELS_FILE} <= set(meta["files"])
    card = (folder / CARD_FILE).read_text()
    assert card.startswith("---\nconfigs:\n- config_name: leaderboard\n")
    assert meta["votes_sha256"] in card
    assert "leaderboard_style" not in card  # only the tables the folder has


def test_card_tells_llm_judge_verdicts_from_human_votes_and_says_what_the_intervals_are(folder: Path) -> None:
    meta = json.loads((folder / "metadata.json").read_text())
    judges = ["llm-bard", "llm-claude", "llm-gpt35", "llm-gpt4"]
    assert meta["voters"] == {"llm_judge_verdicts": 6560, "human_votes": 0, "llm_judges": judges}
    card = (folder / CARD_FILE).read_text()
    assert (
        "All 6560 are verdicts of LLM judges (llm-bard, llm-claude, llm-gpt35, llm-gpt4), not human" in card
    )
    assert "blind" not in card
    assert "95% percentile bootstrap over votes" in card and "marginal" in card
    assert "`rank_low`, `rank_high`: the 2.5% and 97.5% quantiles of the model's rank" in card


def test_voters_are_counted_from_annotator_labels() -> None:
    votes = Battles(
        models=("a", "b"),
        model_a=np.array([0, 0, 1]),
        model_b=np.array([1, 1, 0]),
        outcome=np.array([0, 1, 2], dtype=np.int8),
        annotator=np.array([0, 1, 1]),
        annotator_names=("alice", "judge:gpt-4o"),
    )
    mixed = voters_record(3.0, votes, None, "file")
    assert mixed == {"llm_judge_verdicts": 2, "human_votes": 1, "llm_judges": ["judge:gpt-4o"]}
    assert voters_record(5.0, None, None, "database")["human_votes"] == 5
    assert voters_record(5.0, None, None, "file")["human_votes"] is None
