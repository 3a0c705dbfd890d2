"""The answer texts of each vote, from the store, row for row with load_battles (style control)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from sqlalchemy.engine import Engine

from tests.factories import write_jsonl
from votes.imports.demo import DEMO_MODELS, DEMO_PROMPTS, demo_answer, load_demo
from votes.imports.files import import_file
from votes.reads.exports import iter_vote_rows
from votes.reads.filters import VoteFilter
from votes.reads.scans import iter_vote_texts, load_battles


def _with_textless_vote(store: Engine, tmp_path: Path) -> None:
    load_demo(store, n_votes=300, seed=3)
    row = {"model_a": "aurora-70b", "model_b": "fable-1b", "winner": "tie", "language": "de", "tstamp": 9.0}
    import_file(store, write_jsonl(tmp_path / "bare.jsonl", [row]))


def test_texts_are_aligned_with_load_battles_and_none_without_outputs(store: Engine, tmp_path: Path) -> None:
    _with_textless_vote(store, tmp_path)
    with store.connect() as conn:
        battles = load_battles(conn)
        texts = list(iter_vote_texts(conn))
        rows = list(iter_vote_rows(conn))
    assert battles.vote_id is not None
    assert [t[0] for t in texts] == battles.vote_id.tolist()
    assert len(rows) == len(texts) == 301
    models = {m.name: m for m in DEMO_MODELS}
    prompts = {p.id: p for p in DEMO_PROMPTS}
    for (_, a, b, _, _), row in zip(texts[:-1], rows[:-1], strict=True):
        # each side's text is that model's demo answer to the battle's prompt, left and right as voted
        assert a == demo_answer(models[row["model_a"]], prompts[row["question_id"]])
        assert b == demo_answer(models[row["model_b"]], prompts[row["question_id"]])
    assert texts[-1][1:] == (
        None,
        None,
        None,
        None,
    )  # the imported battle without conversations has no outputs


def test_filters_select_the_same_votes_as_load_battles(store: Engine, tmp_path: Path) -> None:
    _with_textless_vote(store, tmp_path)
    with store.connect() as conn:
        everything = load_battles(conn)
        middle = datetime.fromtimestamp(float(np.median(everything.times())), UTC)
        for f in (
            VoteFilter(language="de"),
            VoteFilter(category="coding"),
            VoteFilter(since=middle),
            VoteFilter(until=middle, exclude_flagged=True),
        ):
            ids = [t[0] for t in iter_vote_texts(conn, filters=f)]
            selected = load_battles(conn, filters=f).vote_id
            assert selected is not None and ids == selected.tolist()
            assert 0 < len(ids) < everything.n_votes
        german = list(iter_vote_texts(conn, language="de"))
    assert german[-1][1] is None  # the bare German vote is selected, without texts
