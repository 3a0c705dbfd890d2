"""Accessibility checks shared by the browser tests: axe-core runs, live regions, headings, reflow.

axe-core comes inside the ``axe-playwright-python`` wheel (``axe.min.js``) and is injected into the page
through the DevTools protocol: nothing is fetched at test time and the site's CSP does not apply to it.
"Without JavaScript" means without the site's own script (``/static/arena.js`` is blocked), so that axe
itself can still run.
"""

from __future__ import annotations

from typing import Any

from axe_playwright_python.sync_playwright import Axe

__all__ = [
    "AXE_TAGS",
    "BLOCKING_IMPACTS",
    "LIVE_REGIONS",
    "MAX_LIVE_REGION_CHARS",
    "VIEWPORTS",
    "blocking_violations",
    "live_region_lengths",
    "new_page",
    "page_width",
]

AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa"]
BLOCKING_IMPACTS = frozenset({"critical", "serious"})
MAX_LIVE_REGION_CHARS = 300
LIVE_REGIONS = (
    '[aria-live]:not([aria-live="off"]), [role="status"], [role="alert"], [role="log"], [role="marquee"]'
)
VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844), "zoom400": (320, 256)}

_axe = Axe()


def new_page(browser: Any, viewport: str, *, javascript: bool) -> Any:
    """A page in a fresh context at ``viewport``; without ``javascript`` the site's script is blocked."""
    width, height = VIEWPORTS[viewport]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    if not javascript:
        page.route("**/static/arena.js", lambda route: route.abort())
    return page


def blocking_violations(page: Any) -> list[str]:
    """axe-core's critical and serious violations of the WCAG 2.0-2.2 A/AA rules, one line each."""
    options = {"runOnly": {"type": "tag", "values": AXE_TAGS}, "resultTypes": ["violations"]}
    response = _axe.run(page, options=options).response
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes'][:3]]}"
        for v in response["violations"]
        if v["impact"] in BLOCKING_IMPACTS
    ]


def live_region_lengths(page: Any) -> list[int]:
    """Text length of every live region (aria-live, or a role that implies it) in the page."""
    lengths: list[int] = page.evaluate(
        "(selector) => Array.from(document.querySelectorAll(selector), (el) => el.textContent.trim().length)",
        LIVE_REGIONS,
    )
    return lengths


def page_width(page: Any) -> int:
    """How wide the document is: more than the viewport means the page scrolls sideways."""
    width: int = page.evaluate("() => document.documentElement.scrollWidth")
    return width
