"""Pairing policies (probabilities, no repeats, sides) and the Markdown sanitiser."""

from __future__ import annotations

import random
from collections import Counter
from html.parser import HTMLParser

import pytest

from arena.voting.pairing import PairingCatalog, choose_battle, pair_weights
from arena.web.markdown import CODE_CLASSES, render_markdown
from votes.voting.battles import CatalogRow


def catalog(n_prompts: int = 3, models: tuple[int, ...] = (1, 2, 3)) -> PairingCatalog:
    rows = [
        CatalogRow(prompt_id=p, output_id=p * 100 + m, model_id=m)
        for p in range(1, n_prompts + 1)
        for m in models
    ]
    return PairingCatalog.from_rows(rows)


def test_uniform_probability_and_valid_battles() -> None:
    cat = catalog()
    rng = random.Random(0)
    sides: Counter[int] = Counter()
    for _ in range(300):
        choice = choose_battle(cat, policy="uniform", counts={}, seen=set(), rng=rng)
        assert choice is not None
        assert choice.output_a.model_id != choice.output_b.model_id
        assert choice.output_a.prompt_id == choice.output_b.prompt_id == choice.prompt_id
        assert choice.pair_probability == pytest.approx(1 / 3)
        sides[choice.output_a.model_id] += 1
    assert all(60 < n < 140 for n in sides.values())  # every model shown left about a third of the time


def test_balanced_favours_pairs_with_few_votes() -> None:
    counts = {(1, 2): 99, (1, 3): 0, (2, 3): 0}
    weights = pair_weights([(1, 2), (1, 3), (2, 3)], policy="balanced", counts=counts, power=1.0)
    assert weights == pytest.approx([0.01, 1.0, 1.0])
    rng = random.Random(1)
    picks: Counter[tuple[int, ...]] = Counter()
    for _ in range(500):
        choice = choose_battle(catalog(), policy="balanced", counts=counts, seen=set(), rng=rng)
        assert choice is not None
        pair = tuple(sorted((choice.output_a.model_id, choice.output_b.model_id)))
        picks[pair] += 1
        expected = 0.01 / 2.01 if pair == (1, 2) else 1 / 2.01
        assert choice.pair_probability == pytest.approx(expected)
    assert picks[(1, 2)] < 20


def test_active_prefers_close_pairs() -> None:
    w = pair_weights([(1, 2), (1, 3)], policy="active", counts={}, ratings={1: 1000, 2: 1010, 3: 1600})
    assert w[0] > 5 * w[1]


def test_no_battle_repeated_for_an_annotator() -> None:
    cat = catalog(n_prompts=2)
    rng = random.Random(2)
    seen: set[tuple[int, int, int]] = set()
    for _ in range(6):  # 2 prompts x 3 pairs
        choice = choose_battle(cat, policy="uniform", counts={}, seen=seen, rng=rng)
        assert choice is not None
        lo, hi = sorted((choice.output_a.model_id, choice.output_b.model_id))
        key = (choice.prompt_id, lo, hi)
        assert key not in seen
        seen.add(key)
    assert choose_battle(cat, policy="uniform", counts={}, seen=seen, rng=rng) is None


def test_single_model_prompts_give_no_battle() -> None:
    cat = PairingCatalog.from_rows([CatalogRow(prompt_id=1, output_id=1, model_id=1)])
    assert choose_battle(cat, policy="uniform", counts={}, seen=set(), rng=random.Random(0)) is None


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, attrs))


@pytest.mark.parametrize(
    "hostile",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "[click](javascript:alert(1))",
        "<svg onload=alert(1)><circle/></svg>",
        "<a href='javascript:alert(1)'>x</a>",
        "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "<iframe src=//evil.example></iframe>",
    ],
)
def test_markdown_never_emits_active_html(hostile: str) -> None:
    html = render_markdown(f"Answer:\n\n{hostile}\n\n```js\n{hostile}\n```")
    tags = _Tags()
    tags.feed(html)
    # span: the highlighted code's tokens, and nothing but Pygments' token classes on them
    assert {t for t, _ in tags.seen} <= {"p", "pre", "code", "a", "span"}
    for tag, attrs in tags.seen:
        if tag == "span":
            assert all(name == "class" and value in CODE_CLASSES for name, value in attrs)
        for name, value in attrs:
            assert not name.startswith("on")
            assert name != "href" or (value or "").startswith(("http://", "https://", "mailto:"))
    assert "Answer:" in html


def test_markdown_keeps_code_lists_tables_and_safe_links() -> None:
    html = render_markdown(
        "- one\n- two\n\n```python\nx = 1\n```\n\n|a|b|\n|-|-|\n|1|2|\n\n[ok](https://example.org)"
    )
    assert "<ul>" in html and '<code class="language-python">' in html and "<table>" in html
    assert 'href="https://example.org"' in html and 'rel="nofollow noopener noreferrer"' in html


def test_markdown_headings_sit_below_the_page_headings() -> None:
    html = render_markdown("# Title\n\n## Part\n\n### Sub\n\n###### Deepest\n\nSetext\n======\n")
    assert "<h1" not in html and "<h2" not in html
    assert "<h3>Title</h3>" in html and "<h4>Part</h4>" in html and "<h5>Sub</h5>" in html
    assert "<h6>Deepest</h6>" in html and "<h3>Setext</h3>" in html
