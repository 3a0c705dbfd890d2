"""Votes carry their battle's models and annotator; the fit's GROUP BY reads them from one covering index.

Every fast path is checked against the plain join of votes to battles and annotators.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest
from sqlalchemy import event, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session

from leaderboard.data import Outcome, parse_outcome
from leaderboard.online.elo import EloConfig, replay_elo
from tests.factories import live_ratings
from votes.dialects.sqlite import SQLITE
from votes.imports.demo import load_demo
from votes.reads.cells import load_pair_counts, pair_counts_statement
from votes.reads.exports import iter_vote_rows
from votes.reads.filters import VoteFilter
from votes.reads.scans import load_battles
from votes.tables import annotator_t, battle_t, model_t, output_t, vote_t
from votes.voting import ratings
from votes.voting.battles import IssuedBattle, VoteRequest
from votes.voting.recording import record_vote
from votes.voting.views import pair_vote_counts


def _site_votes(engine: Engine, n: int) -> None:
    """A few votes through the live writer (record_vote), as the site writes them."""
    with engine.begin() as conn:
        outputs = conn.execute(
            select(output_t.c.id, output_t.c.prompt_id, output_t.c.model_id).order_by(output_t.c.id)
        ).all()
        annotator = conn.execute(select(annotator_t.c.id).order_by(annotator_t.c.id)).scalars().first()
    assert annotator is not None
    by_prompt: dict[int, list[tuple[int, int]]] = {}
    for oid, pid, mid in outputs:
        by_prompt.setdefault(pid, []).append((oid, mid))
    pairs = [(pid, o[0], o[1]) for pid, o in by_prompt.items() if len(o) >= 2][:n]
    for k, (pid, (oa, ma), (ob, mb)) in enumerate(pairs):
        battle = IssuedBattle(
            token_id=f"cells-{k}",
            annotator_id=annotator,
            prompt_id=pid,
            output_a_id=oa,
            output_b_id=ob,
            model_a_id=ma,
            model_b_id=mb,
            issued_at=datetime(2026, 1, 1, tzinfo=UTC),
            pair_probability=None,
        )
        with Session(engine) as session, session.begin():
            record_vote(
                session=session,
                request=VoteRequest(battle=battle, winner=Outcome.MODEL_B),
                config=EloConfig(),
            )


def _flag_one(engine: Engine) -> int:
    with engine.begin() as conn:
        first = conn.execute(select(annotator_t.c.id).order_by(annotator_t.c.id.desc())).scalars().first()
        assert first is not None
        conn.execute(update(annotator_t).where(annotator_t.c.id == first).values(flagged=True))
    return int(first)


def _joined(engine: Engine) -> list[tuple[str, str, str, bool, datetime]]:
    """(model_a, model_b, winner, counted, created_at) per vote, through the battle: the plain way."""
    ma, mb = model_t.alias("ma"), model_t.alias("mb")
    stmt = (
        select(ma.c.name, mb.c.name, vote_t.c.winner, annotator_t.c.flagged, vote_t.c.created_at)
        .select_from(vote_t)
        .join(battle_t, battle_t.c.id == vote_t.c.battle_id)
        .join(ma, ma.c.id == battle_t.c.model_a_id)
        .join(mb, mb.c.id == battle_t.c.model_b_id)
        .outerjoin(annotator_t, annotator_t.c.id == battle_t.c.annotator_id)
        .order_by(vote_t.c.id)
    )
    with engine.connect() as conn:
        return [(a, b, w, not bool(f), t) for a, b, w, f, t in conn.execute(stmt)]


def test_every_vote_copies_its_battle(store: Engine) -> None:
    load_demo(store, n_votes=300, seed=1)
    _site_votes(store, 5)
    stmt = (
        select(vote_t.c.model_a_id, vote_t.c.model_b_id, vote_t.c.annotator_id)
        .add_columns(battle_t.c.model_a_id, battle_t.c.model_b_id, battle_t.c.annotator_id)
        .join(battle_t, battle_t.c.id == vote_t.c.battle_id)
    )
    with store.connect() as conn:
        rows = conn.execute(stmt).all()
    assert len(rows) == 305
    assert all(tuple(r[:3]) == tuple(r[3:]) for r in rows)
    assert all(r[2] is not None for r in rows)


def test_group_by_equals_plain_join_with_flagged_and_time_filters(store: Engine) -> None:
    load_demo(store, n_votes=400, seed=3)
    _site_votes(store, 4)
    _flag_one(store)
    plain = _joined(store)
    cutoff = sorted(t for *_, t in plain)[200]
    cutoff = cutoff if cutoff.tzinfo else cutoff.replace(tzinfo=UTC)

    def expected(keep: list[bool]) -> Counter[tuple[str, str, int]]:
        return Counter(
            (a, b, int(parse_outcome(w))) for (a, b, w, _, _), k in zip(plain, keep, strict=True) if k
        )

    def got(f: VoteFilter) -> Counter[tuple[str, str, int]]:
        with store.connect() as conn:
            c = load_pair_counts(conn, filters=f)
        out: Counter[tuple[str, str, int]] = Counter()
        for a, b, o, n in zip(c.model_a, c.model_b, c.outcome, c.count, strict=True):
            out[(c.models[a], c.models[b], int(o))] = int(n)
        return out

    def aware(t: datetime) -> datetime:
        return t if t.tzinfo else t.replace(tzinfo=UTC)

    counted = [c for *_, c, _ in plain]
    assert not all(counted)
    assert got(VoteFilter()) == expected([True] * len(plain))
    assert got(VoteFilter(exclude_flagged=True)) == expected(counted)
    assert got(VoteFilter(since=cutoff, exclude_flagged=True)) == expected(
        [c and aware(t) >= cutoff for (*_, c, t) in plain]
    )
    with store.connect() as conn:
        arrays = load_battles(conn, exclude_flagged=True)
    assert arrays.n_votes == sum(counted)
    assert [
        (arrays.models[a], arrays.models[b]) for a, b in zip(arrays.model_a, arrays.model_b, strict=True)
    ] == [(a, b) for a, b, _, c, _ in plain if c]


def test_sqlite_groups_from_the_covering_index_without_sorting(store: Engine) -> None:
    if store.dialect.name != "sqlite":
        pytest.skip("EXPLAIN QUERY PLAN is SQLite's")
    load_demo(store, n_votes=50, seed=0)
    for f in (VoteFilter(), VoteFilter(exclude_flagged=True)):
        stmt = pair_counts_statement(f, dialect=SQLITE)
        sql = str(stmt.compile(store, compile_kwargs={"literal_binds": True}))
        with store.connect() as conn:
            plan = " / ".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
        assert "USING COVERING INDEX ix_vote_cells" in plan, plan
        assert "TEMP B-TREE" not in plan, plan
        assert "battle" not in plan, plan
    stmt = pair_counts_statement(VoteFilter(since=datetime(2025, 1, 2, tzinfo=UTC)), dialect=SQLITE)
    sql = str(stmt.compile(store, compile_kwargs={"literal_binds": True}))
    with store.connect() as conn:
        plan = " / ".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
    assert "USING INDEX ix_vote_created_at (created_at>?)" in plan, plan


@pytest.mark.parametrize("chunk", [1, 7, 100_000])
def test_chunked_rebuild_equals_replay_of_counted_votes(
    store: Engine, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    load_demo(store, n_votes=250, seed=4)
    _flag_one(store)
    monkeypatch.setattr(ratings, "REPLAY_CHUNK", chunk)
    config = EloConfig(provisional=((10, 32.0),))
    with store.begin() as conn:
        standings = ratings.rebuild_live_ratings(conn, config=config)
    counted = [(a, b, w) for a, b, w, c, _ in _joined(store) if c]
    expected = replay_elo(
        [a for a, _, _ in counted], [b for _, b, _ in counted], [w for *_, w in counted], config=config
    )
    stored = live_ratings(store)
    assert {m: r for m, (r, _) in stored.items()} == expected.as_dict()  # bit for bit
    assert {m: g for m, (_, g) in stored.items()} == dict(
        zip(expected.models, expected.games.tolist(), strict=True)
    )
    assert int(standings.games.sum()) == 2 * len(counted)


def test_fast_vote_times_equal_the_orm_times(store: Engine) -> None:
    load_demo(store, n_votes=120, seed=6)
    _site_votes(store, 3)  # times with microseconds, written by the live writer
    with store.connect() as conn:
        orm = [
            t if t.tzinfo else t.replace(tzinfo=UTC)
            for t in conn.execute(select(vote_t.c.created_at).order_by(vote_t.c.id)).scalars()
        ]
        arrays = load_battles(conn)
        rows = list(iter_vote_rows(conn))
    expected = [t.timestamp() for t in orm]
    assert any(t.microsecond for t in orm)
    assert arrays.times().tolist() == expected
    assert [r["tstamp"] for r in rows] == expected


def test_pairing_counts_votes_per_pair_from_the_votes_alone(store: Engine) -> None:
    """The pairing's votes per unordered pair equal the plain join's count of votes to their battles'
    pairs, and on SQLite its query reads only the covering index (no battle, no sort)."""
    load_demo(store, n_votes=120, seed=2)
    _site_votes(store, 6)
    with store.connect() as conn:
        joined = conn.execute(
            select(battle_t.c.model_a_id, battle_t.c.model_b_id).join(
                vote_t, vote_t.c.battle_id == battle_t.c.id
            )
        ).all()
    expected = Counter((min(a, b), max(a, b)) for a, b in joined)
    issued: list[str] = []

    def seen(conn: object, cursor: object, statement: str, *rest: object) -> None:
        issued.append(statement)

    event.listen(store, "before_cursor_execute", seen)
    try:
        with Session(store) as session:
            counts = pair_vote_counts(session=session)
    finally:
        event.remove(store, "before_cursor_execute", seen)
    assert counts == dict(expected) and sum(counts.values()) == len(joined) > 0
    if store.dialect.name == "sqlite":
        [statement] = [s for s in issued if "GROUP BY" in s]
        with store.connect() as conn:
            plan = " / ".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement))
        assert "USING COVERING INDEX ix_vote_cells" in plan and "TEMP B-TREE" not in plan, plan
        assert "battle" not in plan, plan
