"""Model names, aliases and roles as every door takes them in: one rule, so a name cannot pass as another.

A name shows up on the board, in plots, in CSV files opened in spreadsheets and in the reveal. A trailing
space, a case variant, an invisible character or a RIGHT-TO-LEFT OVERRIDE would make a new model that
reads like an existing one, and a leading ``=`` makes a spreadsheet run the cell. So every place that
creates a model (file imports of battles and catalogs, ``arena models add``, the admin upload, the demo)
passes the name through :func:`model_name`: NFC-normalised and stripped, with control, format and
surrogate characters and a leading ``= + - @`` refused. A name that differs from an existing one only in
case is allowed but reported (:func:`case_collisions`), naming both. An alias the operator gives a model
(:func:`model_alias`) is a name too, and long enough for the identity-leak filter to look for it.

:class:`ModelRole` is the one table of what a model does here: a contestant answers in battles, a judge
only judges them (it is never paired, never asked in a live battle, never on a board), and a model may be
both.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Iterable
from enum import StrEnum

__all__ = [
    "ALIAS_MIN",
    "FORMULA_STARTS",
    "JUDGE_LABEL",
    "KNOWN_FAMILIES",
    "MODEL_NAME_MAX",
    "ModelRole",
    "case_collisions",
    "is_judge",
    "model_alias",
    "model_name",
    "model_role",
]

MODEL_NAME_MAX = 200
#: Names shorter than this are not looked for in answers (too many accidental matches; see
#: :mod:`votes.review.leaks`), so an alias must be at least this long.
ALIAS_MIN = 3
#: Cells starting with these are formulas to a spreadsheet.
FORMULA_STARTS = ("=", "+", "-", "@")
# Cc control, Cf format (bidi overrides, zero-width space, BOM ...), Cs surrogates, Co private use:
# none of them has a place in a name a person reads.
_REFUSED_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "an invisible formatting character",
    "Cs": "a lone surrogate",
    "Co": "a private-use character",
}

#: Families of well-known models: a pattern on the model's name -> names that give the family away
#: (the leak review looks for those names in answers; agreement reports find a judge's own family).
#: Annotator labels that name an LLM judge: ``judge:<model>`` (arena judge) or ``llm-<model>`` (imports).
JUDGE_LABEL = re.compile(r"^(judge:|llm-)(?P<model>.+)$")


def is_judge(label: str) -> bool:
    """Whether an annotator label names an LLM judge (:data:`JUDGE_LABEL`) rather than a person."""
    return JUDGE_LABEL.match(label) is not None


KNOWN_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"gpt|chatgpt|openai|^o1|^o3", ("OpenAI", "ChatGPT", "GPT-4", "GPT-4o", "GPT-3.5", "GPT-3", "GPT")),
    (r"claude|anthropic", ("Anthropic", "Claude")),
    (r"bard|gemini|gemma|palm", ("Google", "Google DeepMind", "DeepMind", "Bard", "Gemini", "Gemma", "PaLM")),
    (r"llama|meta", ("Meta", "Meta AI", "LLaMA", "Llama")),
    (r"vicuna|lmsys", ("Vicuna", "LMSYS", "Large Model Systems Organization")),
    (r"mistral|mixtral", ("Mistral", "Mistral AI", "Mixtral")),
    (r"qwen", ("Qwen", "Alibaba", "Alibaba Cloud", "Tongyi")),
    (r"deepseek", ("DeepSeek",)),
    (r"command|cohere", ("Cohere", "Command R")),
    (r"phi-|phi\d|microsoft", ("Microsoft", "Phi")),
    (r"grok|xai", ("xAI", "Grok")),
)

log = logging.getLogger(__name__)


class ModelRole(StrEnum):
    """What a model does in the arena (the ``model.role`` column)."""

    CONTESTANT = "contestant"
    JUDGE = "judge"
    BOTH = "both"

    @property
    def competes(self) -> bool:
        """Answers in battles: paired, asked in live battles, generated for, on the boards."""
        return self is not ModelRole.JUDGE

    @property
    def judges(self) -> bool:
        """May judge with `arena judge`."""
        return self is not ModelRole.CONTESTANT

    @classmethod
    def competing(cls) -> tuple[str, ...]:
        """The stored values of the roles that compete (for a SQL ``IN``)."""
        return tuple(r.value for r in cls if r.competes)


def model_role(value: str) -> ModelRole:
    """A role from its name (any case); :class:`ValueError` lists the roles."""
    try:
        return ModelRole(str(value).strip().lower())
    except ValueError:
        roles = ", ".join(r.value for r in ModelRole)
        raise ValueError(f"unknown role {str(value)[:40]!r}; a model's role is one of {roles}") from None


def model_name(value: str) -> str:
    """The stored form of a model name (NFC, stripped); :class:`ValueError` says why one is refused.

    The reason names characters by code point, never by echoing them, so a log or terminal shows what
    was refused without being steered by it.
    """
    if not isinstance(value, str):
        raise ValueError(f"a model name must be a string, got {type(value).__name__}")
    for ch in value:  # before normalising: NFC must never see a lone surrogate
        category = unicodedata.category(ch)
        if category in _REFUSED_CATEGORIES:
            raise ValueError(f"model name contains {_REFUSED_CATEGORIES[category]} (U+{ord(ch):04X})")
    name = unicodedata.normalize("NFC", value).strip()
    if not name:
        raise ValueError("a model name must not be empty")
    if len(name) > MODEL_NAME_MAX:
        raise ValueError(f"a model name is longer than {MODEL_NAME_MAX} characters")
    if name.startswith(FORMULA_STARTS):
        raise ValueError(f"a model name must not start with {name[0]!r} (a spreadsheet would run it)")
    return name


def model_alias(value: str) -> str:
    """An operator's alias of a model in its stored form: a name (:func:`model_name`) of at least
    :data:`ALIAS_MIN` characters; :class:`ValueError` says why one is refused."""
    alias = model_name(value)
    if len(alias) < ALIAS_MIN:
        raise ValueError(
            f"an alias needs at least {ALIAS_MIN} characters: shorter names are not looked for in answers"
        )
    return alias


def case_collisions(new: Iterable[str], existing: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs ``(new, existing)`` that differ only in case (``casefold``), each logged as a warning."""
    known: dict[str, str] = {}
    for name in existing:
        known.setdefault(name.casefold(), name)
    found: list[tuple[str, str]] = []
    for name in sorted(set(new)):
        other = known.get(name.casefold())
        if other is not None and other != name:
            found.append((name, other))
            log.warning("new model %r differs only in case from the existing model %r", name, other)
        known.setdefault(name.casefold(), name)
    return found
