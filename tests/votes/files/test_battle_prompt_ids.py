"""Prompt ids from battle files: ``question_id`` becomes ``Battles.prompt`` on the fast and the careful
path alike, numbered or named, so prompt clusters work from files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from votes.files.columns import read_battles
from votes.files.records import InputError

ROWS: list[dict[str, object]] = [
    {"question_id": 81, "model_a": "a", "model_b": "b", "winner": "model_a", "judge": "gpt-4"},
    {"question_id": 82, "model_a": "b", "model_b": "a", "winner": "tie", "judge": "claude"},
    {"question_id": 81, "model_a": "a", "model_b": "c", "winner": "model_b", "judge": "gpt-4"},
    {"model_a": "c", "model_b": "b", "winner": "model_a", "judge": "gpt-4"},
]


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("named", [False, True])
def test_question_ids_become_prompt_codes_on_both_paths(tmp_path: Path, named: bool) -> None:
    rows = [
        {**r, "question_id": f"q-{r['question_id']}"} if named and "question_id" in r else r for r in ROWS
    ]
    path = _write(tmp_path / "battles.jsonl", rows)
    fast = read_battles(path).battles
    careful = read_battles(path, skip_invalid=True).battles  # the row-by-row path
    for battles in (fast, careful):
        assert battles.prompt is not None
        np.testing.assert_array_equal(battles.prompt, [0, 1, 0, -1])
        assert battles.annotator_names == ("gpt-4", "claude")
        np.testing.assert_array_equal(battles.annotator, [0, 1, 0, 0])


def test_a_file_without_question_ids_has_no_prompts(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "battles.jsonl", [{k: v for k, v in r.items() if k != "question_id"} for r in ROWS]
    )
    assert read_battles(path).battles.prompt is None


def test_csv_question_ids_and_empty_ones(tmp_path: Path) -> None:
    path = tmp_path / "battles.csv"
    path.write_text("question_id,model_a,model_b,winner\nx,a,b,model_a\n,b,a,tie\nx,a,c,model_b\n", "utf-8")
    battles = read_battles(path).battles
    assert battles.prompt is not None
    np.testing.assert_array_equal(battles.prompt, [0, -1, 0])


def test_an_overlong_question_id_is_refused_with_its_row(tmp_path: Path) -> None:
    path = _write(tmp_path / "battles.jsonl", [*ROWS[:2], {**ROWS[2], "question_id": "q" * 5000}])
    with pytest.raises(InputError, match="question_id"):
        read_battles(path)
