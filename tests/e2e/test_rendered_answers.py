"""Answers that render, in real headless Chromium at 1280 px and 390 px: math as MathML (no raw ``$``), code
with highlight spans, the reveal with both answers, ``/docs`` listing the operations, and the board with
its style switch. Screenshots go to ``test-artifacts/`` (rendered-*.png) for people to look at.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from arena.app import create_app
from arena.publish.recompute import SliceSpec
from arena.publish.snapshots import publish_slices
from leaderboard.bt.request import FitRequest
from tests.e2e.a11y import blocking_violations, new_page, page_width
from tests.e2e.conftest import ARTIFACTS, serve
from tests.factories import make_settings
from votes.db import make_engine
from votes.files.catalog_records import CatalogRecord
from votes.imports.catalog import import_catalog_records
from votes.imports.demo import DEMO_MODELS, DemoPrompt, simulate_votes
from votes.imports.runs import import_battle_records
from votes.migrate import upgrade_database

pytestmark = pytest.mark.e2e

MODELS = DEMO_MODELS[:3]
PROMPTS = (
    DemoPrompt("render-1", "math", "en", "Solve $x^2 = 2$ and show a check in code.", "", ""),
    DemoPrompt("render-2", "math", "en", "What is the integral of $e^{-x^2}$ over the real line?", "", ""),
)
MATH_ANSWER = (
    "The solutions are $x = \\pm\\sqrt{2}$, since $x\\,x = 2$. In display form:\n\n"
    "$$\\int_{-\\infty}^{\\infty} e^{-x^2}\\,dx = \\sqrt{\\pi}$$\n\n"
    "and inline with brackets: \\(a^2 + b^2 = c^2\\)."
)
CODE_ANSWER = (
    "Check it numerically:\n\n```python\nimport math\n\ndef check(x: float) -> bool:\n"
    "    # the square should come back to two\n    return math.isclose(x * x, 2.0)\n```\n\n"
    "Both roots pass."
)
PLAIN_ANSWER = "The answer is the square root of two, positive or negative."
ANSWERS = (MATH_ANSWER, CODE_ANSWER, PLAIN_ANSWER)
VIEWPORT_NAMES = {"desktop": "1280", "phone": "390"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tmp = tmp_path_factory.mktemp("e2e-rendered")
    url = f"sqlite:///{tmp}/arena.db"
    upgrade_database(url)
    engine = make_engine(url)
    catalog = [
        CatalogRecord(
            where=f"render {p.id}",
            prompt_id=p.id,
            prompt=p.text,
            category=p.category,
            language=p.language,
            model=m.name,
            output=answer + ("\n\nA longer closing sentence follows here." * (k + 1) if k else ""),
        )
        for k, p in enumerate(PROMPTS)
        for m, answer in zip(MODELS, ANSWERS, strict=True)
    ]
    with engine.begin() as conn:
        import_catalog_records(conn, catalog, file="<render catalog>")
        import_battle_records(
            conn, simulate_votes(300, seed=3, models=MODELS, prompts=PROMPTS), file="<votes>"
        )
    rows = publish_slices(
        engine,
        snapshot_dir=tmp / "snapshots",
        request=FitRequest(n_rounds=30, random_state=1, style=("length", "markdown")),
        slices=[SliceSpec()],
        plots=False,
    )
    app = create_app(make_settings(url, snapshot_dir=str(tmp / "snapshots")), engine=engine, seed=2)
    try:
        with serve(app) as base:
            yield base, rows[0].id
    finally:
        engine.dispose()


def _shot(page: Any, name: str, viewport: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"rendered-{name}-{VIEWPORT_NAMES[viewport]}.png"), full_page=True)


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_math_code_reveal_docs_and_style_board(site: tuple[str, str], browser: Any, viewport: str) -> None:
    base, _ = site
    page = new_page(browser, viewport, javascript=True)
    width = page.viewport_size["width"]
    seen_math = seen_code = False
    for _ in range(12):  # battles come in random pairs: look until both kinds were on screen
        page.goto(f"{base}/vote")
        answers = page.locator(".answers .answer .md")
        text = " ".join(answers.all_inner_texts())
        math = page.locator(".answers .md math").count()
        spans = page.locator(".answers .md pre code span.k").count()
        assert "\\(" not in text and "$$" not in text
        if math and not seen_math:
            assert "$" not in text.replace("$HOME", "")  # no raw TeX left
            assert page.locator('.answers .md math[display="block"]').count() >= 1
            _shot(page, "vote-math", viewport)
            seen_math = True
        if spans and not seen_code:
            _shot(page, "vote-code", viewport)
            seen_code = True
        if seen_math and seen_code:
            break
    assert seen_math and seen_code
    assert page_width(page) <= width
    assert blocking_violations(page) == []
    page.locator('button[value="model_a"]').click()
    page.wait_for_selector(".reveal")
    assert page.locator(".reveal .reveal-card .answer .md").count() == 2
    assert page.locator(".reveal .reveal-card .model-name").count() == 2
    _shot(page, "reveal", viewport)
    assert blocking_violations(page) == []
    page.goto(f"{base}/docs")
    assert page.locator("h1").count() == 1
    for name in ("Next battle", "Cast a vote", "Latest published board"):
        assert page.get_by_text(name, exact=False).count() >= 1
    _shot(page, "docs", viewport)
    page.goto(f"{base}/leaderboard?board=style")
    assert page.locator('.board-switch a[aria-current="page"]').inner_text() == "Style-controlled"
    assert page.locator("#published-standings td.rank-change").count() == len(MODELS)
    _shot(page, "board-style", viewport)
    assert blocking_violations(page) == []
    page.context.close()
