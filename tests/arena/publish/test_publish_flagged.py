"""Flagged annotators in a published board, on both backends: left out by default or down-weighted by the
``flagged_votes`` setting (in publish and in recompute from the database), listed in the snapshot's
metadata under pseudonymous ids with one reason each, and counted on the board pages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from typer.testing import CliRunner

from arena.app import create_app
from arena.cli.main import build_app
from tests.arena.cli.commands.test_cli_battle_files import _ratings
from tests.arena.publish.test_publish_robust import FIT, _close, _expected, _publish, _rows, _store
from tests.factories import make_settings
from votes.db import make_engine
from votes.tables import annotator_t


def _flag_reason(db_url: str, label: str, reason: str) -> int:
    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(update(annotator_t).where(annotator_t.c.label == label).values(flag_reason=reason))
            return int(
                conn.execute(select(annotator_t.c.id).where(annotator_t.c.label == label)).scalar_one()
            )
    finally:
        engine.dispose()


def _pages(db_url: str, folder: Path) -> list[str]:
    """The snapshot page and the board page of the one published snapshot."""
    engine = make_engine(db_url)
    try:
        app = create_app(make_settings(db_url, snapshot_dir=str(folder)), engine=engine, seed=1)
        with TestClient(app, base_url="http://testserver") as client:
            (snapshot_id,) = [p.name for p in folder.iterdir() if p.is_dir()]
            pages = [client.get(f"/leaderboard/snapshots/{snapshot_id}"), client.get("/leaderboard")]
    finally:
        engine.dispose()
    assert all(p.status_code == 200 for p in pages)
    return [p.text for p in pages]


def test_publish_lists_the_excluded_annotators_with_one_reason_and_the_pages_count_them(
    db_url: str, tmp_path: Path
) -> None:
    rows = _rows()
    _store(db_url, tmp_path, rows, {}, flag="bot")
    bot = _flag_reason(db_url, "bot", "saw bot@example.com voting from 10.0.0.7")  # a maintainer's words
    ratings, meta = _publish(db_url, tmp_path / "snap")
    _close(ratings, _expected(rows, {}, drop="bot"))
    listed = meta["flagged_annotators"]
    assert listed == {
        "mode": "exclude",
        "n_annotators": 1,
        "annotators": [{"id": f"annotator:{bot}", "reason": "flagged by a maintainer", "n_votes": 150}],
        "gold": None,
    }
    text = json.dumps(meta)
    assert "example.com" not in text and "10.0.0.7" not in text
    for page in _pages(db_url, tmp_path / "snap"):
        summary = page.split('id="flagged-annotators"', 1)[1].split("</p>", 1)[0]
        assert "Excluded" in summary and "<strong>1</strong> flagged annotator" in summary
        assert f"annotator:{bot}" in page and "example.com" not in page


def test_the_down_weight_setting_weighs_flagged_votes_in_publish_and_recompute(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _rows()
    honest = 0.6  # the review's weight: above the setting's factor, so the factor rules
    _store(db_url, tmp_path, rows, {"bot": honest}, flag="bot")
    _flag_reason(db_url, "bot", "auto: gold accuracy 1 of 10 (10%, 95% 2%-40%), below an honest annotator's")
    monkeypatch.setenv("ARENA_FLAGGED_VOTES", "down-weight")
    monkeypatch.setenv("ARENA_FLAGGED_WEIGHT", "0.1")
    weight = min(honest, 0.1)  # the smaller of the review's honest weight and the setting's factor
    expected = _expected(rows, {"bot": weight})
    ratings, meta = _publish(db_url, tmp_path / "snap")
    _close(ratings, expected)
    assert meta["filters"]["flagged_weight"] == 0.1
    (entry,) = meta["flagged_annotators"]["annotators"]
    assert meta["flagged_annotators"]["mode"] == "down-weight"
    assert entry["weight"] == pytest.approx(weight) and entry["reason"].startswith("review: gold accuracy")
    out = tmp_path / "out"
    result = CliRunner().invoke(build_app(), ["recompute", "--database-url", db_url, *FIT, "--out", str(out)])
    assert result.exit_code == 0, result.output
    _close(_ratings(out), expected)
    recomputed = json.loads((out / "metadata.json").read_text(encoding="utf-8"))
    assert recomputed["flagged_annotators"] == meta["flagged_annotators"]
    # down-weighted, not left out and not counted in full
    assert _expected(rows, {}, drop="bot")["m1"] < ratings["m1"] < _expected(rows, {})["m1"]
