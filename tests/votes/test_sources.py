"""Fit inputs from a file and from the store agree: the same votes give the same per-vote arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.factories import write_jsonl
from votes.demo import load_demo
from votes.io import export_votes
from votes.records import InputError
from votes.sources import battles_from_file, battles_from_store, load_battles_file


def test_store_and_its_export_give_the_same_battles(store: Engine, tmp_path: Path) -> None:
    load_demo(store, n_votes=300, seed=4)
    path = tmp_path / "votes.jsonl"
    export_votes(store, path)
    with Session(store) as session:
        stored = battles_from_store(session)
    read = battles_from_file(path)
    assert stored.models == read.models and len(stored) == len(read) == 300
    np.testing.assert_array_equal(stored.model_a, read.model_a)
    np.testing.assert_array_equal(stored.model_b, read.model_b)
    np.testing.assert_array_equal(stored.outcome, read.outcome)
    assert read.time is not None and stored.time is not None
    np.testing.assert_allclose(stored.time, read.time)
    counts, _, n = load_battles_file(path)
    assert n == 300 and counts.n_votes == 300 and counts.models == read.models


def test_style_needs_answer_texts(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "b.jsonl", [{"model_a": "x", "model_b": "y", "winner": "tie"}])
    with pytest.raises(ValueError, match="no answer texts"):
        battles_from_file(path, style=True)


def test_a_self_battle_is_refused_by_both_readers(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "b.jsonl", [{"model_a": "x", "model_b": "x", "winner": "tie"}])
    with pytest.raises(InputError, match="cannot battle itself"):
        battles_from_file(path)
    with pytest.raises(InputError, match="cannot battle itself"):
        load_battles_file(path)
