"""Hostile model outputs, prompts and model names on the vote, reveal, live and snapshot pages in Chromium.

Nothing may execute (no dialog, no page error, no console error such as a CSP refusal of an injected
script: the sanitiser must remove it before the browser's last line of defence is needed), and the text
around each payload stays readable.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel

from arena.app import create_app
from tests.e2e.conftest import serve
from tests.factories import ADMIN_TOKEN, make_settings
from votes.db import make_engine
from votes.models import Model, Output, Prompt

pytestmark = pytest.mark.e2e


# Every payload tries to run alert() or set window.__xss.
PAYLOADS = [
    "<script>alert(1)</script>",
    "<script>window.__xss=1</script>",
    "<img src=x onerror=alert(1)>",
    '<img src="x" onerror="window.__xss=1">',
    "<svg onload=alert(1)></svg>",
    "<svg><script>alert(1)</script></svg>",
    '<svg><a xlink:href="javascript:alert(1)"><text x="0" y="15">svg link</text></a></svg>',
    "[click me](javascript:alert(1))",
    "[data link](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    '<a href="javascript:alert(1)">html link</a>',
    '![img](x" onerror="alert(1))',
    '<iframe src="javascript:alert(1)"></iframe>',
    '<details open ontoggle="alert(1)">details</details>',
    '<div style="background:url(javascript:alert(1))">styled</div>',
    '"><script>alert(1)</script><"',
    "<body onload=alert(1)>",
    '<math><mtext><table><mglyph><style><img src=x onerror="alert(1)">',
    "```html\n<script>alert(1)</script>\n```",
    "<form action=javascript:alert(1)><button>go</button></form>",
    '<input autofocus onfocus="alert(1)">',
]
HOSTILE_NAMES = ["<img src=x onerror=alert(1)>", "model<script>alert(1)</script>", 'x" onmouseover="alert(1)']


def seed_hostile(engine: Engine) -> None:
    with Session(engine) as session:
        models = [Model(name=name) for name in HOSTILE_NAMES]
        session.add_all(models)
        prompts = [
            Prompt(text=f"Readable prompt {i}: {payload}", category="xss<script>alert(1)</script>")
            for i, payload in enumerate(PAYLOADS)
        ]
        session.add_all(prompts)
        session.flush()
        for i, prompt in enumerate(prompts):
            for j, model in enumerate(models):
                payload = PAYLOADS[(i + j) % len(PAYLOADS)]
                text = f"Readable answer {i}-{j} before.\n\n{payload}\n\nReadable tail {i}-{j}."
                session.add(Output(prompt_id=prompt.id, model_id=model.id, text=text))  # type: ignore[arg-type]
        session.commit()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path}/xss.db"
    engine = make_engine(url)
    SQLModel.metadata.create_all(engine)
    seed_hostile(engine)
    app = create_app(make_settings(url, snapshot_dir=str(tmp_path / "snapshots")), engine=engine, seed=5)
    try:
        with serve(app) as base:
            yield base
    finally:
        engine.dispose()


class Watch:
    """Everything that would show an injected script ran or tried to."""

    def __init__(self, page: Any) -> None:
        self.events: list[str] = []
        page.on("dialog", self._dialog)
        page.on("pageerror", lambda e: self.events.append(f"pageerror: {e}"))
        page.on("console", self._console)
        # Broken images (an <img src=x> kept without its handler) 404: noisy, but not code running.
        self.missing: list[str] = []
        page.on("response", lambda r: self.missing.append(r.url) if r.status == 404 else None)

    def _dialog(self, dialog: Any) -> None:
        self.events.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    def _console(self, message: Any) -> None:
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            self.events.append(f"console {message.type}: {message.text}")

    def check(self, page: Any, where: str) -> None:
        page.mouse.move(5, 5)
        page.mouse.move(300, 300)  # give hover handlers their chance
        page.wait_for_timeout(150)
        assert page.evaluate("() => window.__xss === undefined"), f"{where}: injected code ran"
        assert not self.events, f"{where}: {self.events}"
        assert all(re.search(r"/(x|favicon\.ico)$", url) for url in self.missing), self.missing


def test_hostile_content_is_inert_and_readable(server: str, browser: Any) -> None:
    context = browser.new_context()
    page = context.new_page()
    watch = Watch(page)
    for round_ in range(4):
        page.goto(f"{server}/vote")
        watch.check(page, f"vote page {round_}")
        body = page.inner_text("body")
        assert re.search(r"Readable prompt \d+", body)
        assert len(re.findall(r"Readable answer \d+-\d+ before\.", body)) == 2
        assert len(re.findall(r"Readable tail \d+-\d+\.", body)) == 2
        # Ties by keyboard shortcut: every pair gets a draw, so the published fit has finite ratings.
        page.keyboard.press("t")
        page.wait_for_selector(".reveal", timeout=10_000)
        watch.check(page, f"reveal {round_}")
        assert any(name in page.inner_text("body") for name in HOSTILE_NAMES), "model names must read as text"
    page.goto(f"{server}/leaderboard/live")
    watch.check(page, "live leaderboard")
    assert sum(name in page.inner_text("body") for name in HOSTILE_NAMES) >= 2

    published = httpx.post(
        f"{server}/api/admin/publish",
        json={"n_rounds": 20, "seed": 0},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        timeout=60,
    )
    assert published.status_code == 200, published.text
    snapshot = published.json()["id"]
    for path in ("/leaderboard", f"/leaderboard/snapshots/{snapshot}", "/leaderboard/snapshots"):
        page.goto(f"{server}{path}")
        watch.check(page, path)
    page.goto(f"{server}/leaderboard/snapshots/{snapshot}")
    assert sum(name in page.inner_text("body") for name in HOSTILE_NAMES) >= 2
    context.close()
