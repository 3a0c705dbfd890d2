"""The published boards read at a glance: named for people, times to the minute, what a board leaves out said
on it, and the site's icon on every page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from arena.app import create_app
from arena.publish.snapshots import publish_slices
from arena.web.display import human_time, time_tag
from leaderboard.bt.request import FitRequest
from leaderboard.snapshot.titles import language_name, slice_title
from tests.factories import make_settings
from votes.db import make_engine
from votes.files.battle_rows import BattleRecord
from votes.imports.demo import load_demo
from votes.imports.runs import import_battle_records
from votes.migrate import upgrade_database

MIN_VOTES = 80  # reasoning (4 of the 44 demo prompts) stays under it with 600 votes


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[TestClient, list[Any]]]:
    url = f"sqlite:///{tmp_path}/arena.db"
    upgrade_database(url)
    engine = make_engine(url)
    load_demo(engine, n_votes=600, seed=1)
    tie = BattleRecord(
        where="one tie",
        model_a="newbie-1b",
        model_b="basalt-34b",
        winner="tie",
        question_id="demo-code-1",
        anony=True,
        tstamp=1.74e9,
    )
    with engine.begin() as conn:
        import_battle_records(conn, [tie], file="<one tie>")
    rows = publish_slices(
        engine,
        snapshot_dir=tmp_path / "snapshots",
        request=FitRequest(n_rounds=10, random_state=1),
        min_votes=MIN_VOTES,
        plots=False,
    )
    app = create_app(make_settings(url, snapshot_dir=str(tmp_path / "snapshots")), engine=engine, seed=1)
    with TestClient(app, base_url="http://testserver") as client:
        yield client, rows
    engine.dispose()


def test_titles_of_boards_and_languages() -> None:
    assert slice_title("all") == "Overall"
    assert slice_title("category=coding") == "Coding"
    assert slice_title("language=de") == "German"
    assert slice_title("category=hard_prompts&language=pt-BR") == "Hard prompts, Portuguese (BR)"
    assert slice_title("language=German") == "German"
    assert slice_title("category=creative-writing") == "Creative writing"
    assert language_name("xx") == "Xx"  # unknown: tidied, never the raw key


def test_times_read_to_the_minute_and_keep_the_exact_value() -> None:
    assert human_time("2026-12-07T13:20:31.123456+00:00") == "2026-12-07 13:20 UTC"
    tag = str(time_tag("2026-12-07T13:20:31.123456+00:00"))
    assert tag == '<time datetime="2026-12-07T13:20:31.123456+00:00">2026-12-07 13:20 UTC</time>'
    assert human_time("not a time") == "not a time"


def test_board_pages_show_titles_notes_times_and_the_icon(site: tuple[TestClient, list[Any]]) -> None:
    client, rows = site
    board: Any = client.get("/leaderboard")
    html = board.text
    assert '<option value="category=coding">Coding</option>' in html
    assert '<option value="language=de">German</option>' in html
    assert "category=coding</option>" not in html
    assert 'rel="icon" href="/static/favicon.svg"' in html
    assert re.search(
        r'<time datetime="\d{4}-\d\d-\d\dT[\d:.]+\+00:00">\d{4}-\d\d-\d\d \d\d:\d\d UTC</time>', html
    )
    # the category with too few votes is listed, not silently missing
    assert 'id="unpublished-boards"' in html and "Reasoning (" in html
    # the new model is provisional on the overall board
    assert re.search(r"newbie-1b <span class=\"provisional\"", html)
    coding: Any = client.get("/leaderboard?slice=category%3Dcoding")
    assert '<h2 id="published-title">Published: Coding</h2>' in coding.text
    assert "<title>Coding · Leaderboard · Arena</title>" in coding.text
    assert 'id="left-off"' in coding.text and "newbie-1b (1 vote)" in coding.text
    assert "newbie-1b" not in [r.model for r in coding.context["rows"]]
    coding_row = next(r for r in rows if r.slice == "category=coding")
    page: Any = client.get(f"/leaderboard/snapshots/{coding_row.id}")
    assert page.status_code == 200
    assert 'rel="icon" href="/static/favicon.svg"' in page.text
    assert "<dt>Board</dt><dd>Coding</dd>" in page.text
    published = page.context["metadata"]["created_at"]
    assert f'<time datetime="{published}">{human_time(published)}</time>' in page.text
    assert published not in page.text.replace(f'datetime="{published}"', "")  # microseconds only there
    assert "newbie-1b (1 vote)" in page.text
    assert 'id="no-figures"' in page.text  # published without figures, and the page says so
    listing: Any = client.get("/leaderboard/snapshots")
    assert "<td>German</td>" in listing.text and "<td>language=de</td>" not in listing.text
    matrix: Any = client.get("/leaderboard/categories")
    assert '<th scope="col" class="num">Coding</th>' in matrix.text
    assert "Reasoning (" in matrix.text
    icon = client.get("/static/favicon.svg")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    unasked = client.get("/favicon.ico", follow_redirects=True)
    assert unasked.status_code == 200 and "<svg" in unasked.text
