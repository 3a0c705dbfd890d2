"""Fit inputs from a file and from the store agree: the same votes give the same per-vote arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from leaderboard.style.features import TOKEN_ESTIMATOR, estimate_tokens
from tests.factories import write_jsonl
from votes.files.records import InputError
from votes.imports.demo import load_demo
from votes.models import Battle, Generation, Output, Vote
from votes.reads.exports import export_votes
from votes.reads.scans import iter_vote_texts
from votes.reads.sources import battles_from_file, battles_from_store, load_battles_file


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


def test_stored_token_counts_give_the_length_where_generation_reported_them(store: Engine) -> None:
    load_demo(store, n_votes=300, seed=4)
    with Session(store) as session:
        estimated = battles_from_store(session, style=True)
        outputs = session.exec(select(Output)).all()
        reported = outputs[: len(outputs) // 2]
        known = {out.id for out in reported}
        for out in reported:  # a server that counts ten times the estimate: the length column must follow
            assert out.id is not None
            session.add(
                Generation(
                    output_id=out.id,
                    endpoint="e",
                    base_url="http://127.0.0.1:1/v1",
                    served_model="m",
                    completion_tokens=10 * estimate_tokens(out.text),
                    latency_s=0.1,
                    run_id="r",
                )
            )
        session.commit()
        mixed = battles_from_store(session, style=True)
        texts = list(iter_vote_texts(session))
    with Session(store) as session:
        sides = session.exec(
            select(Battle.output_a_id, Battle.output_b_id).join(Vote).order_by(col(Vote.id))
        ).all()
    n_known = sum((a in known) + (b in known) for a, b in sides)
    assert 0 < n_known < 600
    notes = mixed.feature_notes["length"]
    assert notes["unit"] == "tokens" and notes["estimator"] == TOKEN_ESTIMATOR
    assert notes["answers_with_generation_tokens"] == n_known
    assert notes["answers_with_estimated_tokens"] == 600 - n_known
    assert estimated.feature_notes["length"]["answers_with_generation_tokens"] == 0
    assert sum((t[3] is not None) + (t[4] is not None) for t in texts) == n_known
    column = mixed.feature_names.index("length")
    assert mixed.features is not None and estimated.features is not None
    changed = ~np.isclose(mixed.features[:, column], estimated.features[:, column])
    one_known = np.array([(a in known) != (b in known) for a, b in sides])
    assert changed[one_known].all()  # one side reported ten times its estimate: the difference moves


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
