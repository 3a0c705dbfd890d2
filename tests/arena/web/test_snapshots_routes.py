"""Snapshot pages and JSON API: the latest board beside the live Elo, list, detail, downloads with sha256,
board filters, and no way to change or delete a published snapshot over HTTP."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from arena.app import create_app
from arena.publish.recompute import SliceSpec
from arena.publish.snapshots import publish_slices
from leaderboard.bt.request import FitRequest
from tests.conftest import scratch_pg_database
from tests.factories import make_settings
from votes.db import make_engine
from votes.imports.demo import load_demo
from votes.migrate import upgrade_database
from votes.models import Snapshot

N_VOTES = 500


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def module_db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One database per backend for the whole module: publishing with plots is the slow part, and these
    tests only read."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('routes')}/arena.db"
        return
    with scratch_pg_database() as url:
        yield url


@pytest.fixture(scope="module")
def published(
    module_db_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, list[Snapshot]]]:
    db_url = module_db_url
    tmp_path = tmp_path_factory.mktemp("published")
    upgrade_database(db_url)
    engine: Engine = make_engine(db_url)
    load_demo(engine, n_votes=N_VOTES, seed=2)
    rows = publish_slices(
        engine,
        snapshot_dir=tmp_path / "snapshots",
        request=FitRequest(n_rounds=20, random_state=3),
        slices=[SliceSpec(), SliceSpec(language="en")],
    )
    app = create_app(make_settings(db_url, snapshot_dir=str(tmp_path / "snapshots")), engine=engine, seed=1)
    with TestClient(app, base_url="http://testserver") as client:
        yield client, rows
    engine.dispose()


def test_leaderboard_page(published: tuple[TestClient, list[Snapshot]]) -> None:
    client, rows = published
    response = client.get("/leaderboard")
    assert response.status_code == 200
    assert response.template.name == "pages/leaderboard.html"  # type: ignore[attr-defined]
    context = response.context  # type: ignore[attr-defined]
    assert context["snapshot"].id == rows[0].id
    assert len(context["rows"]) == 7 and len(context["whiskers"]) == 7
    assert context["standings"], "live Elo is shown beside the published board"
    assert context["slices"] == ["all", "language=en"]
    assert '<svg class="whisker"' in response.text and "Live Elo" in response.text
    english = client.get("/leaderboard", params={"language": "en"})
    assert english.context["snapshot"].id == rows[1].id  # type: ignore[attr-defined]
    assert client.get("/leaderboard", params={"slice": "language=en"}).context["snapshot"].id == rows[1].id  # type: ignore[attr-defined]
    empty = client.get("/leaderboard", params={"category": "nothing-here"})
    assert empty.status_code == 200 and "Nothing published" in empty.text


def test_snapshot_list_and_page(published: tuple[TestClient, list[Snapshot]]) -> None:
    client, rows = published
    listing = client.get("/leaderboard/snapshots")
    assert listing.status_code == 200
    assert all(r.id in listing.text for r in rows)
    only_en = client.get("/leaderboard/snapshots", params={"slice": "language=en"})
    assert rows[1].id in only_en.text and rows[0].id not in only_en.text
    page = client.get(f"/leaderboard/snapshots/{rows[0].id}")
    assert page.status_code == 200
    assert page.template.name == "pages/snapshot.html"  # type: ignore[attr-defined]
    for stem in ("ratings", "winrate_observed", "winrate_predicted", "battle_counts"):
        assert f"files/{stem}.png" in page.text
    assert rows[0].files["leaderboard.csv"] in page.text
    assert "honest weight" not in page.text  # only a --robust board says it weighs voters
    assert client.get("/leaderboard/snapshots/nope").status_code == 404


def test_downloads_match_their_sha256(published: tuple[TestClient, list[Snapshot]]) -> None:
    client, rows = published
    row = rows[0]
    for name, digest in row.files.items():
        response = client.get(f"/leaderboard/snapshots/{row.id}/files/{name}")
        assert response.status_code == 200, name
        assert hashlib.sha256(response.content).hexdigest() == digest == response.headers["x-content-sha256"]
    assert client.get(f"/leaderboard/snapshots/{row.id}/files/..%2Fmetadata.json").status_code == 404
    assert client.get(f"/leaderboard/snapshots/{row.id}/files/secret.txt").status_code == 404


def test_json_api(published: tuple[TestClient, list[Snapshot]]) -> None:
    client, rows = published
    listed = client.get("/api/leaderboard/snapshots").json()
    assert [s["id"] for s in listed] == [rows[1].id, rows[0].id]
    assert [s["id"] for s in client.get("/api/leaderboard/snapshots", params={"language": "en"}).json()] == [
        rows[1].id
    ]
    assert client.get("/api/leaderboard/snapshots", params={"method": "davidson"}).json() == []
    latest = client.get("/api/leaderboard/published").json()
    assert latest["id"] == rows[0].id and len(latest["models"]) == 7
    first = latest["models"][0]
    assert first["ci_low"] <= first["rating"] <= first["ci_high"] and first["rank"] == 1
    assert latest["metadata"]["votes_sha256"] == rows[0].votes_sha256
    detail = client.get(f"/api/leaderboard/snapshots/{rows[1].id}").json()
    assert detail["slice"] == "language=en"
    assert client.get("/api/leaderboard/slices").json() == ["all", "language=en"]
    assert client.get("/api/leaderboard/published", params={"category": "none"}).status_code == 404


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE", "POST"])
def test_no_way_to_change_a_snapshot_over_http(
    published: tuple[TestClient, list[Snapshot]], method: str
) -> None:
    client, rows = published
    row = rows[0]
    paths = [
        f"/api/leaderboard/snapshots/{row.id}",
        f"/leaderboard/snapshots/{row.id}",
        f"/leaderboard/snapshots/{row.id}/files/leaderboard.csv",
        "/api/leaderboard/snapshots",
        "/api/leaderboard/published",
    ]
    for path in paths:
        response = client.request(method, path, json={"method": "forged"})
        assert response.status_code in (404, 405), (method, path, response.status_code)
    after = client.get(f"/api/leaderboard/snapshots/{row.id}").json()
    assert after["method"] == "bt" and after["files"] == row.files


def test_pages_say_what_the_intervals_and_rank_ranges_are(
    published: tuple[TestClient, list[Snapshot]],
) -> None:
    client, rows = published
    page = client.get(f"/leaderboard/snapshots/{rows[0].id}")
    intervals = page.context["intervals"]  # type: ignore[attr-defined]
    assert intervals["percent"] == 95 and intervals["method"] == "percentile bootstrap"
    assert intervals["unit"] == "annotator clusters (25 annotators)"  # the demo: enough annotators for auto
    assert intervals["coverage"].startswith("marginal")
    text = " ".join(page.text.split())
    assert 'id="intervals">95%, percentile bootstrap over annotator clusters (25 annotators)' in text
    assert "Fit: Bradley-Terry (logistic), ties count as half a win to each side." in text
    assert "quantiles of the model&#39;s rank over the bootstrap rounds" in text  # the rank range's tooltip
    board = " ".join(client.get("/leaderboard").text.split())
    assert "(percentile bootstrap over annotator clusters" in board
    assert "marginal: each model's interval alone" in board
