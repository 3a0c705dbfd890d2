"""Bulk reads and writes shared by the imports: chunked look-ups, get-or-create of models, what is stored."""

from __future__ import annotations

import itertools
import json
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Integer,
    String,
    Table,
    TypeDecorator,
    any_,
    bindparam,
    insert,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Executable
from sqlalchemy.sql.elements import ClauseElement, ColumnElement

from votes.collector import gc_paused
from votes.models import utcnow
from votes.names import case_collisions, model_name
from votes.tables import model_t, output_t, prompt_t

__all__ = [
    "CHUNK",
    "ImportCounts",
    "bulk_insert",
    "bulk_insert_columns",
    "chunks",
    "column_chunks",
    "ensure_models",
    "existing_output_samples",
    "existing_outputs",
    "existing_prompts",
    "gc_paused",
    "member",
]

#: Values per look-up statement.
CHUNK = 1000
T = TypeVar("T")


@dataclass
class ImportCounts:
    """What an import added: models, prompts, outputs, and rows (battles with their votes, or outputs)."""

    models: int = 0
    prompts: int = 0
    outputs: int = 0
    rows: int = 0
    #: New model names that differ only in case from an existing one: ``(new, existing)``.
    name_collisions: list[tuple[str, str]] = field(default_factory=list)


def member(conn: Connection, column: ColumnElement[Any], values: Sequence[Any]) -> ColumnElement[bool]:
    """``column IN values``. On PostgreSQL one array parameter (``= ANY(:values)``) instead of one parameter
    per value: psycopg prepares repeated statements, and a generic plan over a thousand parameters on a
    freshly bulk-loaded table can take seconds per lookup."""
    if conn.dialect.name == "postgresql":
        numbers = BigInteger() if isinstance(column.type, BigInteger) else Integer()
        element_type = numbers if values and isinstance(values[0], int) else String()
        return column == any_(bindparam(None, list(values), type_=ARRAY(element_type)))
    return column.in_(values)


def column_chunks(
    conn: Connection, stmt: Executable, *, size: int, plain: bool = False
) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of ``stmt`` in chunks of at most ``size`` rows, each chunk as its columns (one tuple of
    values per selected column), streamed.

    On SQLite the chunks come straight from the driver's cursor, without a SQLAlchemy row per vote or its
    result processing (a third of reading a million votes): values are as the driver gives them, so a
    time is its stored text and a boolean 0 or 1 (select a time with ``type_coerce(..., String)`` so that
    every backend hands back what the caller parses). PostgreSQL's streamed result reads ahead on its
    cursor, so there the rows go through SQLAlchemy, unless ``plain``: the statement selects only
    integers, floats and text and binds only plain values (no column type of the project's own that
    converts them either way), which the driver hands over as SQLAlchemy would, and the rows are read
    through a server-side cursor of the driver's own (the live-rating replay of 1M votes: 1.6 s
    instead of 2.7 s).
    """
    if plain and conn.dialect.name == "postgresql":
        yield from _driver_chunks(conn, stmt, size)
        return
    if conn.dialect.name == "sqlite":
        # Executed without ``yield_per``: a streamed result reads its first row ahead, and that row would
        # be missing from the cursor. sqlite3 steps through the rows as they are fetched anyway.
        result = conn.execute(stmt)
        try:
            yield from _cursor_chunks(result.cursor, size)
        finally:
            result.close()
        return
    with conn.execute(stmt, execution_options={"yield_per": size}) as streamed:
        for part in streamed.partitions():
            with gc_paused():
                chunk = list(zip(*part, strict=True))
            yield chunk


def _driver_chunks(conn: Connection, stmt: Executable, size: int) -> Iterator[list[tuple[Any, ...]]]:
    """:func:`column_chunks` on PostgreSQL through a named (server-side) psycopg cursor, in the
    connection's transaction: the statement compiled as SQLAlchemy would send it."""
    if not isinstance(stmt, ClauseElement):
        raise TypeError(f"a statement to compile, not {type(stmt).__name__}")
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    conn.exec_driver_sql("SELECT 1")  # the transaction SQLAlchemy knows of, begun if it was not
    driver = conn.connection.driver_connection
    with driver.cursor(name=f"arena_chunks_{next(_CURSOR_NUMBERS)}") as cursor:  # type: ignore[union-attr]
        cursor.itersize = size
        cursor.execute(str(compiled), compiled.params)
        yield from _cursor_chunks(cursor, size)


