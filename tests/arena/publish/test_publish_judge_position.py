"""A published board whose votes include LLM judges lists each judge's position term with its interval,
in the metadata and on the board pages, on both backends; the pooled figure's interval admits the
judges' spread, and the board records how (and why) its votes were clustered."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from arena.app import create_app
from arena.cli.main import build_app
from leaderboard.snapshot.folder import read_snapshot
from tests.factories import make_settings
from tests.real_data import VICUNA_CATALOG, VICUNA_JUDGES
from votes.db import make_engine
from votes.migrate import upgrade_database

#: Each judge's own davidson-position fit on its votes (as tests/votes/test_real_judges.py reads the file).
POSITION = {"llm-bard": 351.00, "llm-claude": -134.89, "llm-gpt35": -7.45, "llm-gpt4": 166.98}


def _run(*args: str) -> str:
    result = CliRunner().invoke(build_app(), list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def judged_store(db_url: str) -> str:
    upgrade_database(db_url)
    _run("import", str(VICUNA_CATALOG), "--database-url", db_url)
    _run("import", str(VICUNA_JUDGES), "--database-url", db_url)
    return db_url


def test_published_board_lists_each_judges_position_term(judged_store: str, tmp_path: Path) -> None:
    snapshots = tmp_path / "snapshots"
    fit = ["--method", "davidson-position", "--bootstrap", "20"]
    _run("publish", *fit, "--no-slices", "--snapshot-dir", str(snapshots), "--database-url", judged_store)
    (folder,) = [p for p in snapshots.iterdir() if not p.name.startswith(".")]
    data = read_snapshot(folder)
    meta = data.metadata
    assert meta["n_votes"] == 6560  # imported judges count on the board
    section = meta["judge_position"]
    found = {j["judge"]: j for j in section["judges"]}
    assert found.keys() == POSITION.keys()
    for judge, estimate in POSITION.items():
        assert found[judge]["estimate"] == pytest.approx(estimate, abs=0.05), judge
        assert found[judge]["ci_low"] < found[judge]["shrunk"] < found[judge]["ci_high"]
    board = meta["parameters_fitted"]["position_advantage_elo"]
    pooled = section["pooled"]
    # the board's own term counts votes as independent; the pooled one admits four judges' spread
    assert pooled["ci_high"] - pooled["ci_low"] > 10 * (board["ci_high"] - board["ci_low"])
    # the default clustering is auto: four annotators are too few to resample, and the metadata says so
    assert meta["clustering"]["asked"] == "auto" and meta["clustering"]["used"] == "none"
    assert meta["clustering"]["annotators"] == 4 and meta["clustering"]["prompts"] == 80
    assert "cluster" not in meta["options"]

    engine = make_engine(judged_store)
    try:
        site = create_app(make_settings(judged_store, snapshot_dir=str(snapshots)), engine=engine, seed=1)
        with TestClient(site, base_url="http://testserver") as client:
            for url in (f"/leaderboard/snapshots/{meta['id']}", "/leaderboard"):
                page = client.get(url)
                assert page.status_code == 200, url
                html = page.text
                assert 'id="judge-position-table"' in html, url
                assert "llm-bard" in html and "+349.4" in html and "[+318.1, +380.7]" in html, url
                assert 'id="judge-position-pooled"' in html and f"{pooled['value']:+.1f}" in html, url
                assert "counts the votes as independent (4 annotators, fewer than 20" in html, url
    finally:
        engine.dispose()
