"""Bulk reads and writes shared by the imports: chunked look-ups, get-or-create of models, what is stored."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Table, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql import Executable
from sqlalchemy.sql.elements import ColumnElement

from votes.collector import gc_paused
from votes.dialects import dialect_of
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
    """``column IN values``, as the connection's dialect plans it best (on PostgreSQL one array parameter
    instead of a parameter per value: :meth:`votes.dialects.Dialect.member`)."""
    return dialect_of(conn).member(column, values)


def column_chunks(
    conn: Connection, stmt: Executable, *, size: int, plain: bool = False
) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of ``stmt`` in chunks of at most ``size`` rows, each chunk as its columns (one tuple of
    values per selected column), streamed.

    On SQLite the chunks come straight from the driver's cursor: values are as the driver gives them, so
    a time is its stored text and a boolean 0 or 1 (select a time with ``type_coerce(..., String)`` so
    that every backend hands back what the caller parses). On PostgreSQL the rows go through SQLAlchemy,
    unless ``plain``: the statement selects only integers, floats and text and binds only plain values,
    and the rows are read through a server-side cursor of the driver's own
    (:meth:`votes.dialects.Dialect.column_chunks`).
    """
    return dialect_of(conn).column_chunks(conn, stmt, size=size, plain=plain)


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


def _some_value(values: Sequence[Any]) -> bool:
    if isinstance(values, list):
        return values.count(None) != len(values)  # counted in C: a million rows in milliseconds
    return any(v is not None for v in values)


def _has_default(table: Table, name: str) -> bool:
    column = table.c[name]
    return column.default is not None or column.server_default is not None


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
    tuples (:meth:`votes.dialects.Dialect.insert_columns`). Both skip SQLAlchemy's per-row parameter
    processing, which costs more than the insert itself at a million rows. Columns named in ``stored``
    already hold what the column stores (JSON as its text, a time as naive UTC ISO text with microseconds,
    a flag as 0/1) and are passed as they are."""
    names = list(columns)
    if not names or not len(columns[names[0]]):
        return
    # A column that is None in every row and has no default is left out: NULL all the same, and
    # executemany then binds (and converts) less.
    kept = [n for n in names if _has_default(table, n) or _some_value(columns[n])]
    names = kept or names[:1]
    dialect_of(conn).insert_columns(conn, table, {n: columns[n] for n in names}, stored=list(stored))
