"""Speed does not give a live battle's models away, measured in real Chromium against real llama.cpp servers.

One model is the tiny random llama (2 layers, width 64), the other a wider and deeper random llama
(:data:`SLOW`), many times slower per token; both write exactly :data:`TOKENS` tokens (these models
never end a turn of their own). Over :data:`BATTLES` live battles, each started with N from the
previous reveal, the page records the moment each pane's text becomes complete in the DOM (a
MutationObserver on the panes' states, ``performance.now()``), and which pane completed first.

The bound. Sides are a fair coin per battle, so if the finish order carries no information about speed,
the number X of battles in which the faster model's pane completed first is Binomial(20, 1/2). The test
accepts 4 <= X <= 16; under that null hypothesis it fails with probability 2 * P(X <= 3) = 0.0026. A
page that shows each model at its own speed puts the faster model first in (nearly) every battle,
X = 20, far outside. The premise is checked too: upstream, the fast model finished before the slow one
in at least 18 of the battles (the latencies stored with each answer), so the speeds really differ.
Beyond the order, the two panes must complete on one frame (within :data:`SAME_FRAME_MS`): with one pace
and one length, neither finishes first at all. (Both then complete in one task of the page, pane A's
first in the DOM, so X is the number of battles with the faster model on side A: the fair coin itself.)
Measured here: X = 8, both panes complete in the same millisecond in all 20 battles, and the wait from
submit to both complete is the slow model's own time; with each pane at its own model's speed the same
test gives X = 20 with the faster pane complete 0.5 to 3.9 s earlier.

Also here: Stop ends a turn (both panes "stopped", no vote, both generations counted), and on a phone
the keyboard help and badges are hidden and the shortcut switch takes one line.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

from arena.app import create_app
from tests.arena.voting.live_support import NAMES, register
from tests.e2e.a11y import new_page
from tests.e2e.conftest import ARTIFACTS, serve
from tests.factories import make_settings, seed_catalog
from tests.llm_servers import LlamaServers
from votes.db import make_engine
from votes.tables import battle_t, generation_t, liveusage_t, model_t, output_t

pytestmark = pytest.mark.e2e

FAST, SLOW_NAME = NAMES
#: The slow model's width and depth (the fast one is the default tiny model).
SLOW = {"n_embd": 512, "n_layer": 8}
TOKENS = 32
BATTLES = 20
#: Two panes completing in one frame of the page are at most this far apart.
SAME_FRAME_MS = 50.0

#: Records, per battle, when each pane's answer became complete and in which order.
OBSERVE = """() => {
  window.arenaDone = {};
  window.arenaOrder = [];
  document.addEventListener("submit", () => { window.arenaSubmitted = performance.now(); }, true);
  new MutationObserver((records) => {
    const now = performance.now();
    for (const record of records) {
      const item = record.target;
      if (!item.classList || !item.classList.contains("turn-assistant")) { continue; }
      const state = item.getAttribute("data-state");
      const side = item.closest(".conversation").id.slice(-1);
      if ((state === "done" || state === "failed") && !(side in window.arenaDone)) {
        window.arenaDone[side] = now;
        window.arenaOrder.push(side);
      }
    }
  }).observe(document.querySelector(".live-battle"),
             { subtree: true, attributes: true, attributeFilter: ["data-state"] });
}"""
#: The shortcut switch's height in lines of its text (one line: under 2).
SWITCH_LINES = """() => {
  const label = document.querySelector("[data-shortcut-setting] label");
  const box = document.querySelector("[data-shortcut-setting]").getBoundingClientRect();
  return box.height / parseFloat(getComputedStyle(label).fontSize);
}"""


@pytest.fixture
def paced_site(tmp_path: Path, llm_servers: LlamaServers) -> Iterator[tuple[str, Engine]]:
    fast, slow = llm_servers.get(seed=1), llm_servers.get(seed=2, **SLOW)
    url = f"sqlite:///{tmp_path}/live.db"
    engine = make_engine(url)
    SQLModel.metadata.create_all(engine)
    seed_catalog(engine)
    register(engine, [(FAST, fast.base_url, fast.model_id)], max_tokens=TOKENS, max_concurrency=1)
    register(engine, [(SLOW_NAME, slow.base_url, slow.model_id)], max_tokens=TOKENS, max_concurrency=1)
    # 20 battles in a minute or two: more than the default limits of live turns allow.
    settings = make_settings(url, live_generations_per_minute=60, live_generations_per_address_per_minute=60)
    app = create_app(settings, engine=engine, seed=11)
    try:
        with serve(app) as base:
            yield base, engine
    finally:
        engine.dispose()


def _latencies(engine: Engine) -> list[dict[str, float]]:
    """Per voted battle, each model's latency upstream (seconds), as stored with its answer."""
    with engine.connect() as conn:
        battles = conn.execute(select(battle_t.c.output_a_id, battle_t.c.output_b_id).order_by(battle_t.c.id))
        found = []
        for outputs in battles.all():
            rows = conn.execute(
                select(model_t.c.name, generation_t.c.latency_s)
                .join(output_t, output_t.c.id == generation_t.c.output_id)
                .join(model_t, model_t.c.id == output_t.c.model_id)
                .where(generation_t.c.output_id.in_(list(outputs)))
            ).all()
            found.append({str(name): float(latency) for name, latency in rows})
    return found


