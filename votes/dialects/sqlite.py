"""SQLite, the embedded store: one file in WAL mode, one writer at a time, every commit synced.

Every transaction but a read-only one begins ``IMMEDIATE``: a writer takes the database's one write lock
at its start instead of failing with SQLITE_BUSY half-way through, and that lock is what orders the live
votes (no row locks needed). Readers (``read_only``) begin deferred: with WAL they see one snapshot and
never wait for, or hold up, the writer. Times are stored as ISO text, which the fast reads hand to numpy
as they are; bulk paths go through the ``sqlite3`` driver itself, around SQLAlchemy's per-row work.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Index,
    String,
    Table,
    bindparam,
    cast,
    event,
    func,
    text,
    type_coerce,
)
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql import Executable
from sqlalchemy.sql.elements import ColumnElement, UnaryExpression
from sqlalchemy.sql.operators import custom_op
from sqlmodel import create_engine

from votes.dialects.base import (
    READ_ONLY_OPTION,
    CopyError,
    Dialect,
    LockMode,
    cursor_chunks,
    json_texts,
    naive_utc,
    stored_type,
)

__all__ = [
    "BACKUP_PAGES",
    "BUSY_TIMEOUT_MS",
    "SQLITE",
    "STEP_CACHE_KIB",
    "STEP_CHECKPOINT_PAGES",
    "SQLiteDialect",
    "number_literal",
]

T = TypeVar("T")

#: How long a connection waits for the write lock before it fails, milliseconds.
BUSY_TIMEOUT_MS = 30_000
#: Page cache of an import run's step, KiB: a step's dirty pages (hash-ordered ``battle.import_digest``
#: entries land on thousands of index pages) must fit, or SQLite spills them to the log mid-step and
#: writes the same page again at commit.
STEP_CACHE_KIB = 65_536
#: Write-ahead log pages an import run's step may leave before it copies them into the database (a
#: checkpoint; SQLite's default is 1,000). A step dirties thousands of index pages, so with the default
#: every step ended in a checkpoint that copied (and synced) each of them, though most are written again
#: by the next steps; with a longer log a page rewritten by several steps is copied once. 1M rows: 28
#: CPU seconds instead of 34 for the bare inserts, a third less system time. The run checkpoints and
#: truncates the log when it ends (:meth:`SQLiteDialect.truncate_log`).
STEP_CHECKPOINT_PAGES = 50_000
#: Pages copied per step of SQLite's online backup; writers get the lock between steps.
BACKUP_PAGES = 1024


def number_literal(values: Sequence[Any]) -> str | None:
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


def _stored_column(column_type: Any, values: list[Any]) -> list[Any]:
    """A column's values as SQLAlchemy's SQLite types store them: naive UTC ISO datetimes with
    microseconds, JSON text, 0/1. A type decorator (SQLModel's ``UTCDateTime``) is read through to the
    type it stores as: written raw, an aware datetime would be stored as ``... +00:00`` text, which sorts
    and compares differently from every other row's ``... .000000``."""
    column_type = stored_type(column_type)
    if isinstance(column_type, DateTime):
        return [
            None if v is None else naive_utc(v).isoformat(sep=" ", timespec="microseconds") for v in values
        ]
    if isinstance(column_type, JSON):
        return json_texts(values)
    if isinstance(column_type, Boolean):
        if values and type(values[0]) is bool and values.count(values[0]) == len(values):  # counted in C
            return [int(values[0])] * len(values)  # one flag throughout (a run's own rows, mostly)
        return [None if v is None else int(v) for v in values]
    return values


def _configure(engine: Engine, *, memory: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the sqlite3 module, decide where transactions begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not memory:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        if connection.get_execution_options().get(READ_ONLY_OPTION):
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")


class SQLiteDialect(Dialect):
    """SQLite (see the module)."""

    name: ClassVar[str] = "sqlite"
    merges_beside: ClassVar[bool] = False
    merges_in_one_statement: ClassVar[bool] = False
    numbers_inserts_in_order: ClassVar[bool] = True
    has_sequences: ClassVar[bool] = False
    skips_key_checks: ClassVar[bool] = False
    times_stored_as_text: ClassVar[bool] = True
    packs_scans: ClassVar[bool] = True
    cheap_index_appends: ClassVar[bool] = True
    alters_by_copy: ClassVar[bool] = True
    backup_file: ClassVar[str] = "database.sqlite3"

    def make_engine(self, url: str, *, echo: bool, pool_size: int) -> Engine:  # noqa: ARG002 - no pool to size
        """WAL journal, ``synchronous=FULL`` (a commit is on disk before it returns), a busy timeout,
        foreign keys on, and ``BEGIN IMMEDIATE`` transactions. An in-memory URL shares one connection
        (``StaticPool``) so that every session sees the same database."""
        memory = self.database_file(url) is None
        kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
        if memory:
            kwargs["poolclass"] = StaticPool
        engine = create_engine(url, echo=echo, hide_parameters=True, **kwargs)
        _configure(engine, memory=memory)
        return engine

    def database_file(self, url: str | URL) -> Path | None:
        database = (make_url(url) if isinstance(url, str) else url).database
        return None if database in (None, "", ":memory:") else Path(str(database))

    def member(self, column: ColumnElement[Any], values: Sequence[Any]) -> ColumnElement[bool]:
        return column.in_(values)

    def insert_or_skip(self, table: Any, values: Any, *, unique: Sequence[str]) -> Executable:
        return sqlite_insert(table).values(values).on_conflict_do_nothing(index_elements=list(unique))

    def stored_time(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        """The stored text as it is, parsed by numpy (:func:`votes.reads.scans.seconds_array`)."""
        return type_coerce(column, String)

    def seconds_text(self, column: ColumnElement[Any]) -> ColumnElement[str]:
        """Stored as ``YYYY-MM-DD HH:MM:SS.ffffff`` (UTC); ``strftime('%s')`` gives the whole seconds."""
        stored = cast(column, String)
        return func.strftime("%s", stored).concat(".").concat(func.substr(stored, 21, 6))

    def unindexed(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        """``+column``: SQLite's documented way to keep a term off an index."""
        return UnaryExpression(column, operator=custom_op("+"), type_=column.type)

    def immutable_guards(self, table: str, message: str) -> tuple[str, ...]:
        return (
            f"CREATE TRIGGER IF NOT EXISTS {table}_no_update BEFORE UPDATE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{message}'); END",
            f"CREATE TRIGGER IF NOT EXISTS {table}_no_delete BEFORE DELETE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{message}'); END",
        )

    def column_chunks(
        self,
        conn: Connection,
        stmt: Executable,
        *,
        size: int,
        plain: bool,  # noqa: ARG002 - every value comes from the driver as it is
    ) -> Iterator[list[tuple[Any, ...]]]:
        """Straight from the driver's cursor, without a SQLAlchemy row per vote or its result processing
        (a third of reading a million votes). Executed without ``yield_per``: a streamed result reads its
        first row ahead, and that row would be missing from the cursor; sqlite3 steps through the rows as
        they are fetched anyway."""
        result = conn.execute(stmt)
        try:
            yield from cursor_chunks(result.cursor, size)
        finally:
            result.close()

    def insert_columns(
        self, conn: Connection, table: Table, columns: Mapping[str, Sequence[Any]], *, stored: Sequence[str]
    ) -> None:
        """One prepared ``executemany`` of plain tuples, the values converted to what SQLite stores."""
        names = list(columns)
        converted = {
            n: columns[n] if n in stored else _stored_column(table.c[n].type, list(columns[n])) for n in names
        }
        # A column holding the same number in every row (the run's id, a flag, a weight of one) is written
        # into the statement once: executemany binds each value of each row, a tenth of its time per column
        # at a million rows.
        literals = {n: lit for n in names if (lit := number_literal(converted[n])) is not None}
        bound = [n for n in names if n not in literals] or names[:1]
        literals = {n: lit for n, lit in literals.items() if n not in bound}
        header = ", ".join(f'"{n}"' for n in [*bound, *literals])
        slots = ", ".join(["?"] * len(bound) + list(literals.values()))
        conn.exec_driver_sql(
            f"INSERT INTO {table.name} ({header}) VALUES ({slots})",  # nosec B608  # table's names, numbers
            list(zip(*(converted[n] for n in bound), strict=True)),
        )

    def lock_tables(self, conn: Connection, tables: Sequence[str], mode: LockMode) -> None:  # noqa: ARG002
        """Nothing to take: the transaction holds the database's one write lock from its start (``BEGIN
        IMMEDIATE``), and readers see their own snapshot."""

    def next_id_sql(self, table: str, column: str) -> str:  # noqa: ARG002
        raise NotImplementedError("SQLite has no sequences: an id is the largest stored plus one")

    @contextmanager
    def quick_step(self, conn: Connection, *, synced: bool, foreign_keys: bool) -> Iterator[Connection]:
        """``synchronous=NORMAL`` in WAL mode (``FULL`` when ``synced``), a page cache of
        :data:`STEP_CACHE_KIB` and up to :data:`STEP_CHECKPOINT_PAGES` left in the log; foreign keys
        switched off before the transaction begins (SQLite ignores the setting inside one). The pooled
        connection's own settings are set back after it."""
        driver = conn.connection.driver_connection
        assert driver is not None  # nosec B101 # type narrowing: a connection checked out of the pool
        driver.execute(f"PRAGMA synchronous={'FULL' if synced else 'NORMAL'}")
        cache = int(driver.execute("PRAGMA cache_size").fetchone()[0])
        checkpoint = int(driver.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        driver.execute(f"PRAGMA cache_size=-{STEP_CACHE_KIB}")
        driver.execute(f"PRAGMA wal_autocheckpoint={STEP_CHECKPOINT_PAGES}")
        keys = 0
        if not foreign_keys:
            keys = int(driver.execute("PRAGMA foreign_keys").fetchone()[0])
            driver.execute("PRAGMA foreign_keys=OFF")
        try:
            with conn.begin():
                yield conn
        finally:
            driver.execute("PRAGMA synchronous=FULL")
            driver.execute(f"PRAGMA cache_size={cache}")
            driver.execute(f"PRAGMA wal_autocheckpoint={checkpoint}")
            if not foreign_keys:
                driver.execute(f"PRAGMA foreign_keys={keys}")

    def commits_seen(self, conn: Connection) -> int | None:
        """``PRAGMA data_version``, read through the driver outside any transaction of the connection's
        own: it changes when *another* connection commits."""
        driver = conn.connection.driver_connection
        row = driver.execute("PRAGMA data_version").fetchone()  # type: ignore[union-attr]
        return int(row[0])

    def empty_tables(self, conn: Connection, tables: Sequence[str]) -> None:
        """A ``DELETE`` without ``WHERE``: SQLite frees the pages whole only while it enforces no foreign
        key (a step with ``foreign_keys=False``); otherwise it removes the rows one by one after listing
        them all in memory (about 23 MB per million rows)."""
        for table in tables:
            conn.execute(text(f"DELETE FROM {table}"))  # nosec B608  # the store's table names

    def truncate_log(self, engine: Engine) -> str | None:
        """A ``wal_checkpoint(TRUNCATE)``. A reader still on an old snapshot leaves the rest to a later
        checkpoint; that is said, not raised."""
        with engine.connect() as conn:
            driver = conn.connection.driver_connection
            try:
                busy = driver.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()  # type: ignore[union-attr]
            except sqlite3.OperationalError as exc:
                return str(exc)
        return "readers still on older pages" if busy and busy[0] else None

    def index_names(self, conn: Connection, tables: Sequence[str]) -> set[str]:
        query = text("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN :tables")
        found = conn.execute(query.bindparams(bindparam("tables", expanding=True)), {"tables": list(tables)})
        return {str(name) for name in found.scalars()}

    def drop_index(self, conn: Connection, index: Index, *, wait: float) -> bool:  # noqa: ARG002
        """Dropped at once: the transaction holds the write lock, and readers keep their snapshot."""
        index.drop(conn)
        return True

    def analyze(self, conn: Connection, tables: Sequence[str]) -> None:  # noqa: ARG002
        """Nothing: no statistics were ever gathered here (no ``ANALYZE``), so the planner keeps its own
        rules, which already prefer the indexes."""

    def copy_out(self, engine: Engine, target: Path, count: Callable[[Connection], T]) -> T:
        """Through SQLite's online backup API, step by step: between steps writers may commit, and SQLite
        restarts the copy of any page changed under it, so the copy is the database as of one moment;
        ``count`` reads the copy."""
        source = sqlite3.connect(self._file(engine.url), timeout=30)
        try:
            dest = sqlite3.connect(target)
            try:
                source.backup(dest, pages=BACKUP_PAGES)
            finally:
                dest.close()
        finally:
            source.close()
        return self._read(target, count)

    def check_copy(self, path: Path, what: str, check: Callable[[Connection], None]) -> None:
        """``PRAGMA integrity_check``, then ``check``, on a scratch copy: opening the backup itself in WAL
        mode would change its bytes."""
        with tempfile.TemporaryDirectory(prefix="arena-verify-") as tmp:
            scratch = Path(tmp) / self.backup_file
            shutil.copyfile(path, scratch)
            raw = sqlite3.connect(scratch)
            try:
                verdict = raw.execute("PRAGMA integrity_check").fetchall()
            finally:
                raw.close()
            if verdict != [("ok",)]:
                raise CopyError(f"{what}: integrity check failed: {verdict[:5]}")
            self._read(scratch, check)

    def copy_in(self, source: Path, url: URL, *, replace: bool) -> None:  # noqa: ARG002 - always whole
        """Every page of the target replaced, in one step under its write lock."""
        src = sqlite3.connect(source)
        try:
            dest = sqlite3.connect(self._file(url), timeout=30)
            try:
                src.backup(dest)
            finally:
                dest.close()
        finally:
            src.close()

    def _file(self, url: URL) -> Path:
        path = self.database_file(url)
        if path is None:
            raise CopyError("an in-memory SQLite database cannot be backed up or restored; use a file")
        return path

    def _read(self, path: Path, read: Callable[[Connection], T]) -> T:
        engine = self.make_engine(f"sqlite:///{path}", echo=False, pool_size=1)
        try:
            with engine.connect() as conn:
                return read(conn)
        finally:
            engine.dispose()


#: The one SQLite dialect.
SQLITE = SQLiteDialect()
