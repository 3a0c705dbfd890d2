"""Identity leaks: answers in which a model names itself or its maker.

A blind battle is only blind if the answers do not sign themselves. "As an AI language model developed by
OpenAI" or "I am Claude" tells the annotator who wrote it, and a vote cast knowing the names measures
brand loyalty, not quality. The detector is pure (text in, matches out); pairing uses it to keep such
outputs out of battles, and :func:`leak_report` lists them for an admin.

Matching is case-insensitive on whole words (a name must not be glued to other letters or digits of any
script, so "Claude" matches "Sir Claude" and "á la Claude" but neither "Claudette" nor "Claudeé"). A
model's aliases are its own name (with separators optional: ``gpt4`` matches "GPT-4" and "gpt 4"), the
leading word of its name (``vicuna-13b`` -> "Vicuna"), its organisation, the names of its family from
:data:`votes.names.KNOWN_FAMILIES`, and the aliases the operator gave it (``arena models set NAME --alias
ALIAS``). Names shorter than :data:`votes.names.ALIAS_MIN` are never looked for. Each match records
whether it sits in a self-identification phrase ("I am ...", "developed by ...").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from votes.names import ALIAS_MIN, KNOWN_FAMILIES

__all__ = [
    "GENERIC_WORDS",
    "IdentityLeak",
    "LeakDetector",
    "model_aliases",
]


#: Leading words of model names too common in answers to count as a name ("model-7b" is not "model").
GENERIC_WORDS = frozenset(
    {"model", "models", "chat", "assistant", "bot", "llm", "lm", "base", "instruct", "test", "demo", "the",
     "large", "language", "open", "mini", "small", "tiny", "big", "new", "my", "ai"}
)  # fmt: skip

# Phrases in which a name identifies the writer, looked for just before the name.
_SELF_CONTEXT = re.compile(
    r"(?:\bI\s+am|\bI'm|\bI\s+was|\bmy\s+name\s+is|\bcall\s+me|\bthis\s+is|"
    r"\b(?:developed|created|made|trained|built|designed|programmed|released)\s+by|"
    r"\bas\s+an?\s+(?:AI\s+)?(?:language\s+)?model\s+(?:from|by|of)|\bam\s+a\s+product\s+of)"
    r"[\s,]*(?:an?\s+|the\s+)?(?:AI\s+|assistant\s+|model\s+|language\s+model\s+)*(?:called\s+|named\s+)?$",
    re.IGNORECASE,
)
_SELF_WINDOW = 60


@dataclass(frozen=True)
class IdentityLeak:
    """One name found in an answer.

    Attributes
    ----------
    alias : the text matched, as written in the answer
    start, end : its position in the answer
    self_reference : whether it follows a self-identification phrase ("I am", "developed by", ...)
    """

    alias: str
    start: int
    end: int
    self_reference: bool


def _name_pattern(alias: str) -> str:
    # Separators inside a name are optional and interchangeable, and so is the break between letters and
    # digits: "gpt4" matches "GPT-4", "gpt 4" and "gpt4".
    tokens = re.findall(r"[A-Za-z]+|\d+|[^\sA-Za-z\d\-_.]", alias)
    return r"[\s\-_.]?".join(re.escape(t) for t in tokens)


def model_aliases(name: str, organisation: str | None = None, extra: Sequence[str] = ()) -> tuple[str, ...]:
    """The names that give away a model: its name, its leading word, its maker, its family and the
    ``extra`` aliases the operator gave it.

    Aliases shorter than three characters are dropped (too many accidental matches): a model named "J"
    or "ab" has no alias of its own, and only its maker, family or an operator's alias can give it away.
    """
    aliases = {name, *extra}
    lead = re.match(r"[A-Za-z]+", name)
    if lead and lead.group(0).lower() not in GENERIC_WORDS:
        aliases.add(lead.group(0))
    if organisation:
        aliases.add(organisation)
    lowered = name.lower()
    for pattern, names in KNOWN_FAMILIES:
        family = re.compile(rf"(?<![a-z])(?:{pattern})")
        if family.search(lowered) or (organisation and family.search(organisation.lower())):
            aliases.update(names)
    unique = {a.lower(): a for a in sorted(aliases, reverse=True) if len(a) >= ALIAS_MIN}
    return tuple(sorted(unique.values()))


#: Matches nothing: the pattern of a model with no alias long enough to look for (a name such as "J"). An
#: empty alternation would match the empty string between any two words, and flag every answer.
_NOTHING = re.compile(r"(?!)")


@lru_cache(maxsize=4096)
def _compile(aliases: tuple[str, ...]) -> re.Pattern[str]:
    if not aliases:
        return _NOTHING
    # Longest first, so "Google DeepMind" wins over "Google".
    ordered = sorted(aliases, key=len, reverse=True)
    body = "|".join(_name_pattern(a) for a in ordered)
    # Whole words: not glued to a letter or digit of any script (``[^\W_]``: a word character but "_").
    return re.compile(rf"(?<![^\W_])(?:{body})(?![^\W_])", re.IGNORECASE)


class LeakDetector:
    """Finds, in an answer, the names of the model that wrote it.

    Parameters
    ----------
    models : mapping of model name -> organisation (or None)
        The models whose answers will be checked.
    extra : mapping of model name -> the operator's aliases of it, optional
    """

    def __init__(
        self, models: Mapping[str, str | None], extra: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        extra = extra or {}
        self._aliases = {name: model_aliases(name, org, extra.get(name, ())) for name, org in models.items()}

    def aliases(self, model: str) -> tuple[str, ...]:
        """The aliases looked for in ``model``'s answers."""
        known = self._aliases.get(model)
        return model_aliases(model) if known is None else known

    def find(self, model: str, text: str) -> list[IdentityLeak]:
        """Every mention of ``model``'s own names in ``text``, in order."""
        pattern = _compile(self.aliases(model))
        found: list[IdentityLeak] = []
        for match in pattern.finditer(text):
            before = text[max(0, match.start() - _SELF_WINDOW) : match.start()]
            found.append(
                IdentityLeak(
                    alias=match.group(0),
                    start=match.start(),
                    end=match.end(),
                    self_reference=bool(_SELF_CONTEXT.search(before)),
                )
            )
        return found

    def leaks(self, model: str, text: str) -> bool:
        """Whether ``text`` names ``model`` or its maker anywhere."""
        return _compile(self.aliases(model)).search(text) is not None

    def scan(self, outputs: Iterable[tuple[str, str]]) -> list[list[IdentityLeak]]:
        """:meth:`find` over ``(model, text)`` pairs."""
        return [self.find(model, text) for model, text in outputs]
