"""PostgreSQL's merge step checks its foreign keys once per row referred to, not per row added.

A database checks a foreign key once per inserted row and key: a merge step of 200,000 imported battles
and their votes ran a million such checks (five keys a pair that are set). On PostgreSQL each is a query
run by a trigger: 6.3 s of the step's 9 s on the server, against 3.0 s for the same inserts unchecked.
The rows of a step refer to few distinct rows (a hundred models), so the same guarantee costs a handful
of statements when taken the other way round (:meth:`MergeChecks.run`):

1. for each table the step's rows refer to, one statement locks every row referred to ``FOR KEY SHARE``
   (the very lock each per-row check takes, so no other transaction can delete or re-key one until the
   step commits) and counts them against the distinct ids the rows hold; one missing fails the step
   with the :class:`IntegrityError` the per-row check would have raised;
2. the insert statement then runs with ``session_replication_role = replica``, which skips triggers,
   and with it the per-row checks; the role is set back before anything else in the step.

A vote's battle is inserted by the same statement from the same staged row (:mod:`votes.imports.runs`),
so that key needs no check: the row is the step's own.

Used only where it checks exactly what the per-row checks would (:func:`merge_checks_for`, once per run):
on PostgreSQL (a dialect that :attr:`~votes.dialects.Dialect.skips_key_checks`), where ``battle`` and
``vote`` hold exactly the foreign keys the tables declare here, each on one column the staging table also
holds, the role may set ``session_replication_role`` (a superuser, or on PostgreSQL 15 and later a role
granted it: ``GRANT SET ON PARAMETER session_replication_role TO arena``) and the tables have no trigger
but the foreign keys' own. Otherwise the step keeps the per-row checks, as SQLite's merge steps always
do: there each check is an index look-up in the same process, and checking set-wise with SQLite's own
checks switched off saved 8% of an import, not worth a second way of checking a key.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from sqlalchemy import Table, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError

from votes.dialects import dialect_of
from votes.tables import battle_t, import_row_t, vote_t

__all__ = ["MergeChecks", "merge_checks_for"]

#: The staged rows of one merge step (the merge statement's own condition).
_STEP = "import_id = :run AND seq >= :lo AND seq < :hi AND fresh"
#: Foreign keys (table, column) the merge statement satisfies by construction: the step's own rows.
_OWN = {("vote", "battle_id")}
_CATALOG = text(
    "SELECT cl.relname, a.attname, ft.relname, fa.attname, cardinality(c.conkey)"
    " FROM pg_constraint c"
    " JOIN pg_class cl ON cl.oid = c.conrelid"
    " JOIN pg_class ft ON ft.oid = c.confrelid"
    " JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]"
    " JOIN pg_attribute fa ON fa.attrelid = c.confrelid AND fa.attnum = c.confkey[1]"
    " WHERE c.contype = 'f' AND c.conrelid IN (to_regclass('battle'), to_regclass('vote'))"
)
_OWN_TRIGGERS = text(
    "SELECT count(*) FROM pg_trigger"
    " WHERE tgrelid IN (to_regclass('battle'), to_regclass('vote')) AND NOT tgisinternal"
)


class MergeChecks(NamedTuple):
    """The parent tables a merge step's rows refer to: (table, its key column, staged columns)."""

    parents: tuple[tuple[str, str, tuple[str, ...]], ...]

    def run(self, conn: Connection, bounds: dict[str, Any], statement: Any) -> int:
        """Lock and count the rows the step refers to, then run the merge ``statement`` without the
        per-row checks; its row count. In the caller's transaction."""
        for parent, key, columns in self.parents:
            wanted, locked = conn.execute(_lock_statement(parent, key, columns), bounds).one()
            if wanted != locked:
                raise _gone(parent, wanted - locked, bounds)
        conn.execute(text("SET LOCAL session_replication_role = replica"))
        added = int(conn.execute(statement, bounds).rowcount)  # a failure aborts the step, setting and all
        conn.execute(text("SET LOCAL session_replication_role = origin"))
        return added


def _gone(parent: str, missing: int, params: dict[str, Any]) -> IntegrityError:
    return IntegrityError(
        f"check the {parent} rows of a merge step",
        params,
        ValueError(f"{missing} {parent} row(s) the staged rows refer to are gone"),
    )


def _lock_statement(parent: str, key: str, columns: tuple[str, ...]) -> Any:
    # names from the declared tables, matched against the catalog (merge_checks_for)
    needed = " UNION ".join(f"SELECT {c} AS id FROM importrow WHERE {_STEP}" for c in columns)  # nosec B608
    return text(
        f"WITH needed AS ({needed}),"  # nosec B608  # the names above
        f" locked AS (SELECT p.{key} FROM {parent} p WHERE p.{key} IN (SELECT id FROM needed)"
        " FOR KEY SHARE OF p)"
        " SELECT (SELECT count(DISTINCT id) FROM needed), (SELECT count(*) FROM locked)"
    )


def _declared(*tables: Table) -> set[tuple[str, str, str, str]]:
    return {
        (table.name, fk.parent.name, fk.column.table.name, fk.column.name)
        for table in tables
        for fk in table.foreign_keys
    }


def merge_checks_for(conn: Connection) -> MergeChecks | None:
    """The set-wise checks for this store and role, or None where a merge step keeps the database's
    per-row ones (see the module). Reads the catalog and tries the setting in a savepoint of the
    caller's transaction."""
    if not dialect_of(conn).skips_key_checks:
        return None
    rows = conn.execute(_CATALOG).all()
    if any(int(n) != 1 for *_, n in rows) or conn.execute(_OWN_TRIGGERS).scalar():
        return None
    found = {(str(t), str(c), str(p), str(k)) for t, c, p, k, _ in rows}
    declared = _declared(battle_t, vote_t)
    staged = set(import_row_t.c.keys())
    if found != declared:
        return None
    parents: dict[tuple[str, str], set[str]] = defaultdict(set)
    for table, column, parent, key in declared:
        if (table, column) in _OWN:
            continue
        if column not in staged:
            return None
        parents[(parent, key)].add(column)
    try:
        with conn.begin_nested():
            conn.execute(text("SET LOCAL session_replication_role = replica"))
            conn.execute(text("SET LOCAL session_replication_role = origin"))
    except DBAPIError:  # not a superuser, and not granted the setting
        return None
    return MergeChecks(tuple((p, k, tuple(sorted(cs))) for (p, k), cs in sorted(parents.items())))
