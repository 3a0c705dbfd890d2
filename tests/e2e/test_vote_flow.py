"""The vote flow in real headless Chromium: with JavaScript (fetch, no reload) and without (form posts).

Screenshots of the vote page, the reveal and the leaderboard go to ``test-artifacts/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

from arena.app import create_app
from tests.e2e.conftest import ARTIFACTS, serve
from tests.factories import MODEL_NAMES, make_settings, seed_catalog
from votes.db import make_engine

pytestmark = pytest.mark.e2e


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    url = f"sqlite:///{tmp_path}/e2e.db"
    engine = make_engine(url)
    SQLModel.metadata.create_all(engine)
    seed_catalog(engine)
    app = create_app(make_settings(url), engine=engine, seed=3)
    try:
        with serve(app) as base:
            yield base, engine
    finally:
        engine.dispose()


def _games(page: object, name: str) -> int:
    row = page.locator("#live-standings tbody tr", has_text=name)  # type: ignore[attr-defined]
    return int(row.locator("td").nth(3).inner_text())


def _check_blind(html: str) -> None:
    for name in MODEL_NAMES:
        assert name not in html, f"{name} visible before the vote"


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "nojs"])
def test_vote_reveal_leaderboard(server: tuple[str, Engine], browser: object, javascript: bool) -> None:
    base, _engine = server
    ARTIFACTS.mkdir(exist_ok=True)
    tag = "js" if javascript else "nojs"
    context = browser.new_context(java_script_enabled=javascript, viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    dialogs: list[str] = []

    def on_dialog(dialog: object) -> None:
        dialogs.append(dialog.message)  # type: ignore[attr-defined]
        dialog.dismiss()  # type: ignore[attr-defined]

    page.on("dialog", on_dialog)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    page.goto(f"{base}/leaderboard/live")
    assert "Live leaderboard" in page.content()

    page.goto(f"{base}/vote")
    page.wait_for_selector("#vote-form")
    _check_blind(page.content())
    assert page.locator(".answer").count() == 2
    assert "Keyboard:" in page.locator(".hint").inner_text()
    # Hostile Markdown in the answers is shown as text, never executed.
    assert "<script>" in page.locator(".answer").first.inner_text()
    page.screenshot(path=str(ARTIFACTS / f"vote-page-{tag}.png"), full_page=True)
    url_before = page.url

    if javascript:
        page.keyboard.press("a")  # the page's own shortcut
    else:
        page.locator('button[value="model_a"]').focus()
        page.keyboard.press("Enter")  # keyboard only: a focused submit button, no script
    page.wait_for_selector(".reveal")
    if javascript:
        assert page.url == url_before, "with JavaScript the vote must not reload the page"
    else:
        assert re.search(r"/battles/\d+$", page.url), page.url  # PRG: redirected to the reveal page
    names = [n.inner_text() for n in page.locator(".model-name").all()]
    assert len(names) == 2 and set(names) <= set(MODEL_NAMES) and names[0] != names[1]
    assert "A is better" in page.locator(".reveal h1").inner_text()
    assert page.locator("#vote-count").inner_text() == "1"
    page.screenshot(path=str(ARTIFACTS / f"reveal-{tag}.png"), full_page=True)

    page.goto(f"{base}/leaderboard/live")
    for name in names:
        assert _games(page, name) == 1
    # one game each: both are marked provisional beside their names
    ratings = {
        row.locator("td").nth(1).inner_text().removesuffix(" (provisional)"): float(
            row.locator("td").nth(2).inner_text()
        )
        for row in page.locator("#live-standings tbody tr").all()
        if row.locator("td").nth(2).inner_text() != "—"
    }
    marked = page.locator("#live-standings tbody tr.provisional td.model").all_inner_texts()
    assert sorted(m.removesuffix(" (provisional)") for m in marked) == sorted(names)
    assert ratings[names[0]] > 1000.0 > ratings[names[1]]
    page.screenshot(path=str(ARTIFACTS / f"leaderboard-{tag}.png"), full_page=True)

    # Next battle, then a second vote (Tie) from the keyboard.
    page.goto(f"{base}/vote")
    page.wait_for_selector("#vote-form")
    if javascript:
        page.keyboard.press("t")
        page.wait_for_selector(".reveal")
        page.keyboard.press("n")  # next battle without a reload
        page.wait_for_selector("#vote-form")
        assert page.locator("#vote-count").inner_text() == "2"
    assert dialogs == [] and errors == []
    assert page.evaluate("() => window.__pwned === undefined") if javascript else True
    context.close()
