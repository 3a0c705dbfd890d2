"""The style-controlled board in a published snapshot: both boards from the same votes and seed, the
covariates' coefficients and intervals in the metadata, the default board's files unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from arena.cli.main import build_app
from arena.publish.snapshots import publish_snapshot
from leaderboard.bt.request import FitRequest
from leaderboard.snapshot.files import DATA_FILES, METADATA_FILE
from leaderboard.snapshot.folder import read_snapshot
from leaderboard.style.board import STYLE_CSV_FILE, STYLE_JSON_FILE
from tests.real_data import VICUNA_CATALOG, VICUNA_JUDGES
from votes.db import make_engine
from votes.imports.demo import load_demo
from votes.migrate import upgrade_database

N_VOTES = 500
ROUNDS = 20
SEED = 3


@pytest.fixture
def demo_engine(tmp_path: Path) -> Iterator[Engine]:
    url = f"sqlite:///{tmp_path}/arena.db"
    upgrade_database(url)
    engine = make_engine(url)
    load_demo(engine, n_votes=N_VOTES, seed=2)
    try:
        yield engine
    finally:
        engine.dispose()


def test_published_snapshot_carries_both_boards(demo_engine: Engine, tmp_path: Path) -> None:
    plain = publish_snapshot(
        demo_engine,
        snapshot_dir=tmp_path / "plain",
        request=FitRequest(n_rounds=ROUNDS, random_state=SEED),
        plots=False,
    )
    styled = publish_snapshot(
        demo_engine,
        snapshot_dir=tmp_path / "styled",
        request=FitRequest(n_rounds=ROUNDS, random_state=SEED, style=("length", "markdown")),
        plots=False,
    )
    for name in DATA_FILES:  # style control is an addition: the default board is byte for byte the same
        assert (Path(plain.path) / name).read_bytes() == (Path(styled.path) / name).read_bytes(), name
    plain_meta = json.loads((Path(plain.path) / METADATA_FILE).read_text())
    assert "style_control" not in plain_meta and "style" not in plain_meta["options"]
    assert STYLE_CSV_FILE not in plain_meta["files"]
    meta = read_snapshot(styled.path).metadata  # verifies every file against the manifest
    control = meta["style_control"]
    assert control["features"] and set(control["features"]) <= {"length", "headers", "lists", "bold"}
    if "length" in control["features"]:  # demo answers have no generation provenance: estimated tokens
        length = control["measured"]["length"]
        assert length["unit"] == "tokens" and length["answers_with_estimated_tokens"] == 2 * N_VOTES
    for value in control["coefficients_elo"].values():
        assert value["ci_low"] <= value["value"] <= value["ci_high"]
    assert control["n_votes"] == N_VOTES and control["n_votes_without_texts"] == 0
    assert {STYLE_CSV_FILE, STYLE_JSON_FILE} <= set(meta["files"])
    table = pd.read_csv(Path(styled.path) / STYLE_CSV_FILE, keep_default_na=False)
    default = pd.read_csv(Path(styled.path) / "leaderboard.csv", keep_default_na=False)
    ranks = dict(zip(default["model"], default["rank"], strict=True))
    assert sorted(table["model"]) == sorted(default["model"])
    assert all(
        ranks[m] - r == c for m, r, c in zip(table["model"], table["rank"], table["rank_change"], strict=True)
    )
    document = json.loads((Path(styled.path) / STYLE_JSON_FILE).read_text())
    assert document["style_control"] == control


def test_recompute_with_style_from_a_file_with_a_catalog(tmp_path: Path) -> None:
    out = tmp_path / "board"
    result = CliRunner().invoke(
        build_app(),
        [
            "recompute",
            "--from",
            str(VICUNA_JUDGES),
            "--catalog",
            str(VICUNA_CATALOG),
            "--style",
            "length,markdown",
            "--bootstrap",
            str(ROUNDS),
            "--no-plots",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "style control on" in result.output and "length:" in result.output
    meta = json.loads((out / METADATA_FILE).read_text())
    assert meta["options"]["style"] == ["length", "markdown"]
    assert "length" in meta["style_control"]["coefficients_elo"]


def test_an_unknown_style_feature_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        build_app(),
        [
            "recompute",
            "--from",
            str(VICUNA_JUDGES),
            "--style",
            "colour",
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert result.exit_code == 2
    assert "unknown style feature" in result.output


def test_the_board_page_switches_to_the_style_controlled_board(demo_engine: Engine, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from arena.app import create_app
    from tests.factories import make_settings

    folder = tmp_path / "snapshots"
    row = publish_snapshot(
        demo_engine,
        snapshot_dir=folder,
        request=FitRequest(n_rounds=ROUNDS, random_state=SEED, style=("length",)),
        plots=False,
    )
    url = str(demo_engine.url)
    app = create_app(make_settings(url, snapshot_dir=str(folder)), engine=demo_engine, seed=1)
    table = pd.read_csv(Path(row.path) / STYLE_CSV_FILE, keep_default_na=False)
    with TestClient(app, base_url="http://testserver") as client:
        default = client.get("/leaderboard")
        styled = client.get("/leaderboard", params={"board": "style"})
        page = client.get(f"/leaderboard/snapshots/{row.id}", params={"board": "style"})
        bad = client.get("/leaderboard", params={"board": "colour"})
    assert default.status_code == styled.status_code == page.status_code == 200
    assert 'href="/leaderboard?slice=all&amp;board=style"' in default.text
    assert "Rank change" not in default.text and "Rank change" in styled.text
    assert styled.context["board"] == "style"  # type: ignore[attr-defined]
    assert styled.context["rank_changes"] == list(table["rank_change"])  # type: ignore[attr-defined]
    assert [r.model for r in styled.context["rows"]] == list(table["model"])  # type: ignore[attr-defined]
    assert 'aria-current="page">Style-controlled' in page.text
    assert STYLE_CSV_FILE in page.text  # listed among the downloads
    assert bad.status_code == 422
