"""The storage dialect's interface: every operation whose SQL or driver calls differ between databases.

The rest of the storage asks its connection's dialect (:func:`votes.dialects.dialect_of`) instead of
testing the database's name: a capability (``merges_beside``, ``has_sequences``, ...) where a feature
takes one of two ways it implements itself, a method where the database does the work its own way
(engine settings, bulk insert, streamed reads, locks, indexes, log checkpoints, backups). Each database
is one module (:mod:`votes.dialects.sqlite`, :mod:`votes.dialects.postgresql`) with one instance of its
class; the helpers below are what both share (the value conversions of a bulk insert, a driver cursor
read in chunks).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from sqlalchemy import Index, Table, TypeDecorator, text
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.sql import Executable
from sqlalchemy.sql.elements import ColumnElement

from votes.collector import gc_paused

__all__ = [
    "READ_ONLY_OPTION",
    "CopyError",
    "Dialect",
    "LockMode",
    "cursor_chunks",
    "json_texts",
    "naive_utc",
    "stored_type",
]

#: The execution option of connections that only read (:func:`votes.db.read_only`): SQLite begins their
#: transactions deferred, so they take no write lock.
READ_ONLY_OPTION = "arena_read_only"

#: How strongly :meth:`Dialect.lock_tables` keeps other transactions off a table, in PostgreSQL's words:
#: ``SHARE ROW EXCLUSIVE`` lets readers in and no other writer, ``EXCLUSIVE`` likewise but also
#: refuses the row locks of ``SELECT ... FOR UPDATE``, ``ACCESS EXCLUSIVE`` lets nobody in.
LockMode = Literal["SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE"]

T = TypeVar("T")


class CopyError(Exception):
    """A copy of the store that cannot be taken, checked or loaded (a database's tool missing or
    failing, a store with no file to copy); the message says why."""


class Dialect(ABC):
    """What differs between the databases Arena stores votes in (see the module)."""

    #: The database's name as SQLAlchemy spells it (``engine.dialect.name``) and as backups record it.
    name: ClassVar[str]
    #: An import run merges beside its staging, in one transaction of its own that commits at the end
    #: (readers never wait for writers), rather than in short transactions after the staging (one
    #: writer at a time): :mod:`votes.imports.merge_alongside`.
    merges_beside: ClassVar[bool]
    #: One statement may insert into two tables with ids drawn from a sequence (a data-modifying
    #: ``WITH``): an import's merge step writes battles and their votes in one statement.
    merges_in_one_statement: ClassVar[bool]
    #: The rows of one ``INSERT ... SELECT`` get consecutive ids after the largest stored one (one
    #: writer, no sequence): a merge step numbers its votes' battles without looking them up.
    numbers_inserts_in_order: ClassVar[bool]
    #: Ids come from each column's own sequence (:meth:`next_in_sequence`), never the largest plus one.
    has_sequences: ClassVar[bool]
    #: A statement may run without its foreign-key triggers, the keys checked set-wise instead
    #: (:mod:`votes.imports.merge_checks`).
    skips_key_checks: ClassVar[bool]
    #: Vote times are stored as ISO text (``YYYY-MM-DD HH:MM:SS.ffffff``, UTC): reads take the text as
    #: stored and numpy parses it (:meth:`stored_time`).
    times_stored_as_text: ClassVar[bool]
    #: Scans of many votes come packed in a few long texts per chunk (:mod:`votes.reads.packed`).
    packs_scans: ClassVar[bool]
    #: An index entry at an index's right edge (ids, times in order) costs next to nothing, so an import
    #: that dwarfs the store sets only the indexes written all over aside
    #: (:mod:`votes.imports.aside_indexes`).
    cheap_index_appends: ClassVar[bool]
    #: Alembic alters a table by copying it (a batch migration), with foreign keys unchecked meanwhile.
    alters_by_copy: ClassVar[bool]
    #: The name of the database's copy in a backup folder.
    backup_file: ClassVar[str]

    # -- engines ------------------------------------------------------------------------------------

    @abstractmethod
    def make_engine(self, url: str, *, echo: bool, pool_size: int) -> Engine:
        """An engine with the store's durability and transaction settings (``url`` normalised)."""

    @abstractmethod
    def database_file(self, url: str | URL) -> Path | None:
        """The file that holds the database ``url`` names, or None (in memory, or a server's)."""

    # -- statements ---------------------------------------------------------------------------------

    @abstractmethod
    def member(self, column: ColumnElement[Any], values: Sequence[Any]) -> ColumnElement[bool]:
        """``column IN values``, in the form the database plans best for many values."""

    @abstractmethod
    def insert_or_skip(self, table: Any, values: Any, *, unique: Sequence[str]) -> Executable:
        """An insert of ``values`` into ``table`` that skips a row whose ``unique`` columns are taken."""

    @abstractmethod
    def stored_time(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        """A time column as read fast: the stored text as it is where times are text, else the column."""

    @abstractmethod
    def seconds_text(self, column: ColumnElement[Any]) -> ColumnElement[str]:
        """A time as seconds since the epoch with six decimals, formatted by the database."""

    @abstractmethod
    def unindexed(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        """``column`` as a grouping term the planner will not read through an index (for a query
        whose other condition selects better through another index)."""

    @abstractmethod
    def immutable_guards(self, table: str, message: str) -> tuple[str, ...]:
        """Statements creating (idempotently) the triggers that refuse every change to ``table``'s rows
        with ``message``."""

    # -- bulk reads and writes -----------------------------------------------------------------------

    @abstractmethod
    def column_chunks(
        self, conn: Connection, stmt: Executable, *, size: int, plain: bool
    ) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of ``stmt`` in chunks of at most ``size`` rows, each chunk as its columns, streamed
        (see :func:`votes.bulk.column_chunks`)."""

    @abstractmethod
    def insert_columns(
        self, conn: Connection, table: Table, columns: Mapping[str, Sequence[Any]], *, stored: Sequence[str]
    ) -> None:
        """Insert rows given as columns through the driver's bulk path, in the caller's transaction
        (see :func:`votes.bulk.bulk_insert_columns`)."""

    # -- transactions and locks ----------------------------------------------------------------------

    @abstractmethod
    def lock_tables(self, conn: Connection, tables: Sequence[str], mode: LockMode) -> None:
        """Keep other transactions off ``tables`` (as ``mode`` says) until this one ends."""

    @abstractmethod
    def next_id_sql(self, table: str, column: str) -> str:
        """SQL drawing the next value of ``table.column``'s sequence (:attr:`has_sequences` only)."""

    def next_in_sequence(self, conn: Connection, table: str, column: str) -> int:
        """A value drawn from the sequence of ``table.column`` (:attr:`has_sequences` only)."""
        return int(conn.execute(text(f"SELECT {self.next_id_sql(table, column)}")).scalar_one())  # nosec B608

    @abstractmethod
    def quick_step(
        self, conn: Connection, *, synced: bool, foreign_keys: bool
    ) -> AbstractContextManager[Connection]:
        """A transaction on ``conn`` whose commit does not wait for the disk (``synced``: it does), still
        atomic and consistent; ``foreign_keys=False``: where the database can, it checks no foreign key
        in it (for a step that can break none)."""

    @abstractmethod
    def commits_seen(self, conn: Connection) -> int | None:
        """A number that changes when another connection commits, read on ``conn`` outside a
        transaction; None where the database does not tell."""

    @abstractmethod
    def empty_tables(self, conn: Connection, tables: Sequence[str]) -> None:
        """Remove every row of ``tables`` at once, their pages freed whole, in the caller's transaction
        (a step with ``foreign_keys=False`` where the database needs it)."""

    @abstractmethod
    def truncate_log(self, engine: Engine) -> str | None:
        """Copy the database's write-ahead log into it and truncate the log after a long write; why it
        was left for later, or None (done, or nothing to do)."""

    # -- indexes -------------------------------------------------------------------------------------

    @abstractmethod
    def index_names(self, conn: Connection, tables: Sequence[str]) -> set[str]:
        """The names of the indexes on ``tables``, in one statement."""

    @abstractmethod
    def drop_index(self, conn: Connection, index: Index, *, wait: float) -> bool:
        """Drop ``index`` in the caller's transaction, waiting at most ``wait`` seconds for the readers
        of its table; whether it did."""

    @abstractmethod
    def analyze(self, conn: Connection, tables: Sequence[str]) -> None:
        """Refresh the planner's statistics of ``tables`` where the planner keeps them."""

    # -- backups -------------------------------------------------------------------------------------

    @abstractmethod
    def copy_out(self, engine: Engine, target: Path, count: Callable[[Connection], T]) -> T:
        """Write a consistent copy of the store to ``target`` and return what ``count`` reads on a
        connection that sees the very moment the copy holds. Raises :class:`CopyError`."""

    @abstractmethod
    def check_copy(self, path: Path, what: str, check: Callable[[Connection], None]) -> None:
        """Check a copy without changing it: as far as the database can without restoring it, and
        ``check`` on a connection to it where one can be opened. Raises :class:`CopyError`."""

    @abstractmethod
    def copy_in(self, source: Path, url: URL, *, replace: bool) -> None:
        """Load the copy ``source`` into the database ``url`` (``replace``: over what it holds).
        Raises :class:`CopyError`."""


def cursor_chunks(cursor: Any, size: int) -> Iterator[list[tuple[Any, ...]]]:
    """A driver cursor's rows, ``size`` at a time, each chunk as its columns."""
    while True:
        with gc_paused():
            rows = cursor.fetchmany(size)
            chunk = list(zip(*rows, strict=True))
        if not rows:
            return
        yield chunk


def stored_type(column_type: Any) -> Any:
    """The type a column stores as (through a type decorator)."""
    return column_type.impl_instance if isinstance(column_type, TypeDecorator) else column_type


def naive_utc(moment: datetime) -> datetime:
    """``moment`` in UTC without its offset (a naive one is taken as UTC already)."""
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)


def _json_text(value: Any) -> Any:
    return None if value is None else json.dumps(value, ensure_ascii=False, allow_nan=False)


def json_texts(values: Sequence[Any]) -> list[Any]:
    """Each value as JSON text (None stays None), each distinct flat object encoded once: an import's
    ``extra`` column holds a handful of distinct small objects over a million rows. The memo key
    carries every value's type, so ``{"turn": 1}`` and ``{"turn": true}`` (equal in Python) stay apart."""
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
