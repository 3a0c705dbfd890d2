"""A snapshot folder is a dataset: ``datasets.load_dataset(folder)`` gives the leaderboard, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from arena.cli.main import build_app
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
