"""What a board is called for people: "Coding", "German", "Coding, German", from its slice key.

A board's key (:func:`leaderboard.snapshot.folder.slice_label`: ``all``, ``category=coding``,
``language=de``) stays what URLs, file names and snapshot ids are made of; pages and the command line show
its title instead. A language is named from :data:`LANGUAGES` (its code, BCP 47 like ``de`` or ``pt-BR``,
or the English name some catalogs use, as Chatbot Arena's does); a category, or a language not in the
table, is the raw value tidied (underscores and hyphens read as spaces, the first letter capitalised), so an
unknown key never shows as ``category=...``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "LANGUAGES",
    "OVERALL_TITLE",
    "board_notes",
    "language_name",
    "left_off_note",
    "slice_title",
    "tidy_words",
    "unpublished_note",
]

#: The overall board's title (its key is ``all``).
OVERALL_TITLE = "Overall"

#: English names of the languages that occur in public arena data, by ISO 639-1 code. The web pages read
#: the same table the other way round (:mod:`arena.web.language`: a name to its ``lang`` tag).
LANGUAGES: dict[str, str] = {
    "ar": "Arabic", "zh": "Chinese", "cs": "Czech", "da": "Danish", "nl": "Dutch", "en": "English",
    "fi": "Finnish", "fr": "French", "de": "German", "el": "Greek", "he": "Hebrew", "hi": "Hindi",
    "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese", "ko": "Korean",
    "no": "Norwegian", "fa": "Persian", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian",
    "ru": "Russian", "es": "Spanish", "sv": "Swedish", "th": "Thai", "tr": "Turkish",
    "uk": "Ukrainian", "vi": "Vietnamese",
}  # fmt: skip

_BY_NAME = {name.lower(): name for name in LANGUAGES.values()}
_SEPARATORS = re.compile(r"[\s_\-]+")


def tidy_words(value: str) -> str:
    """A raw key as words: separators read as spaces, the first letter capitalised (``hard_prompts`` ->
    ``Hard prompts``); the rest is kept as written (``GPT-4 answers`` stays readable)."""
    words = _SEPARATORS.sub(" ", value).strip()
    return words[:1].upper() + words[1:] if words else value


def language_name(code: str) -> str:
    """``de`` -> ``German``, ``pt-BR`` -> ``Portuguese (BR)``, ``German`` -> ``German``; otherwise the
    value tidied (:func:`tidy_words`)."""
    value = code.strip()
    primary, _, region = value.replace("_", "-").partition("-")
    name = LANGUAGES.get(primary.lower())
    if name is not None:
        return f"{name} ({region.upper()})" if region else name
    return _BY_NAME.get(value.lower(), tidy_words(value))


def slice_title(label: str) -> str:
    """The title of the board whose key is ``label`` (``all``, ``category=coding``,
    ``category=coding&language=de``): ``Overall``, ``Coding``, ``Coding, German``. A part that is not
    ``key=value`` is tidied as it is."""
    if label == "all" or not label:
        return OVERALL_TITLE
    titles = []
    for part in label.split("&"):
        key, sep, value = part.partition("=")
        if not sep:
            titles.append(tidy_words(part))
        elif key == "language":
            titles.append(language_name(value))
        else:
            titles.append(tidy_words(value))
    return ", ".join(titles)


def _votes(n: Any) -> str:
    return f"{n:,} vote" if n == 1 else f"{n:,} votes"


def left_off_note(metadata: Mapping[str, Any]) -> str | None:
    """What a category or language board's metadata says of the models it left off (``left_off``), as a
    sentence; None when it left none off."""
    note = metadata.get("left_off")
    if not isinstance(note, Mapping) or not note.get("models"):
        return None
    who = ", ".join(f"{m['model']} ({_votes(m['votes'])})" for m in note["models"])
    return f"Left off this board, with fewer than {_votes(note['min_model_votes'])} on it: {who}."


def unpublished_note(metadata: Mapping[str, Any]) -> str | None:
    """The categories and languages an overall board's publish found too few votes for
    (``slice_boards``), as a sentence; None when every one got a board."""
    note = metadata.get("slice_boards")
    if not isinstance(note, Mapping):
        return None
    missing = [s for s in note.get("slices", ()) if isinstance(s, Mapping) and not s.get("published")]
    if not missing:
        return None
    listed = ", ".join(f"{slice_title(str(s['slice']))} ({_votes(s['counted'])})" for s in missing)
    return (
        f"No board yet, with fewer than {_votes(note['min_votes'])} among the models it would list: {listed}."
    )


def board_notes(metadata: Mapping[str, Any]) -> list[str]:
    """Every note of a board's metadata about what it leaves out (:func:`left_off_note`,
    :func:`unpublished_note`)."""
    return [n for n in (left_off_note(metadata), unpublished_note(metadata)) if n is not None]
