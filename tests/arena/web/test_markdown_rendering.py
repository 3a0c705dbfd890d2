"""Answers that render: math to MathML and code highlighted on the server, through the same sanitiser."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from arena.web.markdown import CODE_CLASSES, render_markdown
from tests.arena.web.test_vote_pages import FRAGMENT, battle_form


def test_inline_and_display_math_become_mathml() -> None:
    html = render_markdown("Inline $a\\,b$ and \\(x^2\\).\n\n$$\\frac{1}{2}$$\n\n\\[ y = \\sqrt{x} \\]\n")
    assert html.count("<math") == 4 and "$" not in html and "\\(" not in html
    assert html.count('display="block"') == 2
    assert "<mspace" in html  # the thin space \, survives instead of turning into a comma
    assert "<mfrac>" in html and "<msqrt>" in html and "<msup>" in html


def test_prices_and_code_spans_stay_text() -> None:
    html = render_markdown("It costs $5 to $10.\n\nSet `$HOME` and `$PATH` first.")
    assert "<math" not in html
    assert "$5 to $10" in html and "<code>$HOME</code>" in html and "<code>$PATH</code>" in html


def test_a_formula_carrying_markup_is_shown_as_source() -> None:
    html = render_markdown("$\\text{<img src=x onerror=alert(1)>}$ then $a<b$")
    assert "<img" not in html and "onerror" not in html.replace("onerror=alert(1)&gt;", "")
    assert '<code class="math-source">' in html
    assert "<mo>&lt;</mo>" in html  # a real less-than sign in a formula is still math


def test_code_blocks_are_highlighted_with_token_classes_only() -> None:
    html = render_markdown("```python\ndef f(x):\n    return x  # done\n```\n")
    classes = set(re.findall(r'<span class="([^"]+)"', html))
    assert {"k", "nf", "c1"} <= classes <= CODE_CLASSES
    assert '<code class="language-python">' in html
    plain = render_markdown("```\nno language here\n```\n")
    assert "<span" not in plain and "no language here" in plain


def test_classes_outside_the_token_set_are_stripped() -> None:
    html = render_markdown('<span class="evil k">x</span>')
    assert "evil" not in html or "&lt;span" in html  # raw HTML is text, never an element


def test_the_reveal_shows_both_answers_under_the_names(client: TestClient, seeded: Engine) -> None:
    form = battle_form(client)
    posted: Any = client.post("/vote", data={**form, "winner": "model_a"}, headers=FRAGMENT)
    assert posted.status_code == 200
    result = posted.context["result"]
    text = posted.text
    for side, name in (("A", result.model_a), ("B", result.model_b)):
        assert f'Answer {side} · <span class="as-written">{name}</span>' in text
    assert text.count('class="answer-body"') == 2
    assert text.index(result.model_a) < text.index('id="answer-a-title"')
