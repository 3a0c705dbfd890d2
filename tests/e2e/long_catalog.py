"""A catalog that is hard to show accessibly: long English and German answers that open with a Markdown
``# heading`` and hold a 180-character code line, plus simulated votes so that a snapshot can be published.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine

from votes.files.catalog_records import CatalogRecord
from votes.imports.catalog import import_catalog_records
from votes.imports.demo import DEMO_MODELS, DemoPrompt, simulate_votes
from votes.imports.runs import import_battle_records

__all__ = ["CODE_LINE_CHARS", "LONG_MODELS", "LONG_PROMPTS", "load_long_catalog", "long_answer"]

CODE_LINE_CHARS = 180
LONG_MODELS = DEMO_MODELS[:4]

_EN_PARAGRAPH = (
    "A careful answer first names the assumptions it makes, then walks through the reasoning step by step, "
    "and finally checks the result against a simple case that anyone can verify by hand. "
)
_DE_PARAGRAPH = (
    "Eine sorgfältige Antwort nennt zuerst ihre Annahmen, geht dann Schritt für Schritt durch die Überlegung "
    "und prüft das Ergebnis schließlich an einem einfachen Fall, den jeder von Hand nachrechnen kann. "
)

LONG_PROMPTS: tuple[DemoPrompt, ...] = (
    DemoPrompt(
        "long-en-1",
        "coding",
        "en",
        "# Task\n\nWrite a function that merges two sorted lists, and explain its running time.",
        "",
        "",
    ),
    DemoPrompt(
        "long-en-2",
        "writing",
        "en",
        "# Request\n\nSummarise the causes of the French Revolution for a school essay.",
        "",
        "",
    ),
    DemoPrompt(
        "long-de-1",
        "coding",
        "de",
        "# Aufgabe\n\nSchreibe eine Funktion, die zwei sortierte Listen zusammenführt, "
        "und erkläre ihre Laufzeit.",
        "",
        "",
    ),
    DemoPrompt(
        "long-de-2",
        "writing",
        "de",
        "# Bitte\n\nFasse die Ursachen der Französischen Revolution für einen Schulaufsatz zusammen.",
        "",
        "",
    ),
)


def _code_line(variant: int) -> str:
    call = "merge_sorted(first_list_of_values, second_list_of_values, key=lambda item: item.score)"
    line = f"result = {call}  # variant {variant}"
    return (line + " " + "#" * CODE_LINE_CHARS)[:CODE_LINE_CHARS]


def long_answer(variant: int, prompt: DemoPrompt) -> str:
    """A long Markdown answer in the prompt's language: ``# heading``, paragraphs, a 180-character code line.

    No model's name appears in it (the leak scanner would keep such an answer out of battles).
    """
    german = prompt.language == "de"
    title = "Antwort" if german else "Answer"
    paragraph = _DE_PARAGRAPH if german else _EN_PARAGRAPH
    body = "\n\n".join(paragraph * (2 + k + variant) for k in range(6))
    section = "Laufzeit" if german else "Running time"
    return (
        f"# {title} {variant + 1}\n\n{body}\n\n## {section}\n\n```python\n{_code_line(variant)}\n```\n\n"
        f"| n | {section} |\n|---|---|\n| 10 | 20 |\n| 1000 | 2000 |\n\n{paragraph * 3}"
    )


def load_long_catalog(engine: Engine, *, n_votes: int = 400, seed: int = 7) -> None:
    """Write the long prompts, every model's answer and ``n_votes`` simulated votes in one transaction."""
    catalog = [
        CatalogRecord(
            where=f"long {prompt.id}",
            prompt_id=prompt.id,
            prompt=prompt.text,
            category=prompt.category,
            language=prompt.language,
            model=model.name,
            output=long_answer(variant, prompt),
        )
        for prompt in LONG_PROMPTS
        for variant, model in enumerate(LONG_MODELS)
    ]
    votes = simulate_votes(n_votes, seed=seed, models=LONG_MODELS, prompts=LONG_PROMPTS)
    with engine.begin() as conn:
        import_catalog_records(conn, catalog, file="<long catalog>")
        import_battle_records(conn, votes, file="<long votes>")
