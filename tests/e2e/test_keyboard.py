"""The vote flow from the keyboard, as a keyboard or screen-reader user meets it.

Shortcuts act in the battle only and can be switched off; Enter keeps its native meaning; focus moves to
each step's heading; the only live region is a one-line status; the live board can be paused.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.a11y import MAX_LIVE_REGION_CHARS, live_region_lengths, new_page

pytestmark = pytest.mark.e2e

SETTLE_MS = 600  # long enough for a fetch to the local server to have answered


def _vote_page(browser: Any, base: str) -> tuple[Any, list[str]]:
    """A fresh annotator on ``/vote``, and the list of vote posts the page sends."""
    page = new_page(browser, "desktop", javascript=True)
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.goto(f"{base}/vote")
    page.wait_for_selector("#vote-form")
    return page, posts


def _focused(page: Any, selector: str) -> bool:
    result: bool = page.evaluate("(s) => document.activeElement.matches(s)", selector)
    return result


def test_focus_starts_on_the_battle_and_the_first_tab_reaches_the_skip_link(
    long_site: tuple[str, str], browser: Any
) -> None:
    base, _ = long_site
    page, _posts = _vote_page(browser, base)
    assert _focused(page, "h1#area-heading")
    assert page.locator("h1#area-heading").inner_text() == "Which answer is better?"
    page.keyboard.press("Tab")
    assert _focused(page, "a.skip-link")
    target = page.locator("a.skip-link").get_attribute("href")
    assert target == "#battle-area" and page.locator(target).count() == 1
    page.keyboard.press("Enter")
    assert _focused(page, "#battle-area")
    # Tab order from the battle: both answer boxes (scrollable, so focusable), then the vote controls.
    stops = []
    for _ in range(7):
        page.keyboard.press("Tab")
        stops.append(
            page.evaluate(
                "() => document.activeElement.getAttribute('aria-labelledby') || "
                "document.activeElement.textContent.trim()"
            )
        )
    assert stops == [
        "answer-a-title",
        "answer-b-title",
        "A is better A",
        "B is better B",
        "Tie T",
        "Both are bad X",
        "Skip S",
    ]
    assert page.locator('button[value="model_a"]').get_attribute("aria-keyshortcuts") == "a"
    name = page.get_by_role("button", name="A is better", exact=True)
    assert name.count() == 1  # the key hint stays out of the accessible name
    page.context.close()


def test_one_key_votes_then_focus_and_title_follow(long_site: tuple[str, str], browser: Any) -> None:
    base, _ = long_site
    page, posts = _vote_page(browser, base)
    assert page.title() == "Vote · Arena"
    page.keyboard.press("b")  # right after the page loads, nothing clicked
    page.wait_for_selector(".reveal")
    assert len(posts) == 1
    assert page.title() == "Vote recorded · Arena"
    assert not _focused(page, "body")
    assert _focused(page, "h1#area-heading") and "B is better" in page.locator("h1").inner_text()
    status = page.locator("#vote-status").inner_text()
    assert status.startswith("Vote recorded")
    assert all(n <= MAX_LIVE_REGION_CHARS for n in live_region_lengths(page))
    assert page.locator("#battle-area[aria-live]").count() == 0

    page.keyboard.press("n")  # next battle
    page.wait_for_selector("#vote-form")
    assert page.title() == "Vote · Arena"
    assert _focused(page, "h1#area-heading")
    before_controls = page.evaluate(
        "() => !!(document.activeElement.compareDocumentPosition(document.getElementById('vote-form'))"
        " & Node.DOCUMENT_POSITION_FOLLOWING)"
    )
    assert before_controls
    lengths = live_region_lengths(page)
    assert lengths and all(n <= MAX_LIVE_REGION_CHARS for n in lengths)
    assert page.locator("#vote-count").inner_text() == "1"
    page.context.close()


def test_stray_keys_outside_the_battle_do_nothing(long_site: tuple[str, str], browser: Any) -> None:
    base, _ = long_site
    page, posts = _vote_page(browser, base)
    header_link = page.locator('.site-header nav a[href="/leaderboard"]')
    header_link.focus()
    for key in ("x", "a", "b", "t", "s", "n"):
        page.keyboard.press(key)
    page.wait_for_timeout(SETTLE_MS)
    assert posts == [] and page.url == f"{base}/vote"
    assert page.locator("#vote-form").count() == 1 and _focused(page, '.site-header a[href="/leaderboard"]')
    page.context.close()


def test_enter_keeps_its_meaning_on_the_reveal(long_site: tuple[str, str], browser: Any) -> None:
    base, _ = long_site
    page, _posts = _vote_page(browser, base)
    page.keyboard.press("a")
    page.wait_for_selector(".reveal")
    page.locator('.site-header nav a[href="/leaderboard"]').focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"{base}/leaderboard")
    assert page.locator("h1").inner_text() == "Leaderboard"
    page.context.close()


def test_the_reveal_page_shows_the_prompt_above_the_answers_and_the_names_as_written(
    long_site: tuple[str, str], browser: Any
) -> None:
    base, _ = long_site
    page = new_page(browser, "desktop", javascript=False)
    page.goto(f"{base}/vote")
    page.locator('button[value="tie"]').click()  # a plain form post lands on the reveal page
    page.wait_for_url(f"{base}/battles/*")
    landing = page.url
    page.unroute("**/static/arena.js")
    page.goto(landing)  # the same page, now with the site's script
    assert page.title() == "Vote recorded · Arena"
    prompt_lang = page.locator(".reveal .prompt .md").get_attribute("lang")
    assert prompt_lang in ("en", "de")
    # the prompt stands above both answers, which sit under their model names
    above = "r => r.querySelector('.prompt').compareDocumentPosition(r.querySelector('.reveal-grid')) & 4"
    assert page.eval_on_selector(".reveal", above)
    assert page.locator(f'.reveal .answer .md[lang="{prompt_lang}"]').count() == 2
    for side in ("a", "b"):
        written = page.locator(f"#answer-{side}-title .as-written")
        name = page.locator(f'.model-name[data-side="{side.upper()}"]').inner_text()
        assert written.inner_text() == name  # not set in capitals like the rest of the label
    # the page's own move of focus to the heading frames nothing
    framed = "h => { h.focus(); return getComputedStyle(h).outlineStyle; }"
    assert page.eval_on_selector("#area-heading", framed) == "none"
    page.locator('.site-header nav a[href="/leaderboard"]').focus()
    page.keyboard.press("n")  # focus is outside the battle: no shortcut
    page.wait_for_timeout(SETTLE_MS)
    assert page.url == landing and page.locator(".reveal").count() == 1
    page.locator("#next-battle").focus()
    page.keyboard.press("Enter")  # the link's own action, loaded in place by the script
    page.wait_for_selector("#vote-form")
    assert _focused(page, "h1#area-heading")
    # The judged battle's answers leave with it: no second copy of the answers' ids.
    assert page.locator("#answer-a-title").count() == 1
    page.context.close()


def test_shortcuts_switch_off_and_stay_off(long_site: tuple[str, str], browser: Any) -> None:
    base, _ = long_site
    page, posts = _vote_page(browser, base)
    switch = page.get_by_role("checkbox", name="Keyboard shortcuts (single keys: A, B, T, X, S, N)")
    assert switch.is_visible() and switch.is_checked()
    switch.uncheck()
    page.locator("h1#area-heading").focus()
    page.keyboard.press("b")
    page.wait_for_timeout(SETTLE_MS)
    assert posts == [] and page.locator("#vote-form").count() == 1
    assert page.locator('button[value="model_b"]').get_attribute("aria-keyshortcuts") is None
    page.reload()
    page.wait_for_selector("#vote-form")
    assert not page.get_by_role(
        "checkbox", name="Keyboard shortcuts (single keys: A, B, T, X, S, N)"
    ).is_checked()
    page.keyboard.press("b")
    page.wait_for_timeout(SETTLE_MS)
    assert posts == []
    # Buttons still vote from the keyboard the native way.
    page.locator('button[value="model_b"]').focus()
    page.keyboard.press("Enter")
    page.wait_for_selector(".reveal")
    assert len(posts) == 1
    page.context.close()


def test_live_board_can_be_paused(long_site: tuple[str, str], browser: Any) -> None:
    base, _ = long_site
    page = new_page(browser, "desktop", javascript=True)
    api_calls: list[str] = []
    page.on("request", lambda r: api_calls.append(r.url) if r.url.endswith("/api/leaderboard") else None)
    page.clock.install()
    page.goto(f"{base}/leaderboard/live")
    pause = page.get_by_role("button", name="Pause updates")
    assert pause.is_visible() and pause.get_attribute("aria-pressed") == "false"
    page.clock.run_for(5_500)
    page.wait_for_timeout(SETTLE_MS)
    assert len(api_calls) == 1
    pause.click()
    assert pause.get_attribute("aria-pressed") == "true"
    page.clock.run_for(30_000)
    page.wait_for_timeout(SETTLE_MS)
    assert len(api_calls) == 1
    page.context.close()
