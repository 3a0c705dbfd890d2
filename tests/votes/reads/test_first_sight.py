"""First-sight boards: only votes where neither shown answer had been revealed to the annotator by an
earlier vote of theirs, on both backends, through the one vote filter and through `arena publish`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from arena.cli.main import build_app
from votes.db import make_engine
from votes.migrate import upgrade_database
from votes.reads.cells import load_pair_counts
from votes.reads.exports import votes_sha256
from votes.reads.filters import VoteFilter
from votes.reads.scans import load_battles
from votes.tables import annotator_t, battle_t, model_t, output_t, prompt_t, vote_t

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _store_votes(engine: Engine, addresses: dict[str, str] | None = None) -> dict[str, int]:
    """Three models, two prompts with one answer each per model, and six votes; returns vote ids by name.

    Annotator A votes p1 (m1 v m2), then p1 (m1 v m3), whose m1 answer the first reveal named, then
    p2 (m2 v m3), all new to them. B votes p1 (m1 v m3) once, after A: A's reveals are not B's. A vote
    without an annotator counts as first sight. A's last vote, p2 (m3 v m1), repeats p2's m3 answer.
    ``addresses`` gives annotators' votes an address hash.
    """
    addresses = addresses or {}
    with engine.begin() as conn:
        models = {
            name: conn.execute(insert(model_t).values(name=name).returning(model_t.c.id)).scalar_one()
            for name in ("m1", "m2", "m3")
        }
        prompts = {
            p: conn.execute(insert(prompt_t).values(text=f"prompt {p}").returning(prompt_t.c.id)).scalar_one()
            for p in ("p1", "p2")
        }
        outputs = {
            (p, m): conn.execute(
                insert(output_t)
                .values(prompt_id=prompts[p], model_id=models[m], text=f"{m} on {p}")
                .returning(output_t.c.id)
            ).scalar_one()
            for p in prompts
            for m in models
        }
        people = {
            who: conn.execute(
                insert(annotator_t).values(label=who, kind="anonymous").returning(annotator_t.c.id)
            ).scalar_one()
            for who in ("A", "B")
        }
        plan = [
            ("a1", "A", "p1", "m1", "m2"),
            ("a2", "A", "p1", "m1", "m3"),
            ("a3", "A", "p2", "m2", "m3"),
            ("b1", "B", "p1", "m1", "m3"),
            ("anon", None, "p1", "m1", "m2"),
            ("a4", "A", "p2", "m3", "m1"),
        ]
        ids: dict[str, int] = {}
        for k, (name, who, p, left, right) in enumerate(plan):
            annotator = None if who is None else people[who]
            battle = conn.execute(
                insert(battle_t)
                .values(
                    prompt_id=prompts[p],
                    output_a_id=outputs[p, left],
                    output_b_id=outputs[p, right],
                    model_a_id=models[left],
                    model_b_id=models[right],
                    annotator_id=annotator,
                    issued_at=T0 + timedelta(minutes=k),
                    source="site",
                )
                .returning(battle_t.c.id)
            ).scalar_one()
            ids[name] = conn.execute(
                insert(vote_t)
                .values(
                    battle_id=battle,
                    model_a_id=models[left],
                    model_b_id=models[right],
                    annotator_id=annotator,
                    address_hash=None if who is None else addresses.get(who),
                    winner="model_a" if k % 2 == 0 else "model_b",
                    created_at=T0 + timedelta(minutes=k, seconds=30),
                )
                .returning(vote_t.c.id)
            ).scalar_one()
    return ids


def test_first_sight_keeps_only_votes_on_unrevealed_answers(engine: Engine) -> None:
    ids = _store_votes(engine)
    with engine.connect() as conn:
        every = load_battles(conn, filters=VoteFilter())
        first = load_battles(conn, filters=VoteFilter(first_sight=True))
        counts = load_pair_counts(conn, filters=VoteFilter(first_sight=True))
        assert votes_sha256(conn, VoteFilter(first_sight=True)) != votes_sha256(conn, VoteFilter())
    assert len(every.outcome) == 6
    # a2 shows p1's m1 answer revealed by a1; a4 shows p2's m3 answer revealed by a3.
    assert len(first.outcome) == 4
    assert float(counts.count.sum()) == 4
    kept = sorted(ids[name] for name in ("a1", "a3", "b1", "anon"))
    assert first.vote_id is not None
    assert sorted(int(i) for i in first.vote_id) == kept


def test_first_sight_remembers_reveals_per_address(engine: Engine) -> None:
    # A and B vote from one network: B's p1 (m1 v m3) shows the m1 answer A's first vote revealed there.
    ids = _store_votes(engine, addresses={"A": "net-1", "B": "net-1"})
    with engine.connect() as conn:
        first = load_battles(conn, filters=VoteFilter(first_sight=True))
    assert first.vote_id is not None
    assert sorted(int(i) for i in first.vote_id) == sorted(ids[name] for name in ("a1", "a3", "anon"))


def test_first_sight_is_one_condition_with_the_other_filters(engine: Engine) -> None:
    _store_votes(engine)
    with engine.connect() as conn:
        only_p1_pair = VoteFilter(first_sight=True, models=("m1", "m3"))
        assert len(load_battles(conn, filters=only_p1_pair).outcome) == 1  # b1 only; a2 was a repeat
        assert len(load_battles(conn, filters=VoteFilter(first_sight=True, annotators=("A",))).outcome) == 2


def test_publish_first_sight_records_the_filter(db_url: str, tmp_path: Path) -> None:
    upgrade_database(db_url)
    engine = make_engine(db_url)
    try:
        _store_votes(engine)
    finally:
        engine.dispose()
    snapshots = tmp_path / "snapshots"
    base = ["--database-url", db_url, "--bootstrap", "0", "--interval", "none"]
    result = CliRunner().invoke(
        build_app(), ["publish", *base, "--snapshot-dir", str(snapshots), "--first-sight"]
    )
    assert result.exit_code == 0, result.output
    (meta,) = (json.loads(p.read_text(encoding="utf-8")) for p in snapshots.glob("*/metadata.json"))
    assert meta["filters"]["first_sight"] is True
    assert meta["n_votes"] == 4
    out = tmp_path / "board"
    again = CliRunner().invoke(build_app(), ["recompute", *base, "--out", str(out), "--first-sight"])
    assert again.exit_code == 0, again.output
    assert json.loads((out / "metadata.json").read_text(encoding="utf-8"))["n_votes"] == 4