def _cursor_chunks(cursor: Any, size: int) -> Iterator[list[tuple[Any, ...]]]:
    """A driver cursor's rows, ``size`` at a time, each chunk as its columns."""
    while True:
        with gc_paused():
            rows = cursor.fetchmany(size)
            chunk = list(zip(*rows, strict=True))
        if not rows:
            return
        yield chunk


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def ensure_models(
    conn: Connection, names: Iterable[str], added: ImportCounts, created: list[int] | None = None
) -> dict[str, int]:
    """Model ids by name, creating the missing models (their ids appended to ``created`` when given)."""
    wanted = sorted(set(names))
    ids: dict[str, int] = {}
    for chunk in chunks(wanted):
        stmt = select(model_t.c.name, model_t.c.id).where(member(conn, model_t.c.name, chunk))
        ids.update((str(n), int(i)) for n, i in conn.execute(stmt))
    missing = [n for n in wanted if n not in ids]
    for n in missing:  # the readers normalised already; this holds every other door to the same rule
        if model_name(n) != n:
            raise ValueError(f"model name {n!r} is not in its normal form ({model_name(n)!r})")
    if missing:
        known = [str(n) for n in conn.execute(select(model_t.c.name)).scalars()]
        added.name_collisions.extend(case_collisions(missing, known))
        now = utcnow()
        conn.execute(
            insert(model_t),
            [{"name": n, "active": True, "created_at": now} for n in missing],
        )
        for chunk in chunks(missing):
            stmt = select(model_t.c.name, model_t.c.id).where(member(conn, model_t.c.name, chunk))
            ids.update((str(n), int(i)) for n, i in conn.execute(stmt))
        added.models += len(missing)
        if created is not None:
            created.extend(ids[n] for n in missing)
    return ids


def existing_prompts(conn: Connection, external_ids: Iterable[str]) -> dict[str, int]:
    wanted = sorted(set(external_ids))
    ids: dict[str, int] = {}
    for chunk in chunks(wanted):
        stmt = select(prompt_t.c.external_id, prompt_t.c.id).where(
            member(conn, prompt_t.c.external_id, chunk)
        )
        ids.update((str(e), int(i)) for e, i in conn.execute(stmt))
    return ids


def existing_outputs(
    conn: Connection, prompt_ids: Iterable[int]
) -> dict[tuple[int, int], tuple[int, Any, str]]:
    """(prompt id, model id) -> (output id, conversation, text) of each model's first sample (0)."""
    return {(p, m): found for (p, m, s), found in existing_output_samples(conn, prompt_ids).items() if s == 0}


def existing_output_samples(
    conn: Connection, prompt_ids: Iterable[int]
) -> dict[tuple[int, int, int], tuple[int, Any, str]]:
    """(prompt id, model id, sample) -> (output id, conversation, text) for the given prompts."""
    wanted = sorted(set(prompt_ids))
    found: dict[tuple[int, int, int], tuple[int, Any, str]] = {}
    for chunk in chunks(wanted):
        stmt = select(
            output_t.c.prompt_id,
            output_t.c.model_id,
            output_t.c.sample,
            output_t.c.id,
            output_t.c.conversation,
            output_t.c.text,
        ).where(member(conn, output_t.c.prompt_id, chunk))
        for p, m, s, o, conv, text in conn.execute(stmt):
            found[(p, m, s)] = (o, conv, text)
    return found


def _sqlite_column(column_type: Any, values: list[Any]) -> list[Any]:
    """A column's values as SQLAlchemy's SQLite types store them: naive UTC ISO datetimes with
    microseconds, JSON text, 0/1. A type decorator (SQLModel's ``UTCDateTime``) is read through to the
    type it stores as: written raw, an aware datetime would be stored as ``... +00:00`` text, which sorts
    and compares differently from every other row's ``... .000000``."""
    column_type = _stored_type(column_type)
    if isinstance(column_type, DateTime):
        return [
            None if v is None else _naive_utc(v).isoformat(sep=" ", timespec="microseconds") for v in values
        ]
    if isinstance(column_type, JSON):
        return _json_texts(values)
    if isinstance(column_type, Boolean):
        if values and type(values[0]) is bool and values.count(values[0]) == len(values):  # counted in C
            return [int(values[0])] * len(values)  # one flag throughout (a run's own rows, mostly)
        return [None if v is None else int(v) for v in values]
    return values


#: Names of the driver's server-side cursors, unique in the process.
_CURSOR_NUMBERS = itertools.count()


def _number_literal(values: Sequence[Any]) -> str | None:
    """The SQL literal of the one number every value is, or None: an ``int`` of 64 bits, or a ``float``
    holding a whole number of 53 bits (its text then reads back exactly); one type throughout, so a
    column mixing ``1`` and ``1.0`` is bound as it was."""
    if not isinstance(values, list) or not values:
        return None
    first = values[0]
    kind = type(first)
    if kind is int:
        if not -(2**63) <= first < 2**63:
            return None
        literal = str(first)
    elif kind is float:
        if not (first.is_integer() and abs(first) <= 2**53):
            return None
        literal = repr(first)
    else:
        return None
    if values.count(first) != len(values) or len(set(map(type, values))) != 1:  # both counted in C
        return None
    return literal