def test_the_faster_model_s_pane_does_not_finish_first(paced_site: tuple[str, Engine], browser: Any) -> None:
    base, engine = paced_site
    page = new_page(browser, "desktop", javascript=True)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/battle")
    seen: list[dict[str, Any]] = []
    for i in range(BATTLES):
        page.evaluate(OBSERVE)
        page.fill("#live-message", f"Battle {i}: tell me about the tides.")
        page.locator("#live-form button[type=submit]").click()
        page.wait_for_selector('.live-battle:not([data-state="streaming"])', timeout=120_000)
        assert page.locator('.live-battle[data-state="vote"]').count() == 1, page.locator(
            "#live-notice"
        ).inner_text()
        done, order, submitted = page.evaluate(
            "() => [window.arenaDone, window.arenaOrder, window.arenaSubmitted]"
        )
        page.locator("#area-heading").focus()
        page.keyboard.press("t")  # a tie: the reveal names the sides
        page.wait_for_selector(".reveal")
        fast_side = "a" if page.locator('.model-name[data-side="A"]').inner_text() == FAST else "b"
        slow_side = "b" if fast_side == "a" else "a"
        seen.append(
            {
                "fast_side": fast_side,
                "first": order[0],
                "fast_minus_slow_ms": done[fast_side] - done[slow_side],
                "wait_ms": max(done.values()) - submitted,
            }
        )
        page.locator("#area-heading").focus()
        page.keyboard.press("n")  # a new live battle, from the reveal
        page.wait_for_selector('.live-battle[data-state="ask"]')
    page.context.close()

    latencies = _latencies(engine)
    assert len(latencies) == BATTLES
    upstream_fast_first = sum(lat[FAST] < lat[SLOW_NAME] for lat in latencies)
    fast_first = sum(s["first"] == s["fast_side"] for s in seen)
    gaps = [abs(s["fast_minus_slow_ms"]) for s in seen]
    summary = {
        "battles": BATTLES,
        "fast_model_s_pane_first": fast_first,
        "fast_model_on_side_a": sum(s["fast_side"] == "a" for s in seen),
        "upstream_fast_finished_first": upstream_fast_first,
        "median_latency_s": {
            name: statistics.median(lat[name] for lat in latencies) for name in (FAST, SLOW_NAME)
        },
        "max_gap_between_panes_ms": max(gaps),
        "median_wait_ms": statistics.median(s["wait_ms"] for s in seen),
        "battles_seen": seen,
    }
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "live-pace.json").write_text(json.dumps(summary, indent=1))
    assert errors == []
    assert upstream_fast_first >= 18, summary  # the premise: the speeds really differ
    assert 4 <= fast_first <= 16, summary  # Binomial(20, 1/2): fails by chance with probability 0.0026
    assert max(gaps) <= SAME_FRAME_MS, summary  # and the panes complete together


@pytest.fixture
def long_site(tmp_path: Path, llm_servers: LlamaServers) -> Iterator[tuple[str, Engine]]:
    """Both models slow and long-winded: a turn runs long enough to be stopped."""
    slow = [llm_servers.get(seed=2, **SLOW), llm_servers.get(seed=3, **SLOW)]
    url = f"sqlite:///{tmp_path}/live.db"
    engine = make_engine(url)
    SQLModel.metadata.create_all(engine)
    seed_catalog(engine)
    register(engine, [(n, s.base_url, s.model_id) for n, s in zip(NAMES, slow, strict=True)], max_tokens=3000)
    app = create_app(make_settings(url, live_moderation_patterns=["forbidden"]), engine=engine, seed=12)
    try:
        with serve(app) as base:
            yield base, engine
    finally:
        engine.dispose()


def test_stop_ends_the_turn_and_both_generations_are_counted(
    long_site: tuple[str, Engine], browser: Any
) -> None:
    base, engine = long_site
    page = new_page(browser, "phone", javascript=True)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/battle")
    # On a phone: no keyboard help or key badges, and the shortcut switch on one line.
    assert not page.locator("#new-live-battle kbd").is_visible()
    assert page.locator("[data-shortcut-setting]").is_visible() and page.evaluate(SWITCH_LINES) < 2
    page.fill("#live-message", "Tell me a very long story.")
    page.locator("#live-form button[type=submit]").click()
    page.wait_for_selector('#conversation-a [data-pane-state="streaming"]', timeout=60_000)
    assert page.locator("#live-stop").is_visible()
    stopped = time.monotonic()
    page.locator("#live-stop").click()
    for side in ("a", "b"):
        assert (
            page.locator(f"#conversation-{side} [data-pane-state]").last.get_attribute("data-pane-state")
            == "stopped"
        )
    assert "You stopped this battle" in page.locator("#live-notice").inner_text()
    assert page.locator("#vote-form").count() == 0 and page.locator("#live-stop").is_hidden()
    page.screenshot(path=str(ARTIFACTS / "live-battle-stopped-phone.png"), full_page=True)
    # A prompt the server refuses leaves the stopped battle on the page as it was, and says why.
    page.fill("#live-message", "Something forbidden.")
    page.locator("#live-form button[type=submit]").click()
    page.wait_for_function(
        "() => document.getElementById('live-notice').textContent.includes('not accepted')"
    )
    assert page.locator(".live-battle").get_attribute("data-state") == "ended"
    for side in ("a", "b"):
        assert (
            page.locator(f"#conversation-{side} [data-pane-state]").last.get_attribute("data-pane-state")
            == "stopped"
        )
        assert page.locator(f"#conversation-{side} .turn").count() == 2
    counted: Any = []
    while time.monotonic() - stopped < 10 and len(counted) < 2:
        with engine.connect() as conn:
            counted = conn.execute(
                select(liveusage_t.c.generations, liveusage_t.c.failures, liveusage_t.c.tokens)
            ).all()
        time.sleep(0.1)
    assert sorted(row[:2] for row in counted) == [(1, 0), (1, 0)]
    assert all(0 < row[2] < 3000 for row in counted)  # stopped early, and what was written counts
    page.context.close()
    assert errors == []
