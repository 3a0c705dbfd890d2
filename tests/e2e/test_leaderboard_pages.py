"""The published leaderboard in real headless Chromium: the board page and a snapshot page with its plots.

Screenshots go to ``test-artifacts/`` (published-leaderboard.png, snapshot-page.png) for people to look at.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from arena.app import create_app
from arena.publish.recompute import SliceSpec
from arena.publish.snapshots import publish_slices
from leaderboard.bt.request import FitRequest
from leaderboard.snapshot.figures import FIGURES
from tests.e2e.conftest import ARTIFACTS, serve
from tests.factories import make_settings
from votes.db import make_engine
from votes.imports.demo import load_demo
from votes.migrate import upgrade_database

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    tmp = tmp_path_factory.mktemp("e2e-leaderboard")
    url = f"sqlite:///{tmp}/arena.db"
    upgrade_database(url)
    engine = make_engine(url)
    load_demo(engine, n_votes=1500, seed=4)
    rows = publish_slices(
        engine,
        snapshot_dir=tmp / "snapshots",
        request=FitRequest(n_rounds=100, random_state=1),
        slices=[SliceSpec(), SliceSpec(category="coding")],
    )
    app = create_app(make_settings(url, snapshot_dir=str(tmp / "snapshots")), engine=engine, seed=3)
    try:
        with serve(app) as base:
            yield base, [r.id for r in rows]
    finally:
        engine.dispose()


def test_leaderboard_page_in_browser(server: tuple[str, list[str]], browser: object) -> None:
    base, ids = server
    page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    errors: list[str] = []
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(f"{base}/leaderboard")
    rows = page.locator("#published-standings tbody tr")
    assert rows.count() == 7
    assert page.locator("#published-standings svg.whisker").count() == 7
    assert page.locator("#live-standings tbody tr").count() == 7
    first_rank = rows.nth(0).locator("td").nth(0).inner_text()
    assert first_rank == "1"
    # At 1280 px the published table fits its column: every column a reader needs shows without a sideways
    # scroll, and the certificates wait behind a checkbox (no script needed).
    fits = "t => t.scrollWidth <= t.closest('.table-scroll').clientWidth"
    assert page.eval_on_selector("#published-standings", fits)
    for heading in ("Rank range", "Battles", "Win rate"):
        assert page.locator("#published-standings th", has_text=heading).is_visible(), heading
    assert not page.locator("#published-standings th", has_text="Votes to swap").is_visible()
    page.check("#board-details")
    assert page.locator("#published-standings th", has_text="Votes to swap").is_visible()
    page.uncheck("#board-details")
    # The live board's narrow column shows whole numbers (601 games, not a cut "60").
    assert page.eval_on_selector("#live-standings", fits)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "published-leaderboard.png"), full_page=True)
    # Boards are named for people, keys stay in the URL; the icon every page links loads.
    assert page.locator("#slice option[value='category=coding']").inner_text() == "Coding"
    assert page.locator("link[rel=icon]").get_attribute("href") == "/static/favicon.svg"
    # The board selector switches to the coding board (a plain GET form: works without JavaScript).
    page.select_option("#slice", "category=coding")
    page.click(".slice-picker button")
    page.wait_for_url("**slice=category%3Dcoding**")
    assert ids[1] in page.inner_text(".board-published")
    assert page.inner_text("#published-title") == "Published: Coding"
    assert page.eval_on_selector("#published-standings", fits)
    assert not errors, errors
    page.close()


def test_snapshot_page_in_browser(server: tuple[str, list[str]], browser: object) -> None:
    base, ids = server
    page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    errors: list[str] = []
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(f"{base}/leaderboard/snapshots")
    page.click(f"a[href='/leaderboard/snapshots/{ids[0]}']")
    page.wait_for_url(f"**/leaderboard/snapshots/{ids[0]}")
    images = page.locator(".figures img")
    assert images.count() == len(FIGURES) == 6  # ratings, three matrices, average win rate, bootstrap
    # The figures load lazily: bring each into view, then poll from Python (a predicate polled inside
    # the page would need eval, which the CSP forbids).
    for i in range(images.count()):
        images.nth(i).scroll_into_view_if_needed()
    deadline = time.monotonic() + 15
    widths = [0]
    while time.monotonic() < deadline:
        widths = page.eval_on_selector_all(".figures img", "imgs => imgs.map(i => i.naturalWidth)")
        if all(w > 0 for w in widths):
            break
        time.sleep(0.1)
    assert all(w > 300 for w in widths), widths
    assert page.locator("#downloads tbody tr").count() >= 15
    # The publication time reads to the minute, the exact one kept for machines; the facts wrap between
    # words ("1000 rounds" whole), even in a narrow window, and only a hash is cut.
    published = page.locator(".facts time")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", published.inner_text())
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+\+00:00", published.get_attribute("datetime") or ""
    )
    # the Method entry (the Intervals entry names the rounds too)
    method = page.locator(
        "xpath=//dl[contains(@class, 'facts')]/dt[normalize-space()='Method']/following-sibling::dd[1]"
    )
    # how many line boxes the word "rounds" spans (two when the line broke inside it)
    rounds_lines = (
        "e => { const t = e.firstChild; const i = t.textContent.indexOf('rounds'); const r = "
        "document.createRange(); r.setStart(t, i); r.setEnd(t, i + 6); return r.getClientRects().length }"
    )
    for width in range(340, 481, 20):  # break-all cut it at 360 and 400 px ("1000 r ounds", "round s")
        page.set_viewport_size({"width": width, "height": 900})
        assert method.evaluate(rounds_lines) == 1, width
    page.set_viewport_size({"width": 1280, "height": 900})
    page.screenshot(path=str(ARTIFACTS / "snapshot-page.png"), full_page=True)
    assert not errors, errors
    page.close()
