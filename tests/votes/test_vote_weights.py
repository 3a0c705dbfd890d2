"""Vote weights and unknown sides in the store, on both backends: import, the fits' reads, export round
trips, the live Elo, and site votes left at weight 1 and sided."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from leaderboard.battles import Battles
from leaderboard.bt.fit import fit_bt
from leaderboard.bt.spec import BTSpec
from leaderboard.data import Outcome
from leaderboard.online.elo import EloConfig, replay_elo_indices
from tests.factories import clear, live_ratings, row_counts, seed_catalog, write_jsonl
from votes.files.battle_rows import parse_battles
from votes.files.reading import read_rows
from votes.files.records import FORMATS, rows_sha256
from votes.imports.demo import load_demo
from votes.imports.files import import_file
from votes.reads.cells import load_pair_counts
from votes.reads.exports import export_votes, votes_sha256
from votes.reads.scans import load_battles
from votes.tables import vote_t
from votes.voting.annotators import create_annotator
from votes.voting.battles import VoteRequest, VoteResult, issue_battle
from votes.voting.ratings import replay_live_ratings
from votes.voting.recording import record_votes
from votes.voting.views import load_pairing_catalog

MODELS = ("alpha", "beta", "gamma", "delta")


def _rows(n: int = 240, seed: int = 5) -> list[dict[str, Any]]:
    """Battles with weights (soft labels, strong verdicts) and side-less ones, mixed with plain ones."""
    rng = np.random.default_rng(seed)
    strength = {"alpha": 0.0, "beta": 0.4, "gamma": 0.9, "delta": 1.3}
    rows: list[dict[str, Any]] = []
    for k in range(n):
        a, b = (str(x) for x in rng.choice(MODELS, size=2, replace=False))
        p = 1.0 / (1.0 + np.exp(strength[b] - strength[a]))
        u = rng.random()
        winner = "tie" if u < 0.1 else ("model_a" if u < 0.1 + 0.9 * p else "model_b")
        row: dict[str, Any] = {"model_a": a, "model_b": b, "winner": winner, "tstamp": 1.7e9 + k}
        if k % 3 == 1:
            row["weight"] = [0.25, 3.0, 1.5][k % 9 // 3]
        if k % 4 == 2:
            row["sided"] = False
        rows.append(row)
    return rows


def _file_battles(path: Path) -> Battles:
    fmt, raw = read_rows(path)
    records = parse_battles(path, fmt, raw)
    index = {m: i for i, m in enumerate(sorted(MODELS))}
    code = {"model_a": 0, "model_b": 1, "tie": 2, "tie (bothbad)": 3}
    return Battles(
        models=tuple(sorted(MODELS)),
        model_a=np.array([index[r.model_a] for r in records]),
        model_b=np.array([index[r.model_b] for r in records]),
        outcome=np.array([code[r.winner] for r in records]),
        weight=np.array([r.weight for r in records]),
        sided=np.array([r.sided for r in records]),
    )


def test_weights_and_sides_are_stored_and_read_back_by_the_fits(store: Engine, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "weighted.jsonl", _rows())
    report = import_file(store, path)
    assert report.n_added == 240 and not report.refused
    assert import_file(store, path).n_added == 0  # the weights are part of each row's import key
    expected = _file_battles(path)
    with store.connect() as conn:
        stored = conn.execute(select(vote_t.c.weight, vote_t.c.sided).order_by(vote_t.c.id)).all()
        battles = load_battles(conn)
        counts = load_pair_counts(conn)
    assert expected.weight is not None and expected.sided is not None
    assert [w for w, _ in stored] == expected.weight.tolist()
    assert [bool(s) for _, s in stored] == expected.sided.tolist()
    assert battles.weight is not None and battles.sided is not None
    np.testing.assert_array_equal(battles.weight, expected.weight)
    np.testing.assert_array_equal(battles.sided, expected.sided)
    # The SQL aggregate gives the cells the per-vote aggregation gives: weights summed, sides apart.
    want = expected.counts()
    assert counts.sided is not None and counts.votes is not None and want.sided is not None
    for name in ("model_a", "model_b", "outcome", "sided", "votes"):
        np.testing.assert_array_equal(getattr(counts, name), getattr(want, name), err_msg=name)
    np.testing.assert_allclose(counts.count, want.count, rtol=1e-12)
    # ... and their squares summed too, which the intervals need when weights differ within a cell
    assert counts.weight_sq is not None and want.weight_sq is not None and np.any(want.weight_spread > 0)
    np.testing.assert_allclose(counts.weight_sq, want.weight_sq, rtol=1e-12)
    # And so the same position-term fit: side-less votes never inform the left-side advantage.
    spec = BTSpec(position="common")
    a, b = fit_bt(counts, spec=spec), fit_bt(want, spec=spec)
    np.testing.assert_allclose(a.rating, b.rating, atol=1e-6)


def test_unit_weights_change_nothing_in_what_is_read(store: Engine, tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k not in ("weight", "sided")} for r in _rows(120)]
    import_file(store, write_jsonl(tmp_path / "plain.jsonl", rows))
    with store.connect() as conn:
        battles, counts = load_battles(conn), load_pair_counts(conn)
    assert battles.weight is None and battles.sided is None
    assert counts.votes is None and counts.sided is None and counts.weight_sq is None
    export_votes(store, tmp_path / "plain.csv", fmt="csv")
    header = (tmp_path / "plain.csv").read_text(encoding="utf-8").splitlines()[0]
    assert "weight" not in header and "sided" not in header  # old exports stay byte for byte


def test_weighted_votes_round_trip_through_every_export_format(
    fresh_engine: Callable[[], Engine], tmp_path: Path
) -> None:
    first, second = fresh_engine(), fresh_engine()
    load_demo(first, n_votes=60, seed=2)
    import_file(first, write_jsonl(tmp_path / "weighted.jsonl", _rows(90)))
    with first.connect() as conn:
        digest = votes_sha256(conn)
        before = load_pair_counts(conn)
    for fmt in FORMATS:
        clear(second)
        exported = tmp_path / f"votes-1.{fmt}"
        export_votes(first, exported, fmt=fmt)
        file_format, raw = read_rows(exported)
        assert rows_sha256(r.row() for r in parse_battles(exported, file_format, raw)) == digest
        import_file(second, exported)
        assert row_counts(second)["vote"] == 150
        export_votes(second, tmp_path / f"votes-2.{fmt}", fmt=fmt)
        assert exported.read_bytes() == (tmp_path / f"votes-2.{fmt}").read_bytes(), fmt
        with second.connect() as conn:
            after = load_pair_counts(conn)
        assert after.models == before.models
        np.testing.assert_array_equal(after.count, before.count)
        assert after.sided is not None and before.sided is not None
        np.testing.assert_array_equal(after.sided, before.sided)


def test_live_elo_scales_its_step_by_the_vote_weight(store: Engine, tmp_path: Path) -> None:
    rows = _rows(150)
    import_file(store, write_jsonl(tmp_path / "weighted.jsonl", rows))
    battles = _file_battles(tmp_path / "weighted.jsonl")
    config = EloConfig()
    replayed = replay_elo_indices(
        battles.model_a, battles.model_b, battles.outcome, models=battles.models, weight=battles.weight
    )
    live = live_ratings(store)
    for i, name in enumerate(battles.models):
        assert live[name][0] == pytest.approx(float(replayed.rating[i]), abs=1e-9)
        assert live[name][1] == int(replayed.games[i])
    # One vote of weight 3 from equal ratings moves each side by 3 K / 2, a weight-1 vote by K / 2.
    clear(store)
    import_file(store, write_jsonl(tmp_path / "one.jsonl", [{**rows[0], "weight": 3.0, "winner": "model_a"}]))
    moved = live_ratings(store)[rows[0]["model_a"]][0] - config.initial
    assert moved == pytest.approx(3 * config.k / 2)


def test_site_votes_count_one_and_are_sided_beside_weighted_imports(store: Engine, tmp_path: Path) -> None:
    import_file(store, write_jsonl(tmp_path / "weighted.jsonl", _rows(60)))
    seed_catalog(store, models=("site-x", "site-y", "site-z"))
    with Session(store) as s:
        catalog = load_pairing_catalog(session=s)
        annotator = create_annotator(session=s)
        s.commit()
        assert annotator.id is not None
        annotator_id = annotator.id
    requests = []
    for k in range(6):
        a, b = catalog[2 * k % len(catalog)], catalog[(2 * k + 1) % len(catalog)]
        if a.model_id == b.model_id or a.prompt_id != b.prompt_id:
            b = next(r for r in catalog if r.prompt_id == a.prompt_id and r.model_id != a.model_id)
        battle = issue_battle(
            token_id=f"token-{k}",
            annotator_id=annotator_id,
            prompt_id=a.prompt_id,
            output_a=a,
            output_b=b,
            pair_probability=0.5,
        )
        requests.append(VoteRequest(battle=battle, winner=Outcome.MODEL_A, idempotency_key=None))
    with Session(store) as s:
        results = record_votes(session=s, requests=requests, config=EloConfig())
        s.commit()
    assert all(isinstance(r, VoteResult) for r in results)
    with store.connect() as conn:
        site = conn.execute(select(vote_t.c.weight, vote_t.c.sided).where(vote_t.c.id > 60)).all()
        replayed = replay_live_ratings(session=conn, config=EloConfig())
    assert replayed == live_ratings(store)
    assert len(site) == 6 and {(float(w), bool(s)) for w, s in site} == {(1.0, True)}
