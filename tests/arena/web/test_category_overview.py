"""The category overview: every model's rank on every published board, as a page and a CSV file."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from arena.app import create_app
from arena.publish.recompute import SliceSpec
from arena.publish.snapshots import publish_slices
from leaderboard.bt.request import FitRequest
from leaderboard.snapshot.folder import read_snapshot
from leaderboard.snapshot.overview import OVERVIEW_COLUMNS, category_overview
from tests.factories import make_settings
from votes.db import make_engine
from votes.imports.demo import load_demo
from votes.migrate import upgrade_database


@pytest.fixture
def published(tmp_path: Path) -> Iterator[tuple[TestClient, list[Any]]]:
    url = f"sqlite:///{tmp_path}/arena.db"
    upgrade_database(url)
    engine = make_engine(url)
    load_demo(engine, n_votes=500, seed=2)
    rows = publish_slices(
        engine,
        snapshot_dir=tmp_path / "snapshots",
        request=FitRequest(n_rounds=10, random_state=1),
        slices=[SliceSpec(), SliceSpec(language="en")],
        plots=False,
    )
    app = create_app(make_settings(url, snapshot_dir=str(tmp_path / "snapshots")), engine=engine, seed=1)
    with TestClient(app, base_url="http://testserver") as client:
        yield client, rows
    engine.dispose()


def test_overview_page_and_file_list_every_board(published: tuple[TestClient, list[Any]]) -> None:
    client, rows = published
    page: Any = client.get("/leaderboard/categories")
    assert page.status_code == 200 and page.template.name == "pages/categories.html"
    assert page.context["boards"] == ["all", "language=en"]
    overall = read_snapshot(rows[0].path).table
    assert list(page.context["cells"]) == list(overall["model"])  # in the overall board's order
    first = overall.iloc[0]
    assert page.context["cells"][first["model"]]["all"]["rank"] == first["rank"]
    csv = client.get("/leaderboard/categories.csv")
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    table = pd.read_csv(io.StringIO(csv.text), keep_default_na=False)
    assert tuple(table.columns) == OVERVIEW_COLUMNS
    assert set(table["board"]) == {"all", "language=en"}
    assert set(table["snapshot"]) == {r.id for r in rows}
    assert table["rank"].dtype.kind == "i"
    english = read_snapshot(rows[1].path).table.set_index("model")
    for rec in table[table["board"] == "language=en"].to_dict(orient="records"):
        assert rec["rank_low"] == english.loc[rec["model"], "rank_low"]


def test_an_empty_site_has_an_empty_overview(tmp_path: Path) -> None:
    assert list(category_overview({}).columns) == list(OVERVIEW_COLUMNS)
    url = f"sqlite:///{tmp_path}/empty.db"
    upgrade_database(url)
    app = create_app(make_settings(url, snapshot_dir=str(tmp_path / "s")))
    with TestClient(app, base_url="http://testserver") as client:
        assert "Nothing published yet" in client.get("/leaderboard/categories").text
