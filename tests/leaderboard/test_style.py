"""Style features from answer texts."""

from __future__ import annotations

import numpy as np
import pytest

from leaderboard.style import STYLE_FEATURES, count_style, normalise_differences, style_differences

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
    length, headers, lists, bold = count_style(MARKDOWN)
    assert length == len(MARKDOWN)
    assert headers == 2
    assert lists == 4
    assert bold == 2
    assert list(count_style("plain text")[1:]) == [0, 0, 0]


def test_differences_are_relative_signed_and_scaled() -> None:
    diffs = style_differences([MARKDOWN, "short", "same"], ["plain answer here", MARKDOWN, "same"])
    assert diffs.names == STYLE_FEATURES
    assert diffs.values.shape == (3, 4)
    assert diffs.values[0, 0] > 0 > diffs.values[1, 0]
    assert np.all(diffs.values[2] == 0)
    again, _ = normalise_differences(
        np.array([count_style(MARKDOWN)]), np.array([count_style("plain answer here")]), scale=diffs.scale
    )
    np.testing.assert_allclose(again[0], diffs.values[0])
    raw = (len(MARKDOWN) - 17) / (len(MARKDOWN) + 17)
    assert diffs.values[0, 0] * diffs.scale[0] == pytest.approx(raw)


def test_mismatched_lengths_raise() -> None:
    with pytest.raises(ValueError):
        style_differences(["a"], [])