def _some_value(values: Sequence[Any]) -> bool:
    if isinstance(values, list):
        return values.count(None) != len(values)  # counted in C: a million rows in milliseconds
    return any(v is not None for v in values)


def _has_default(table: Table, name: str) -> bool:
    column = table.c[name]
    return column.default is not None or column.server_default is not None


def _stored_type(column_type: Any) -> Any:
    """The type a column stores as (through a type decorator)."""
    return column_type.impl_instance if isinstance(column_type, TypeDecorator) else column_type


def _naive_utc(moment: datetime) -> datetime:
    """``moment`` in UTC without its offset (a naive one is taken as UTC already)."""
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)


def _json_text(value: Any) -> Any:
    return None if value is None else json.dumps(value, ensure_ascii=False, allow_nan=False)


def _json_texts(values: Sequence[Any]) -> list[Any]:
    """:func:`_json_text` of each value, each distinct flat object encoded once: an import's ``extra``
    column holds a handful of distinct small objects over a million rows. The memo key carries every
    value's type, so ``{"turn": 1}`` and ``{"turn": true}`` (equal in Python) stay apart."""
    memo: dict[Any, Any] = {}
    out: list[Any] = []
    for value in values:
        key = None
        if isinstance(value, dict):
            key = tuple((k, type(v), v) for k, v in value.items())
            try:
                hash(key)
            except TypeError:  # a nested list or object: encoded as it comes
                key = None
        if key is None:
            out.append(_json_text(value))
            continue
        text = memo.get(key)
        if text is None:
            text = memo[key] = _json_text(value)
        out.append(text)
    return out


def bulk_insert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows (dictionaries keyed by column) through :func:`bulk_insert_columns`."""
    if not rows:
        return
    names = list(rows[0])
    bulk_insert_columns(conn, table, {n: [row[n] for row in rows] for n in names})


def bulk_insert_columns(
    conn: Connection, table: Table, columns: Mapping[str, Sequence[Any]], *, stored: Collection[str] = ()
) -> None:
    """Insert rows given as columns (equal lengths) through the driver's bulk path, inside the caller's
    transaction: PostgreSQL ``COPY`` (psycopg's copy API), SQLite one prepared ``executemany`` of plain
    tuples. Both skip SQLAlchemy's per-row parameter processing, which costs more than the insert itself
    at a million rows. Columns named in ``stored`` already hold what the column stores (JSON as its text,
    a time as naive UTC ISO text with microseconds, a flag as 0/1) and are passed as they are."""
    names = list(columns)
    if not names or not len(columns[names[0]]):
        return
    # A column that is None in every row and has no default is left out: NULL all the same, and
    # executemany then binds (and converts) less.
    kept = [n for n in names if _has_default(table, n) or _some_value(columns[n])]
    names = kept or names[:1]
    if conn.dialect.name == "postgresql":
        json_columns = {c.name for c in table.columns if isinstance(c.type, JSON)} - set(stored)
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        header = ", ".join(f'"{n}"' for n in names)
        values = [_json_texts(columns[n]) if n in json_columns else columns[n] for n in names]
        for i, n in enumerate(names):  # stored times are naive UTC text: say UTC to a timestamptz column
            if n in stored and isinstance(_stored_type(table.c[n].type), DateTime):
                values[i] = [None if v is None else f"{v}+00:00" for v in values[i]]
        with cursor, cursor.copy(f"COPY {table.name} ({header}) FROM STDIN") as copy:  # nosec B608
            for row in zip(*values, strict=True):
                copy.write_row(row)
        return
    converted = {
        n: columns[n] if n in stored else _sqlite_column(table.c[n].type, list(columns[n])) for n in names
    }
    # A column holding the same number in every row (the run's id, a flag, a weight of one) is written
    # into the statement once: executemany binds each value of each row, a tenth of its time per column
    # at a million rows.
    literals = {n: lit for n in names if (lit := _number_literal(converted[n])) is not None}
    bound = [n for n in names if n not in literals] or names[:1]
    literals = {n: lit for n, lit in literals.items() if n not in bound}
    header = ", ".join(f'"{n}"' for n in [*bound, *literals])
    slots = ", ".join(["?"] * len(bound) + list(literals.values()))
    conn.exec_driver_sql(
        f"INSERT INTO {table.name} ({header}) VALUES ({slots})",  # nosec B608  # table's names, numbers
        list(zip(*(converted[n] for n in bound), strict=True)),
    )
