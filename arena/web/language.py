"""The HTML ``lang`` value of a prompt's language, so screen readers read each text in its own language."""

from __future__ import annotations

import re

from leaderboard.snapshot.titles import LANGUAGES

__all__ = ["language_tag"]

# Catalogs name a language either by a BCP 47 tag ("de", "pt-BR") or, like Chatbot Arena, by its English
# name ("German"): the names of the one table of languages (leaderboard.snapshot.titles), read the other way.
_NAMES = {name.lower(): code for code, name in LANGUAGES.items()}
_TAG = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{1,8})*$")


def language_tag(language: str | None) -> str | None:
    """``lang`` for a prompt's ``language``: a BCP 47 tag, ``""`` when unknown, ``None`` when unset.

    ``None`` lets the text inherit the page's language; ``""`` tells assistive technology that the
    language is not known (rather than wrongly claiming the page's).
    """
    if language is None or not language.strip():
        return None
    value = language.strip()
    named = _NAMES.get(value.lower())
    if named is not None:
        return named
    if _TAG.match(value):
        return value.replace("_", "-")
    return ""
