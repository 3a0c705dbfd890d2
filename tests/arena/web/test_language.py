"""The ``lang`` value of a prompt's language: tags pass through, English names map, the rest is unknown."""

from __future__ import annotations

import pytest

from arena.web.language import language_tag


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ("de", "de"),
        ("pt-BR", "pt-BR"),
        ("zh_Hant", "zh-Hant"),
        ("German", "de"),
        ("english", "en"),
        (" French ", "fr"),
        ("Klingon", ""),
        ("not a language", ""),
        (None, None),
        ("", None),
    ],
)
def test_language_tag(language: str | None, expected: str | None) -> None:
    assert language_tag(language) == expected
