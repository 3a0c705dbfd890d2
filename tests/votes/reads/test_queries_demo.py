"""Fit inputs aggregated in SQL equal the obvious computation; the demo data is what it promises."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import update
from sqlalchemy.engine import Engine

from leaderboard.data import aggregate_codes
from leaderboard.online.elo import EloConfig, replay_elo
from tests.factories import live_ratings, row_counts, write_jsonl
from votes.imports.demo import DEMO_MODELS, DEMO_PROMPTS, demo_answer, demo_catalog, load_demo, simulate_votes
from votes.imports.files import import_file
from votes.reads.cells import load_pair_counts
from votes.reads.exports import iter_vote_rows, votes_sha256
from votes.reads.filters import VoteFilter
from votes.reads.scans import load_battles
from votes.tables import annotator_t


def _as_dict(counts: object) -> dict[tuple[str, str, int], float]:
    from leaderboard.data import PairCounts

    assert isinstance(counts, PairCounts)
    return {
        (counts.models[a], counts.models[b], int(o)): float(c)
        for a, b, o, c in zip(counts.model_a, counts.model_b, counts.outcome, counts.count, strict=True)
    }


def test_pair_counts_in_sql_equal_aggregating_every_vote(store: Engine) -> None:
    load_demo(store, n_votes=600, seed=5)
    with store.connect() as conn:
        battles = load_battles(conn)
        counts = load_pair_counts(conn)
        rows = list(iter_vote_rows(conn))
    assert battles.n_votes == 600 == counts.n_votes
    assert battles.vote_id is not None and np.all(np.diff(battles.vote_id) > 0)  # commit order
    plain = aggregate_codes(battles.model_a, battles.model_b, battles.outcome, models=battles.models)
    assert _as_dict(counts) == _as_dict(plain)
    assert counts.n_cells <= len(DEMO_MODELS) * (len(DEMO_MODELS) - 1) * 4
    # The arrays say the same as the exported rows.
    names = [
        (battles.models[a], battles.models[b]) for a, b in zip(battles.model_a, battles.model_b, strict=True)
    ]
    assert names == [(r["model_a"], r["model_b"]) for r in rows]
    assert battles.times().tolist() == [r["tstamp"] for r in rows]


def test_filters_select_the_same_votes_in_sql_and_by_hand(store: Engine, tmp_path: Path) -> None:
    load_demo(store, n_votes=500, seed=2)
    import_file(
        store,
        write_jsonl(
            tmp_path / "extra.jsonl",
            [
                {
                    "model_a": "aurora-70b",
                    "model_b": "fable-1b",
                    "winner": "model_a",
                    "language": "de",
                    "tstamp": 9.0,
                }
            ],
        ),
    )
    with store.connect() as conn:
        rows = list(iter_vote_rows(conn))
        everything = load_battles(conn)
        german = load_pair_counts(conn, language="de")
        coding = load_battles(conn, category="coding")
        cutoff = datetime.fromtimestamp(everything.times()[250], UTC)
        late = load_battles(conn, since=cutoff)
        early = load_battles(conn, until=cutoff)
    prompt_language = {p.id: p.language for p in DEMO_PROMPTS}
    expected_de = sum(
        1
        for r in rows
        if r["language"] == "de" or (r["language"] is None and prompt_language.get(r["question_id"]) == "de")
    )
    assert (
        german.n_votes == expected_de and expected_de > 1
    )  # the extra battle has no prompt, only a language
    categories = {p.id: p.category for p in DEMO_PROMPTS}
    assert coding.n_votes == sum(1 for r in rows if categories.get(r["question_id"]) == "coding") > 0
    assert late.n_votes + early.n_votes == everything.n_votes
    assert late.times().min() >= everything.times()[250] > early.times().max()


def test_flagged_annotators_drop_out_of_fits_hash_and_live_ratings(store: Engine) -> None:
    from votes.voting.ratings import rebuild_live_ratings

    load_demo(store, n_votes=400, seed=4)
    with store.connect() as conn:
        all_hash = votes_sha256(conn)
        assert votes_sha256(conn, VoteFilter(exclude_flagged=True)) == all_hash
    with store.begin() as conn:
        conn.execute(
            update(annotator_t).where(annotator_t.c.label == "demo-annotator-01").values(flagged=True)
        )
        rebuild_live_ratings(conn, config=EloConfig())
    with store.connect() as conn:
        kept = [r for r in iter_vote_rows(conn) if r["judge"] != "demo-annotator-01"]
        counted = load_pair_counts(conn, exclude_flagged=True)
        assert votes_sha256(conn, VoteFilter(exclude_flagged=True)) != all_hash
    assert counted.n_votes == len(kept) < 400
    replay = replay_elo(
        [r["model_a"] for r in kept], [r["model_b"] for r in kept], [r["winner"] for r in kept]
    )
    live = live_ratings(store)
    for i, name in enumerate(replay.models):
        assert live[name][0] == pytest.approx(replay.rating[i], abs=1e-9)
        assert live[name][1] == replay.games[i]


def test_demo_data_has_the_promised_shape() -> None:
    assert len(DEMO_PROMPTS) >= 40 and len({p.id for p in DEMO_PROMPTS}) == len(DEMO_PROMPTS)
    assert len({p.category for p in DEMO_PROMPTS}) >= 4 and len({p.language for p in DEMO_PROMPTS}) >= 2
    assert len(DEMO_MODELS) >= 6 and len({m.style for m in DEMO_MODELS}) == len(DEMO_MODELS)
    catalog = demo_catalog()
    assert len(catalog) == len(DEMO_PROMPTS) * len(DEMO_MODELS)
    for prompt in DEMO_PROMPTS:
        answers = {demo_answer(m, prompt) for m in DEMO_MODELS}
        assert len(answers) >= 5, prompt.id  # styles differ visibly
    assert demo_catalog() == catalog  # deterministic


def test_simulated_votes_follow_the_ground_truth() -> None:
    votes = simulate_votes(20_000, seed=0)
    assert simulate_votes(20_000, seed=0) == votes  # deterministic
    rating = {m.name: m.rating for m in DEMO_MODELS}
    wins: dict[str, list[float]] = {m.name: [] for m in DEMO_MODELS}
    left_score = []
    outcomes = [v.winner for v in votes]
    for v in votes:
        score = {"model_a": 1.0, "model_b": 0.0}.get(v.winner, 0.5)
        wins[v.model_a].append(score)
        wins[v.model_b].append(1 - score)
        if rating[v.model_a] == rating[v.model_b]:
            continue
        left_score.append(score)
    mean = {name: float(np.mean(s)) for name, s in wins.items()}
    by_truth = sorted(rating, key=rating.__getitem__)
    assert sorted(mean, key=mean.__getitem__) == by_truth  # 20k votes recover the order
    assert 0.05 < outcomes.count("tie") / len(votes) < 0.25
    assert 0.02 < outcomes.count("tie (bothbad)") / len(votes) < 0.2
    assert np.mean(left_score) > 0.5  # the left side's small advantage shows


def test_load_demo_is_idempotent_and_consistent(store: Engine) -> None:
    summary = load_demo(store, n_votes=300, seed=7)
    assert "300 new votes" in summary
    counts = row_counts(store)
    assert counts["model"] == len(DEMO_MODELS) and counts["prompt"] == len(DEMO_PROMPTS)
    assert load_demo(store, n_votes=300, seed=7).endswith("0 new votes (seed 7)")
    assert row_counts(store) == counts
    with store.connect() as conn:
        rows = list(iter_vote_rows(conn))
    replay = replay_elo(
        [r["model_a"] for r in rows], [r["model_b"] for r in rows], [r["winner"] for r in rows]
    )
    live = live_ratings(store)
    assert {n: round(v[0], 9) for n, v in live.items()} == {
        n: round(float(r), 9) for n, r in zip(replay.models, replay.rating, strict=True)
    }
