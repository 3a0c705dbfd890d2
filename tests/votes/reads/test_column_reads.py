"""Votes read as columns: every row once, times as ``timestamp()`` gives them, weeks counted right."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import insert, select
from sqlalchemy.engine import Engine

from votes.bulk import column_chunks
from votes.files.battle_rows import BattleRecord
from votes.imports.runs import import_battle_records
from votes.reads.battle_shares import weekly_battle_shares
from votes.reads.scans import seconds_array, vote_seconds
from votes.tables import model_t


def test_seconds_array_is_timestamp_of_each_stored_time() -> None:
    texts = ["2024-02-29 23:59:59.999999", "1970-01-01 00:00:00.000001", "2023-11-14 22:13:20"]
    assert seconds_array(texts).tolist() == [vote_seconds(t) for t in texts]
    offsets = ["2024-01-01 00:30:00+01:00", "2024-01-01 00:00:00.000000"]  # one stored with an offset
    assert seconds_array(offsets).tolist() == [vote_seconds(t) for t in offsets]
    moments = [datetime(2024, 5, 1, 12, tzinfo=UTC), datetime(2024, 5, 1, 12, 0, 0, 5)]
    assert seconds_array(moments).tolist() == [vote_seconds(m) for m in moments]
    assert seconds_array([]).shape == (0,)


def test_column_chunks_give_every_row_once_in_order(engine: Engine) -> None:
    now = datetime(2024, 1, 1, tzinfo=UTC)
    names = [f"m-{i:02d}" for i in range(25)]
    with engine.begin() as conn:
        conn.execute(insert(model_t), [{"name": n, "active": True, "created_at": now} for n in names])
    with engine.connect() as conn:
        stmt = select(model_t.c.name, model_t.c.id).order_by(model_t.c.id)
        chunks = list(column_chunks(conn, stmt, size=10))
    assert [len(c[0]) for c in chunks] == [10, 10, 5]
    assert [n for c in chunks for n in c[0]] == names
    assert all(len(c) == 2 for c in chunks)


def test_plain_chunks_read_through_the_driver_equal_the_result_s(engine: Engine) -> None:
    """Numbers and text read through PostgreSQL's own server-side cursor (``plain``), bound values and
    an IN list included, are the rows SQLAlchemy's result gives; elsewhere ``plain`` changes nothing."""
    now = datetime(2024, 1, 1, tzinfo=UTC)
    names = [f"m-{i:02d}" for i in range(25)]
    with engine.begin() as conn:
        conn.execute(insert(model_t), [{"name": n, "active": True, "created_at": now} for n in names])
    stmt = (
        select(model_t.c.id, model_t.c.name, (model_t.c.id * 0.5).label("half"))
        .where(model_t.c.name != "m-03", model_t.c.name.in_(names[:20]))
        .order_by(model_t.c.id)
    )
    with engine.connect() as conn, conn.begin():
        plain = list(column_chunks(conn, stmt, size=7, plain=True))
        again = list(column_chunks(conn, stmt, size=7, plain=True))  # a second cursor, the same transaction
    with engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(stmt).all()]
    assert [len(c[0]) for c in plain] == [7, 7, 5]
    read = [row for chunk in plain for row in zip(*chunk, strict=True)]
    assert read == rows
    assert [tuple(map(type, row)) for row in read] == [tuple(map(type, row)) for row in rows]
    assert again == plain


def test_weekly_shares_count_each_side_in_its_utc_monday_week(engine: Engine) -> None:
    rng = np.random.default_rng(3)
    start = datetime(2024, 3, 3, 23, 59, 59, tzinfo=UTC)  # a Sunday, one second before a new week
    models = ["alpha", "bravo", "charlie", "delta"]
    records = []
    for i in range(300):
        a, b = rng.choice(4, 2, replace=False)
        moment = start + timedelta(seconds=float(rng.integers(0, 40 * 86_400)) if i else 0.0)
        records.append(
            BattleRecord(
                where=f"row {i}",
                model_a=models[a],
                model_b=models[b],
                winner="model_a",
                question_id=f"q{i}",
                tstamp=moment.timestamp(),
            )
        )
    with engine.begin() as conn:
        import_battle_records(conn, records)
    expected: dict[str, Counter[str]] = {}
    for r in records:
        day = datetime.fromtimestamp(r.tstamp or 0.0, UTC).date()
        sides = expected.setdefault((day - timedelta(days=day.weekday())).isoformat(), Counter())
        sides[r.model_a] += 1
        sides[r.model_b] += 1
    shares = weekly_battle_shares(engine)
    assert list(shares) == sorted(expected)
    assert "2024-02-26" in shares  # the Sunday battle belongs to the week before
    for week, counts in expected.items():
        total = sum(counts.values())
        assert shares[week] == {m: round(counts[m] / total, 6) for m in sorted(counts)}
