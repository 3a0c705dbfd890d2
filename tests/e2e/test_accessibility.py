"""axe-core over every page and the reveal, with and without JavaScript, at 1280, 390 and 320 px wide.

On the long English and German catalog (answers open with ``# heading`` and hold a 180-character code
line): no critical or serious WCAG 2.0-2.2 A/AA violation, one h1 per page, no sideways scrolling on a
phone or at 400% zoom, answer headings below the page's own, and each text under its own ``lang``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.a11y import VIEWPORTS, blocking_violations, new_page, page_width
from tests.e2e.conftest import ARTIFACTS

pytestmark = pytest.mark.e2e

PAGES = (
    "/",
    "/vote",
    "/battle",
    "/leaderboard",
    "/leaderboard/live",
    "/leaderboard/snapshots",
    "SNAPSHOT",
    "/guidelines",
    "/docs",
)


def _check_page(page: Any, label: str, viewport: str) -> list[str]:
    problems = [f"{label}: {v}" for v in blocking_violations(page)]
    n_h1 = page.locator("h1").count()
    if n_h1 != 1:
        problems.append(f"{label}: {n_h1} h1 elements")
    width = VIEWPORTS[viewport][0]
    if viewport != "desktop" and page_width(page) > width:
        problems.append(f"{label}: {page_width(page)} px wide in a {width} px viewport")
    return problems


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "nojs"])
@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_pages_pass_axe(long_site: tuple[str, str], browser: Any, viewport: str, javascript: bool) -> None:
    base, snapshot_id = long_site
    page = new_page(browser, viewport, javascript=javascript)
    problems: list[str] = []
    for path in PAGES:
        url = f"/leaderboard/snapshots/{snapshot_id}" if path == "SNAPSHOT" else path
        page.goto(base + url)
        problems += _check_page(page, url, viewport)
    # The reveal: after a vote by script (a fragment swapped in) or on the page a form post lands on.
    page.goto(f"{base}/vote")
    page.locator('button[value="model_b"]').click()
    page.wait_for_selector(".reveal")
    problems += _check_page(page, f"reveal ({page.url})", viewport)
    if javascript:
        page.locator("#next-battle").click()
        page.wait_for_selector("#vote-form")
        problems += _check_page(page, "next battle", viewport)
    else:
        assert page.locator(".reveal .prompt").is_visible()  # the prompt stays above the revealed answers
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"a11y-{viewport}-{'js' if javascript else 'nojs'}.png"))
    page.context.close()
    assert problems == []


def test_answer_headings_and_languages(long_site: tuple[str, str], browser: Any) -> None:
    base, _snapshot_id = long_site
    page = new_page(browser, "desktop", javascript=False)
    seen: set[str] = set()
    for _ in range(40):  # skip until both an English and a German battle have been seen
        page.goto(f"{base}/vote")
        prompt_lang = page.locator(".prompt .md").get_attribute("lang")
        assert prompt_lang in ("en", "de")
        answers = page.locator(".answer .md")
        assert answers.count() == 2
        assert [answers.nth(i).get_attribute("lang") for i in range(2)] == [prompt_lang, prompt_lang]
        word = "Antwort" if prompt_lang == "de" else "Answer"
        assert word in answers.nth(0).locator("h3").first.inner_text()
        assert page.locator(".answer .md h1, .answer .md h2, .prompt .md h1, .prompt .md h2").count() == 0
        headings = [t.strip() for t in page.locator(".answer > h2").all_text_contents()]
        assert headings == ["Answer A", "Answer B"]
        seen.add(prompt_lang)
        if seen == {"en", "de"}:
            break
    assert seen == {"en", "de"}
    page.context.close()
