"""The demo prompt bank is package data: read through importlib.resources, complete and well formed."""

from __future__ import annotations

import json
from importlib import resources

from votes.imports.demo import DEMO_MODELS, DEMO_PROMPTS, PROMPTS_RESOURCE, DemoPrompt, demo_answer


def test_prompt_bank_is_read_from_the_package_data() -> None:
    rows = json.loads(resources.files("votes").joinpath(PROMPTS_RESOURCE).read_text(encoding="utf-8"))
    assert tuple(DemoPrompt(**row) for row in rows) == DEMO_PROMPTS
    assert len(DEMO_PROMPTS) >= 40


def test_prompt_bank_rows_are_complete_and_unique() -> None:
    assert len({p.id for p in DEMO_PROMPTS}) == len(DEMO_PROMPTS)
    for prompt in DEMO_PROMPTS:
        assert prompt.text and prompt.good and prompt.wrong and prompt.category
        assert prompt.good != prompt.wrong
        for model in DEMO_MODELS:  # every language of the bank has the models' phrases
            assert demo_answer(model, prompt)
