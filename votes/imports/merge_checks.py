"""An import's merge step checks its foreign keys once per row referred to, not per row added.

A database checks a foreign key once per inserted row and key: a merge step of 200,000 imported battles
and their votes ran a million such checks (five keys a pair that are set). On PostgreSQL each is a query
run by a trigger: 6.3 s of the step's 9 s on the server, against 3.0 s for the same inserts unchecked.
The rows of a step refer to few distinct rows (a hundred models), so the same guarantee costs a handful
of statements when taken the other way round.

On PostgreSQL (:meth:`MergeChecks.run`):

1. for each table the step's rows refer to, one statement locks every row referred to ``FOR KEY SHARE``
   (the very lock each per-row check takes, so no other transaction can delete or re-key one until the
   step commits) and counts them against the distinct ids the rows hold; one missing fails the step
   with the :class:`IntegrityError` the per-row check would have raised;
2. the insert statement then runs with ``session_replication_role = replica``, which skips triggers,
   and with it the per-row checks; the role is set back before anything else in the step.

On SQLite (:meth:`MergeChecks.check_referred`) the step runs with ``PRAGMA foreign_keys`` off (set on
its connection before the step's transaction begins: SQLite ignores it inside one) and counts, for each
table referred to, the stored rows among the ids the run's staged rows refer to, gathered in memory as
the run staged them (:class:`Referred`: reading them back from the staging table would scan the step's
rows once per table, as slow as the per-row checks). SQLite has one writer: nothing can remove a row
between the count and the insert. A run's ids are a superset of a step's; a row referred to only by
rows merged already cannot be gone, as their battles refer to it.

A vote's battle is inserted by the same statement (PostgreSQL) or step (SQLite) from the same staged row
(:mod:`votes.imports.runs`), so that key needs no check: the row is the step's own.

Used only where it checks exactly what the per-row checks would (:func:`merge_checks_for`, once per run):
``battle`` and ``vote`` hold exactly the foreign keys the tables declare here, each on one column the staging
table also holds; on SQLite moreover the run refers to at most :data:`REFERRED_MAX` rows; on PostgreSQL the
role may set ``session_replication_role`` (a superuser, or on PostgreSQL 15 and later a role granted it:
``GRANT SET ON PARAMETER session_replication_role TO arena``) and the tables have no trigger but the foreign
keys' own. Otherwise the step keeps the per-row checks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, cast

from sqlalchemy import Table, func, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError

from votes.bulk import chunks, member
from votes.tables import battle_t, import_row_t, vote_t

__all__ = ["REFERRED_MAX", "REFERRING", "MergeChecks", "Referred", "merge_checks_for"]

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
_SQLITE_CATALOG = text(
    'SELECT m.name, f."from", f."table", f."to", f.seq'
    " FROM sqlite_master m JOIN pragma_foreign_key_list(m.name) f"
    " WHERE m.type = 'table' AND m.name IN ('battle', 'vote')"
)
#: The staged columns that refer to rows of other tables (their ids gathered by :class:`Referred`).
REFERRING = ("annotator_id", "model_a_id", "model_b_id", "output_a_id", "output_b_id", "prompt_id")
_OWN_TRIGGERS = text(
    "SELECT count(*) FROM pg_trigger"
    " WHERE tgrelid IN (to_regclass('battle'), to_regclass('vote')) AND NOT tgisinternal"
)


#: Ids a run gathers at most for SQLite's set-wise checks. A run that refers to more (a file of
#: conversations stores a prompt and two answers per battle) keeps SQLite's per-row checks: every step
#: counts all of a run's ids, at most ten statements of a thousand ids each.
REFERRED_MAX = 10_000


class Referred:
    """The ids a run's staged rows refer to, by staged column (:data:`REFERRING`), gathered as each batch
    is staged: a few hundred distinct ids (models, judges, prompts, answers) for a million battles of a
    battles file. Past :data:`REFERRED_MAX` ids it lets them go and says so (``overflowed``)."""

    def __init__(self) -> None:
        self.ids: dict[str, set[int]] = {name: set() for name in REFERRING}
        self.overflowed = False

    def add(self, columns: Mapping[str, Iterable[int | None]]) -> None:
        """Note the ids of a staged batch given as columns (a column left out refers to nothing)."""
        if self.overflowed:
            return
        for name, ids in self.ids.items():
            values = columns.get(name)
            if values is not None:
                found: set[int | None] = set(values)  # in C: a batch's column of 20,000 in a fraction of a ms
                found.discard(None)  # no row referred to
                ids.update(cast("set[int]", found))
        if sum(map(len, self.ids.values())) > REFERRED_MAX:
            self.overflowed = True
            self.ids = {name: set() for name in REFERRING}


class MergeChecks(NamedTuple):
    """The parent tables a merge step's rows refer to: (table, its key column, staged columns); on SQLite
    also the ids the run's staged rows refer to."""

    parents: tuple[tuple[str, str, tuple[str, ...]], ...]
    referred: Referred | None = None

    def run(self, conn: Connection, bounds: dict[str, Any], statement: Any) -> int:
        """PostgreSQL: lock and count the rows the step refers to, then run the merge ``statement``
        without the per-row checks; its row count. In the caller's transaction."""
        for parent, key, columns in self.parents:
            wanted, locked = conn.execute(_lock_statement(parent, key, columns), bounds).one()
            if wanted != locked:
                raise _gone(parent, wanted - locked, bounds)
        conn.execute(text("SET LOCAL session_replication_role = replica"))
        added = int(conn.execute(statement, bounds).rowcount)  # a failure aborts the step, setting and all
        conn.execute(text("SET LOCAL session_replication_role = origin"))
        return added

    def check_referred(self, conn: Connection) -> None:
        """SQLite: count the stored rows of each table among the ids the run's rows refer to, in the
        caller's transaction (a step run with ``PRAGMA foreign_keys`` off); one missing raises the
        :class:`IntegrityError` the per-row check would have raised."""
        if self.referred is None:
            raise ValueError("no ids gathered: these checks were made for PostgreSQL's merge")
        tables = battle_t.metadata.tables
        for parent, key, columns in self.parents:
            ids = sorted(set().union(*(self.referred.ids[c] for c in columns)))
            column = tables[parent].c[key]
            count = select(func.count()).select_from(tables[parent])
            found = sum(
                int(conn.scalar(count.where(member(conn, column, chunk))) or 0) for chunk in chunks(ids)
            )
            if found != len(ids):
                raise _gone(parent, len(ids) - found, {"ids": len(ids)})


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


