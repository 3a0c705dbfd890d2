"""The real Swagger UI at ``/docs/swagger``, offline and under the site's CSP, in headless Chromium at
1280 px and 390 px: its files come from the ``swagger-ui-bundle`` package (every request stays on the
site), the operations are listed under their English names, and the console shows no CSP violation.
Screenshots: ``test-artifacts/swagger-ui-{1280,390}.png``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from arena.app import create_app
from tests.e2e.a11y import new_page
from tests.e2e.conftest import ARTIFACTS, serve
from tests.factories import make_settings
from votes.db import make_engine
from votes.migrate import upgrade_database

pytestmark = pytest.mark.e2e

VIEWPORT_NAMES = {"desktop": "1280", "phone": "390"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("e2e-swagger")
    url = f"sqlite:///{tmp}/arena.db"
    upgrade_database(url)
    engine = make_engine(url)
    app = create_app(make_settings(url, snapshot_dir=str(tmp / "snapshots")), engine=engine, seed=1)
    try:
        with serve(app) as base:
            yield base
    finally:
        engine.dispose()


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_swagger_ui_lists_the_operations_offline_under_the_csp(
    site: str, browser: Any, viewport: str
) -> None:
    page = new_page(browser, viewport, javascript=True)
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    hosts: set[str] = set()
    page.on("request", lambda request: hosts.add(urlsplit(request.url).netloc))
    page.add_init_script(
        "window.__cspViolations = [];"
        "document.addEventListener('securitypolicyviolation',"
        " e => window.__cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));"
    )
    reply = page.goto(f"{site}/docs/swagger")
    assert reply is not None and reply.status == 200
    assert "script-src 'self'" in (reply.headers.get("content-security-policy") or "")
    page.wait_for_selector(".swagger-ui .opblock", timeout=60_000)
    summaries = page.locator(".opblock .opblock-summary-description").all_inner_texts()
    for name in ("Next battle", "Cast a vote"):
        assert name in summaries, summaries
    assert page.locator(".opblock").count() >= 5
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"swagger-ui-{VIEWPORT_NAMES[viewport]}.png"), full_page=True)
    assert page.evaluate("window.__cspViolations") == []
    assert not [line for line in console if "Content Security Policy" in line], console
    assert hosts == {urlsplit(site).netloc}, hosts  # nothing from a CDN
    page.context.close()


def test_swagger_assets_are_the_package_files(site: str, browser: Any) -> None:
    page = new_page(browser, "desktop", javascript=False)
    script = page.request.get(f"{site}/docs/swagger/assets/swagger-ui-bundle.js")
    assert script.status == 200 and len(script.body()) > 500_000
    assert page.request.get(f"{site}/docs/swagger/assets/../../../etc/passwd").status == 404
    assert page.request.get(f"{site}/redoc", max_redirects=0).headers["location"] == "/docs"
    page.context.close()
