"""Style features from answer texts."""

from __future__ import annotations

import numpy as np
import pytest

from leaderboard.style.features import (
    STYLE_FEATURES,
    count_citations,
    count_style,
    estimate_tokens,
    normalise_differences,
    style_differences,
)
from tests.real_data import VICUNA_CATALOG

MARKDOWN = """# Title

Some **bold** text and __more bold__.

## Steps
1. first
2. second
- a bullet
* another

```python
# not a header
- not a list item
```
"""


def test_counts_markdown_and_ignores_code() -> None:
    length, headers, lists, bold, citations = count_style(MARKDOWN)
    assert length == estimate_tokens(MARKDOWN)
    assert headers == 2
    assert lists == 4
    assert bold == 2
    assert citations == 0
    assert list(count_style("plain text")[1:]) == [0, 0, 0, 0]
    assert count_style(MARKDOWN, tokens=123)[0] == 123  # a known token count wins over the estimate


def test_differences_are_relative_signed_and_scaled() -> None:
    diffs = style_differences([MARKDOWN, "short", "same"], ["plain answer here", MARKDOWN, "same"])
    assert diffs.names == STYLE_FEATURES
    assert diffs.values.shape == (3, len(STYLE_FEATURES))
    assert diffs.values[0, 0] > 0 > diffs.values[1, 0]
    assert np.all(diffs.values[2] == 0)
    again, _ = normalise_differences(
        np.array([count_style(MARKDOWN)]), np.array([count_style("plain answer here")]), scale=diffs.scale
    )
    np.testing.assert_allclose(again[0], diffs.values[0])
    short = estimate_tokens("plain answer here")
    raw = (estimate_tokens(MARKDOWN) - short) / (estimate_tokens(MARKDOWN) + short)
    assert diffs.values[0, 0] * diffs.scale[0] == pytest.approx(raw)


def test_mismatched_lengths_raise() -> None:
    with pytest.raises(ValueError):
        style_differences(["a"], [])


def test_token_estimate_counts_word_pieces() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("The cat sat.") == 4  # three words and a full stop
    assert estimate_tokens("internationalisation") == 4  # 20 letters: a rare word splits, ceil(20 / 6)
    assert estimate_tokens("1234567") == 3  # digits in groups of up to three
    assert estimate_tokens("日本語です") == 5  # one per ideograph or kana
    assert estimate_tokens("a\nb") == 3  # a line break is a token


def test_token_estimate_is_near_four_characters_per_token_on_real_answers() -> None:
    import gzip
    import json

    with gzip.open(VICUNA_CATALOG, "rt", encoding="utf-8") as lines:
        texts = [json.loads(line)["output"] for line in lines]
    ratio = sum(map(len, texts)) / sum(map(estimate_tokens, texts))
    assert 3.5 < ratio < 4.5, ratio  # the usual figure for English text under a ~100k-merge tokenizer


def test_citations_count_links_urls_and_numbered_references() -> None:
    text = (
        "See [the guide](https://example.com/guide) and https://example.org/x, as shown [1] and [2, 3].\n"
        "Indexing a[1] is code, [x](#anchor) is a local link, - [ ] a checkbox.\n"
        "```\nhttps://inside.code/ [9]\n```\n"
    )
    assert count_citations(text) == 5
    assert count_citations("no sources here") == 0
    assert count_style(text)[STYLE_FEATURES.index("citations")] == 5
