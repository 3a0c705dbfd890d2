"""Live battles in real headless Chromium against two real llama.cpp servers of tiny random models.

With JavaScript: each pane shows its state within a second of the submit, both panes stream (the page
counts the updates it drew), the prompt with a formula is drawn as on the reveal, a second turn, a vote
by key, the reveal with both names and the Elo change, "New live battle" (key N) from the reveal starts
another live battle, Stop ends a turn, and the exported battle has both conversations. Without
JavaScript: the form post returns both complete answers and the vote works as a plain form. Each page
passes axe with one h1. Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

from arena.app import create_app
from tests.arena.voting.live_support import NAMES, register
from tests.e2e.a11y import blocking_violations, new_page
from tests.e2e.conftest import ARTIFACTS, serve
from tests.factories import make_settings, seed_catalog
from tests.llm_servers import LlamaServers
from votes.db import make_engine
from votes.reads.exports import iter_vote_rows
from votes.reads.filters import VoteFilter

pytestmark = pytest.mark.e2e


@pytest.fixture
def live_site(tmp_path: Path, llm_servers: LlamaServers) -> Iterator[tuple[str, Engine]]:
    servers = [llm_servers.get(seed=1), llm_servers.get(seed=2)]
    url = f"sqlite:///{tmp_path}/live.db"
    engine = make_engine(url)
    SQLModel.metadata.create_all(engine)
    seed_catalog(engine)
    register(
        engine,
        [(name, s.base_url, s.model_id) for name, s in zip(NAMES, servers, strict=True)],
        max_tokens=64,
        max_concurrency=1,
    )
    app = create_app(make_settings(url), engine=engine, seed=4)
    try:
        with serve(app) as base:
            yield base, engine
    finally:
        engine.dispose()


#: A prompt with a formula: the panes draw it as MathML, as the reveal does.
PROMPT = "Write a haiku about the sea. Rayleigh scattering goes as $\\lambda^{-4}$."


def _blind(html: str) -> None:
    for name in NAMES:
        assert name.split("-")[0] not in html, f"{name} visible before the vote"


def _check(page: Any, label: str) -> list[str]:
    problems = [f"{label}: {v}" for v in blocking_violations(page)]
    if page.locator("h1").count() != 1:
        problems.append(f"{label}: {page.locator('h1').count()} h1 elements")
    return problems


def _updates(page: Any, side: str) -> int:
    last = page.locator(f"#conversation-{side} .turn-assistant .md").last
    return int(last.get_attribute("data-updates"))


def test_live_battle_streams_two_turns_then_votes_by_key(live_site: tuple[str, Engine], browser: Any) -> None:
    base, engine = live_site
    ARTIFACTS.mkdir(exist_ok=True)
    page = new_page(browser, "desktop", javascript=True)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/vote")
    page.locator('a[href="/battle"]').first.click()
    page.wait_for_selector("#live-form")
    problems = _check(page, "/battle")

    page.fill("#live-message", PROMPT)
    clicked = time.monotonic()
    page.locator("#live-form button[type=submit]").click()
    for side in ("a", "b"):  # each pane says what it is doing within a second of the submit
        page.wait_for_selector(f"#conversation-{side} .turn-assistant [data-pane-state]", timeout=1000)
    assert time.monotonic() - clicked < 1.0
    page.wait_for_selector('.live-battle[data-state="vote"]', timeout=120_000)
    for side in ("a", "b"):
        # data-updates counts every state drawn: the partial ones, then the finished answer.
        assert _updates(page, side) - 1 >= 2, f"pane {side} drew {_updates(page, side)} states"
        state = page.locator(f"#conversation-{side} [data-pane-state]").last
        assert state.get_attribute("data-pane-state") == "done"
        assert re.fullmatch(r"Done · \d+ tokens", state.inner_text().strip())
    prompt_html = page.locator("#conversation-a .turn-user .md").first.inner_html()
    assert (
        "<math" in prompt_html
        and prompt_html == page.locator("#conversation-b .turn-user .md").first.inner_html()
    )
    _blind(page.content())
    problems += _check(page, "/battle after a turn")
    page.screenshot(path=str(ARTIFACTS / "live-battle-turn1.png"), full_page=True)

    page.fill("#live-message", "Now one about mountains.")
    page.locator("#live-form button[type=submit]").click()
    # The new turn's items and the "streaming" state appear together, before the state returns to "vote".
    page.wait_for_selector("#conversation-a .turn:nth-child(4)", timeout=60_000)
    page.wait_for_selector('.live-battle[data-state="vote"]', timeout=120_000)
    assert page.locator("#conversation-b .turn").count() == 4
    _blind(page.content())

    page.locator("#area-heading").focus()
    page.keyboard.press("b")  # B is better, by the page's shortcut
    page.wait_for_selector(".reveal", timeout=60_000)
    shown = page.locator(".model-name").all_inner_texts()
    assert sorted(shown) == sorted(NAMES)
    deltas = page.locator(".delta").all_inner_texts()
    assert len(deltas) == 2 and deltas[0].startswith("-") and deltas[1].startswith("+")
    problems += _check(page, "reveal")
    # The prompt is drawn by one renderer in the panes and on the reveal.
    assert page.locator(".reveal .prompt .turn-user .md").first.inner_html() == prompt_html
    page.screenshot(path=str(ARTIFACTS / "live-battle-reveal.png"), full_page=True)
    # N on the reveal of a live battle starts another live battle, on this page.
    page.locator("#area-heading").focus()
    page.keyboard.press("n")
    page.wait_for_url(f"{base}/battle")
    page.wait_for_selector('.live-battle[data-state="ask"]')
    assert page.locator("#live-form input[name=token]").count() == 0
    assert page.locator("#conversation-a .turn").count() == 0
    page.fill("#live-message", "A riddle, please.")
    page.locator("#live-form button[type=submit]").click()
    page.wait_for_selector('.live-battle[data-state="vote"]', timeout=120_000)
    assert page.locator("#conversation-a .turn").count() == 2
    page.context.close()
    assert errors == []
    assert problems == []

    with engine.connect() as conn:
        (row,) = list(iter_vote_rows(conn, VoteFilter(source="live")))
    assert row["winner"] == "model_b" and [row["model_a"], row["model_b"]] == shown
    for side in ("conversation_a", "conversation_b"):
        assert [m["role"] for m in row[side]] == ["user", "assistant", "user", "assistant"]
        assert row[side][2]["content"] == "Now one about mountains."


def test_live_battle_without_javascript(live_site: tuple[str, Engine], browser: Any) -> None:
    base, _engine = live_site
    page = new_page(browser, "phone", javascript=False)
    page.route("**/static/live.js", lambda route: route.abort())
    page.goto(f"{base}/battle")
    page.fill("#live-message", "Name three colours.")
    page.locator("#live-form button[type=submit]").click()
    page.wait_for_selector("#vote-form", timeout=120_000)
    for side in ("a", "b"):
        assert page.locator(f"#conversation-{side} .turn").count() == 2
        assert page.locator(f"#conversation-{side} .turn-assistant .md").inner_text().strip()
    _blind(page.content())
    problems = _check(page, "/battle without JavaScript")
    page.screenshot(path=str(ARTIFACTS / "live-battle-nojs.png"), full_page=True)
    page.locator('#vote-form button[value="tie"]').click()
    page.wait_for_selector(".reveal")
    assert sorted(page.locator(".model-name").all_inner_texts()) == sorted(NAMES)
    page.context.close()
    assert problems == []
