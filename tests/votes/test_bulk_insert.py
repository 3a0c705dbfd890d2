"""The bulk insert writes what the rows hold, whether a column's value is bound per row or, holding the
same number in every row, written once into the statement; on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Boolean, Column, Float, Integer, MetaData, String, Table, func, select
from sqlalchemy.engine import Engine

from votes.bulk import bulk_insert_columns
from votes.dialects.sqlite import number_literal

META = MetaData()
THINGS = Table(
    "bulk_things",
    META,
    Column("id", Integer, primary_key=True),
    Column("n", Integer, nullable=False),
    Column("x", Float, nullable=False),
    Column("flag", Boolean, nullable=False),
    Column("label", String(20)),
)


@pytest.mark.parametrize(
    ("values", "literal"),
    [
        ([7, 7, 7], "7"),
        ([-3], "-3"),
        ([1.0, 1.0], "1.0"),
        ([2.0**53, 2.0**53], "9007199254740992.0"),
        ([1, 2], None),  # not one value
        ([1, 1.0], None),  # one value, two types: bound as given
        ([0.5, 0.5], None),  # its text is exact, but only whole numbers are taken
        ([2.0**60], None),  # past 53 bits
        ([2**64], None),  # past 64 bits
        (["a", "a"], None),  # text is always bound
        ([None, None], None),
        ([], None),
        ((1, 1), None),  # only lists (the converted columns)
    ],
)
def test_only_one_exact_number_becomes_a_literal(values: Any, literal: str | None) -> None:
    assert number_literal(values) == literal


def _stored(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(THINGS).order_by(THINGS.c.id)).all()]


@pytest.mark.parametrize(
    "columns",
    [
        {"n": [5, 5, 5], "x": [1.0, 1.0, 1.0], "flag": [True, True, True], "label": ["a", "b", None]},
        {"n": [5, 6, 5], "x": [1.0, 2.5, 1.0], "flag": [True, False, True], "label": ["a", "a", "a"]},
        {"n": [5, 5, 5], "x": [1.0, 1.0, 1.0], "flag": [False, False, False], "label": [None, None, None]},
    ],
    ids=["numbers constant", "numbers varying", "every column constant"],
)
def test_the_rows_read_back_as_given(engine: Engine, columns: dict[str, list[Any]]) -> None:
    META.create_all(engine)
    with engine.begin() as conn:
        bulk_insert_columns(conn, THINGS, {"id": [1, 2, 3], **columns})
    rows = _stored(engine)
    assert rows == [
        (i, n, x, f, label)
        for i, n, x, f, label in zip(
            [1, 2, 3], columns["n"], columns["x"], columns["flag"], columns["label"], strict=True
        )
    ]
    assert all(type(x) is float and type(n) is int for _, n, x, _, _ in rows)
    if engine.dialect.name == "sqlite":  # the storage classes a bound value would have had
        with engine.connect() as conn:
            kinds = conn.execute(
                select(func.typeof(THINGS.c.n), func.typeof(THINGS.c.x), func.typeof(THINGS.c.flag))
            ).all()
        assert set(kinds) == {("integer", "real", "integer")}