def merge_checks_for(conn: Connection, referred: Referred | None = None) -> MergeChecks | None:
    """The set-wise checks for this store and role, or None where a merge step keeps the database's
    per-row ones (see the module). Reads the catalog; on PostgreSQL tries the setting in a savepoint of
    the caller's transaction. SQLite's checks need the ids the run's rows refer to (``referred``)."""
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        rows = conn.execute(_CATALOG).all()
        if any(int(n) != 1 for *_, n in rows) or conn.execute(_OWN_TRIGGERS).scalar():
            return None
    elif conn.dialect.name == "sqlite" and referred is not None and not referred.overflowed:
        rows = conn.execute(_SQLITE_CATALOG).all()
        if any(int(n) != 0 or k is None for *_, k, n in rows):  # a key of several columns, or implied
            return None
    else:
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
        if column not in staged or (not postgres and column not in REFERRING):
            return None
        parents[(parent, key)].add(column)
    if postgres:
        try:
            with conn.begin_nested():
                conn.execute(text("SET LOCAL session_replication_role = replica"))
                conn.execute(text("SET LOCAL session_replication_role = origin"))
        except DBAPIError:  # not a superuser, and not granted the setting
            return None
    found_parents = tuple((p, k, tuple(sorted(cs))) for (p, k), cs in sorted(parents.items()))
    return MergeChecks(found_parents, None if postgres else referred)
