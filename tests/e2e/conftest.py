"""Browser-test plumbing shared by every e2e module: one Chromium per session and a real uvicorn server.

Chromium is Debian's (/usr/bin/chromium), driven by Playwright from PyPI; nothing downloads a browser.
Without it the browser tests skip on a developer machine but fail under `CI=true`.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from arena.app import create_app
from arena.publish.recompute import SliceSpec
from arena.publish.snapshots import publish_slices
from leaderboard.bt.request import FitRequest
from tests.e2e.long_catalog import load_long_catalog
from tests.factories import make_settings
from votes.db import make_engine
from votes.migrate import upgrade_database

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on a free loopback port in a thread; yield its base URL."""
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert srv.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        message = f"browser tests need {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def long_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The site on the long English and German catalog with one published snapshot: (base URL, its id)."""
    tmp = tmp_path_factory.mktemp("e2e-long")
    url = f"sqlite:///{tmp}/arena.db"
    upgrade_database(url)
    engine = make_engine(url)
    load_long_catalog(engine)
    rows = publish_slices(
        engine,
        snapshot_dir=tmp / "snapshots",
        request=FitRequest(n_rounds=50, random_state=1),
        slices=[SliceSpec()],
    )
    app = create_app(make_settings(url, snapshot_dir=str(tmp / "snapshots")), engine=engine, seed=5)
    try:
        with serve(app) as base:
            yield base, rows[0].id
    finally:
        engine.dispose()
