"""Identity-leak detector: on hand-made sentences and on the real Vicuna-80 answers (tests/data)."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.real_data import VICUNA_CATALOG
from votes.review.leaks import LeakDetector, model_aliases


def test_aliases_cover_name_maker_and_family() -> None:
    assert {"gpt4", "OpenAI", "ChatGPT", "GPT-4"} <= set(model_aliases("gpt4"))
    assert {"vicuna-13b", "Vicuna", "LMSYS"} <= set(model_aliases("vicuna-13b"))
    assert "Acme Labs" in model_aliases("widget-7b", "Acme Labs")
    # No family guessed from letters inside a word, and no generic leading word taken as a name.
    assert "OpenAI" not in model_aliases("foo1-chat")
    assert "model" not in {a.lower() for a in model_aliases("model-7b")}


@pytest.mark.parametrize(
    ("model", "text", "alias", "self_reference"),
    [
        ("gpt35", "As an AI language model developed by OpenAI, I cannot do that.", "OpenAI", True),
        ("gpt4", "I'm ChatGPT, a large language model.", "ChatGPT", True),
        ("gpt4", "Compared with gpt 4, older models...", "gpt 4", False),
        ("claude", "Hello! I AM CLAUDE.", "CLAUDE", True),
        ("llama-2-70b-chat", "I was trained by Meta AI.", "Meta AI", True),
        ("widget-7b", "Built by Acme Labs with care.", "Acme Labs", True),
    ],
)
def test_finds_self_naming(model: str, text: str, alias: str, self_reference: bool) -> None:
    detector = LeakDetector({"widget-7b": "Acme Labs"})
    found = detector.find(model, text)
    assert [f.alias for f in found][:1] == [alias]
    assert found[0].self_reference is self_reference
    assert text[found[0].start : found[0].end] == alias
    assert detector.leaks(model, text)


@pytest.mark.parametrize(
    ("model", "text"),
    [
        ("claude", "Claudette and claudius went out."),  # whole words only
        ("gpt4", "As an AI language model, I cannot."),  # a tell, but no name
        ("gpt4", "Use Google Maps or ask Claude."),  # other makers' names do not identify this model
        ("bard", "Googleplex is a word; googled too."),
        ("vicuna-13b", "The vicunas of the Andes."),
        ("claude", "Claudeé et Éclaude"),  # glued to letters of another script: not a whole word
        ("qwen-7b", "qwen7b9 and 2qwen"),  # nor to digits
    ],
)
def test_ignores_near_misses(model: str, text: str) -> None:
    assert not LeakDetector({}).leaks(model, text)


@pytest.mark.parametrize("model", ["J", "ab", "7b"])
def test_a_name_too_short_to_look_for_flags_nothing(model: str) -> None:
    """A one- or two-character name has no alias: no answer names it, whatever it says (an empty pattern
    would match between any two words and keep every answer of the model out of battles)."""
    detector = LeakDetector({model: None})
    assert model_aliases(model) == ()
    for text in ("Paris is the capital of France.", "J", "ab ab", "", "I am J, made by nobody."):
        assert detector.find(model, text) == [] and not detector.leaks(model, text)
    assert detector.scan([(model, "Anything at all.")]) == [[]]
    # Its maker, when given, still gives it away.
    assert LeakDetector({model: "Acme Labs"}).leaks(model, "I was made by Acme Labs.")


def test_operator_aliases_are_looked_for_on_word_boundaries() -> None:
    """An alias the operator gave (`arena models set NAME --alias`) gives the model away like its name, as a
    whole word, and only its own model's answers."""
    detector = LeakDetector({"J": None, "widget-7b": None}, {"J": ("Zorblax", "Acme Helper")})
    assert {"Zorblax", "Acme Helper"} <= set(detector.aliases("J"))
    assert [f.alias for f in detector.find("J", "Hello! I am zorblax, the acme-helper.")] == [
        "zorblax",
        "acme-helper",
    ]
    assert detector.find("J", "I am zorblax.")[0].self_reference
    for text in ("Zorblaxian tales", "unZorblax", "Zorblax2", "ÜZorblax"):
        assert not detector.leaks("J", text), text
    assert not detector.leaks("widget-7b", "I am Zorblax.")  # someone else's alias


def test_real_answers() -> None:
    rows = [json.loads(line) for line in gzip.open(VICUNA_CATALOG, "rt", encoding="utf-8")]
    assert len(rows) == 400
    detector = LeakDetector({row["model"]: None for row in rows})
    leaking = sorted(
        (row["model"], row["prompt_id"]) for row in rows if detector.leaks(row["model"], row["output"])
    )
    # Read by hand: Claude calls itself "Sir Claude" and "created by Anthropic" in role-play answers and
    # names a dish after itself; Bard cites "Google Books". The GPT answers say "As an AI language model"
    # without a name, so they do not count.
    assert leaking == [
        ("bard", "vicuna-48"),
        ("claude", "vicuna-21"),
        ("claude", "vicuna-24"),
        ("claude", "vicuna-27"),
    ]
    anthropic = detector.find(
        "claude", next(r["output"] for r in rows if r["prompt_id"] == "vicuna-24" and r["model"] == "claude")
    )
    assert [(f.alias, f.self_reference) for f in anthropic] == [("Anthropic", True)]
