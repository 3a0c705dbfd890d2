"""Gold items: a maintainer's file is checked whole (every bad line named, nothing written), adding it again
adds nothing, and golds derived from the catalog are the four kinds, each right answer where it belongs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.factories import MODEL_NAMES, write_jsonl
from votes.models import GoldBattle, Model, Output, Prompt
from votes.voting.gold_items import (
    MAX_LINE_BYTES,
    GoldFileError,
    add_gold_file,
    derive_golds,
    load_gold_items,
    shuffle_sentences,
    truncate,
)

GOOD = [
    {
        "kind": "objective",
        "prompt": "What is 2 + 2?",
        "right": "4",
        "wrong": "5",
        "model_right": MODEL_NAMES[0],
    },
    {"kind": "degraded", "prompt": "Name a colour.", "right": "Blue.", "wrong": "Bl", "detail": "truncated"},
    {"kind": "identical", "prompt": "Say hello.", "text": "Hello!"},
]


def _golds(engine: Engine) -> list[GoldBattle]:
    with Session(engine) as session:
        return list(session.exec(select(GoldBattle).order_by(col(GoldBattle.id))).all())


def test_a_good_file_is_added_once(seeded: Engine, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "golds.jsonl", GOOD)
    with Session(seeded) as session:
        assert add_gold_file(session, path) == 3
        session.commit()
    with Session(seeded) as session:
        assert add_gold_file(session, path) == 0  # the same file again adds nothing
        session.commit()
    golds = _golds(seeded)
    assert [(g.kind, g.right, g.source) for g in golds] == [
        ("objective", "a", "file"),
        ("degraded", "a", "file"),
        ("identical", "tie", "file"),
    ]
    assert golds[0].text_a == "4" and golds[0].text_b == "5" and golds[0].model_a_id is not None
    assert golds[2].text_a == golds[2].text_b == "Hello!"
    with Session(seeded) as session:
        assert {g.gold_id for g in load_gold_items(session)} == {g.id for g in golds}


def test_every_bad_line_is_named_and_nothing_is_written(seeded: Engine, tmp_path: Path) -> None:
    lines: list[object] = [
        GOOD[0],
        "{not json",
        {"kind": "objective", "prompt": "p", "right": "same", "wrong": "same"},
        {"kind": "riddle", "prompt": "p", "text": "t"},
        {"kind": "identical", "prompt": "p"},
        {"kind": "identical", "prompt": "p", "text": "t", "model": "no-such-model"},
        {"kind": "identical", "prompt": "p", "text": "t", "extra": 1},
        {"kind": "objective", "prompt": "", "right": "a", "wrong": "b"},
        [1, 2],
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    with open(path, "ab") as handle:  # a line too long to read whole, and one that is not UTF-8
        handle.write(b'{"kind": "identical", "prompt": "' + b"x" * MAX_LINE_BYTES + b'"}\n')
        handle.write(b'{"kind": "identical", "prompt": "\xff", "text": "t"}\n')
    with Session(seeded) as session, pytest.raises(GoldFileError) as caught:
        add_gold_file(session, path)
    problems = caught.value.problems
    assert [p.split(": ")[1] for p in problems] == [f"line {n}" for n in range(2, 12)], problems
    assert all(p.startswith(f"{path}: line ") for p in problems)
    assert "not JSON" in problems[0] and "same text" in problems[1] and "'kind'" in problems[2]
    assert "missing text" in problems[3] and "catalog model" in problems[4] and "unknown field" in problems[5]
    assert "non-empty" in problems[6] and "JSON object" in problems[7]
    assert "longer than" in problems[8] and "UTF-8" in problems[9]
    assert _golds(seeded) == []


def test_an_empty_file_is_refused(seeded: Engine, tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n")
    with Session(seeded) as session, pytest.raises(GoldFileError, match="no gold"):
        add_gold_file(session, path)


def _long_catalog(engine: Engine) -> None:
    """Two models answering four prompts with long, many-sentence answers (room to corrupt)."""
    with Session(engine) as session:
        models = [Model(name="m-one"), Model(name="m-two")]
        prompts = [Prompt(text=f"Tell me about subject {i}.") for i in range(4)]
        session.add_all([*models, *prompts])
        session.flush()
        for p in prompts:
            for m in models:
                text = " ".join(f"Sentence {k} about subject {p.id} by {m.name} goes here." for k in range(6))
                session.add(Output(prompt_id=p.id or 0, model_id=m.id or 0, text=text))
        session.commit()


def test_derived_golds_are_the_four_kinds_and_deriving_again_repeats_none(engine: Engine) -> None:
    _long_catalog(engine)
    with Session(engine) as session:
        assert derive_golds(session, count=8, rng=random.Random(3)) == 8
        session.commit()
    with Session(engine) as session:
        assert derive_golds(session, count=8, rng=random.Random(3)) == 0  # same seed: the same golds
        outputs = {o.id: o for o in session.exec(select(Output)).all()}
    golds = _golds(engine)
    assert {g.detail for g in golds} == {"truncated", "shuffled", "other-prompt", "identical"}
    for g in golds:
        assert g.source == "derived" and g.output_id is not None
        original = outputs[g.output_id]
        assert g.text_a == original.text and g.prompt_id == original.prompt_id
        assert g.model_a_id == original.model_id == g.model_b_id
        if g.detail == "identical":
            assert (g.kind, g.right, g.text_b) == ("identical", "tie", original.text)
        else:
            assert (g.kind, g.right) == ("degraded", "a") and g.text_b != original.text
        if g.detail == "truncated":
            assert original.text.startswith(g.text_b) and len(g.text_b) < 0.6 * len(original.text)
        if g.detail == "shuffled":
            assert sorted(g.text_b.split(". ")) != g.text_b.split(". ") or g.text_b != original.text
            assert sorted(g.text_b.replace(".", "").split()) == sorted(original.text.replace(".", "").split())
        if g.detail == "other-prompt":
            assert any(o.text == g.text_b and o.prompt_id != g.prompt_id for o in outputs.values())


def test_corruptions_refuse_answers_too_short_to_corrupt_clearly() -> None:
    rng = random.Random(0)
    assert truncate("A short answer.", rng) is None
    assert shuffle_sentences("One. Two.", rng) is None
    shuffled = shuffle_sentences("One. Two. Three. Four.", rng)
    assert shuffled is not None and shuffled != "One. Two. Three. Four."
    assert sorted(shuffled.split(" ")) == sorted("One. Two. Three. Four.".split(" "))
