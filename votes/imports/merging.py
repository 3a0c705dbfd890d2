"""Staged rows moved into ``battle`` and ``vote``: the merge statements, one merge step, its progress.

A merge step moves the staged rows of a range of sequence numbers (those still new to ``battle``) into
``battle`` and ``vote`` in the caller's transaction (:func:`merge_step`), and records how far the run's
merge has come (:func:`record_merged`), so a rollback knows which battles and votes are the run's
(:func:`remove_merged`). How many rows a step moves is :mod:`votes.imports.merge_steps`'s; whether the
steps are short transactions or savepoints of one merge beside the staging is the run's
(:mod:`votes.imports.runs`).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import func, insert, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import TextClause

from votes.dialects import Dialect, dialect_of
from votes.imports.keys import BATTLE_OF_ROW, MARK_FRESH, ROW_KEY, UNSLOT
from votes.imports.merge_checks import MergeChecks
from votes.imports.run_steps import set_run_state
from votes.tables import battle_t, import_created_t

__all__ = ["merge_step", "merged_reach", "record_merged", "remove_merged"]


#: ``importcreated`` kind of a run's merge progress: ``row_id`` is the sequence number its merged rows
#: reach (exclusive), written in each merge step's own transaction.
_MERGED = "merged"


_MERGE_BATTLES = text(
    "INSERT INTO battle"  # nosec B608  # constant fragments of this module
    " (prompt_id, output_a_id, output_b_id, model_a_id, model_b_id, annotator_id,"
    " issued_at, source, import_key, import_digest, import_copy, language, extra)"
    " SELECT prompt_id, output_a_id, output_b_id, model_a_id, model_b_id, annotator_id, issued_at,"
    f" 'import', {ROW_KEY.format(row='importrow')}, import_digest, import_copy, language, extra"
    " FROM importrow"
    " WHERE import_id = :run AND seq >= :lo AND seq < :hi AND fresh ORDER BY seq"
)


_MERGE_VOTES = text(
    "INSERT INTO vote"  # nosec B608  # constant fragments of this module
    " (battle_id, model_a_id, model_b_id, annotator_id, winner, created_at, weight, sided)"
    f" SELECT {BATTLE_OF_ROW}, r.model_a_id, r.model_b_id, r.annotator_id, r.winner, r.issued_at, r.weight,"
    " r.sided FROM importrow r"
    " WHERE r.import_id = :run AND r.seq >= :lo AND r.seq < :hi AND r.fresh ORDER BY r.seq"
)


# SQLite gives the battles of one INSERT consecutive ids (one writer; each new id is the largest plus
# one: Dialect.numbers_inserts_in_order), so the votes of a step can be numbered from the id before it
# instead of finding each battle again by its key (checked per step; otherwise the join above).
_MERGE_VOTES_NUMBERED = text(
    "INSERT INTO vote (battle_id, model_a_id, model_b_id, annotator_id, winner, created_at, weight, sided)"
    " SELECT :base + row_number() OVER (ORDER BY seq), model_a_id, model_b_id, annotator_id, winner,"
    " issued_at, weight, sided FROM importrow"
    " WHERE import_id = :run AND seq >= :lo AND seq < :hi AND fresh ORDER BY seq"
)


# PostgreSQL (Dialect.merges_in_one_statement): one statement per step, nothing through the client. Each
# staged row draws its battle's id from the column's own sequence, in file order (a volatile output is
# computed after the sort), and the battle and its vote are both written
# from those rows, so no key is looked up again: a join on the keys over all battles may scan a table
# bulk-loaded since its last ANALYZE whole for every step, and an insert RETURNING the ids followed by a
# COPY of the votes spent a second of client CPU per 200,000 battles. The foreign key checks of the votes
# run at the end of the statement and see its battles.
_MERGE_IN_ONE = (
    "WITH r AS MATERIALIZED"  # nosec B608  # constant fragments of this module and the dialect's
    " (SELECT {next_battle_id}"
    " AS battle_id, prompt_id, output_a_id, output_b_id, model_a_id, model_b_id, annotator_id, issued_at,"
    f" {ROW_KEY.format(row='importrow')} AS import_key, import_digest, import_copy, language, extra, winner,"
    " weight, sided FROM importrow"
    " WHERE import_id = :run AND seq >= :lo AND seq < :hi AND fresh ORDER BY seq),"
    " b AS (INSERT INTO battle (id, prompt_id, output_a_id, output_b_id, model_a_id, model_b_id,"
    " annotator_id, issued_at, source, import_key, import_digest, import_copy, language, extra)"
    " SELECT battle_id, prompt_id, output_a_id, output_b_id, model_a_id, model_b_id, annotator_id,"
    " issued_at, 'import', import_key, import_digest, import_copy, language, extra FROM r)"
    " INSERT INTO vote (battle_id, model_a_id, model_b_id, annotator_id, winner, created_at, weight, sided)"
    " SELECT battle_id, model_a_id, model_b_id, annotator_id, winner, issued_at, weight, sided FROM r"
)


@cache
def _merge_in_one(dialect: Dialect) -> TextClause:
    """The one statement of a merge step where the dialect :attr:`~Dialect.merges_in_one_statement`."""
    return text(_MERGE_IN_ONE.format(next_battle_id=dialect.next_id_sql("battle", "id")))


_REMOVE_VOTES = text(
    "DELETE FROM vote"  # nosec B608  # constant fragments of this module
    f" WHERE battle_id IN (SELECT {BATTLE_OF_ROW} FROM importrow r"
    " WHERE r.import_id = :run AND r.seq >= :lo AND r.seq < :hi AND r.fresh)"
)


_REMOVE_BATTLES = text(
    "DELETE FROM battle"  # nosec B608  # constant fragments of this module
    f" WHERE id IN (SELECT {BATTLE_OF_ROW} FROM importrow r"
    " WHERE r.import_id = :run AND r.seq >= :lo AND r.seq < :hi AND r.fresh)"
)


def merge_step(
    conn: Connection, run_id: int, lo: int, hi: int, *, marked: bool = True, checks: MergeChecks | None = None
) -> int:
    """Move staged rows ``lo`` to ``hi`` into ``battle`` and ``vote``; returns the battles added.

    ``marked``: the rows' places and ``fresh`` flags were set when they were staged
    (:func:`votes.imports.keys.place_keys`); a run that merged the same keys (or keys in the same slots)
    since makes the battle insert fail, and the step is then done again with them set anew
    (``marked=False``). ``checks``: PostgreSQL's foreign keys checked set-wise
    (:mod:`votes.imports.merge_checks`)."""
    bounds = {"run": run_id, "lo": lo, "hi": hi}
    if not marked:
        conn.execute(text(UNSLOT), bounds)
        conn.execute(text(MARK_FRESH), bounds)
    dialect = dialect_of(conn)
    if dialect.merges_in_one_statement:
        if checks is not None:
            return checks.run(conn, bounds, _merge_in_one(dialect))
        return int(conn.execute(_merge_in_one(dialect), bounds).rowcount)
    numbered = dialect.numbers_inserts_in_order
    base = int(conn.scalar(select(func.max(battle_t.c.id))) or 0) if numbered else 0
    added = int(conn.execute(_MERGE_BATTLES, bounds).rowcount)
    if numbered and added and _numbered_from(conn, base, added):
        conn.execute(_MERGE_VOTES_NUMBERED, {**bounds, "base": base})
    elif added:
        conn.execute(_MERGE_VOTES, bounds)
    return added


def record_merged(conn: Connection, run_id: int, hi: int) -> None:
    """Record (in the step's transaction) that the run's rows before ``hi`` are merged; the heartbeat.
    The run's own row is checked here, as its foreign key would (a merge step may run without them)."""
    if not set_run_state(conn, run_id, "merging"):
        raise IntegrityError(
            "record a merge step", {"run": run_id}, ValueError(f"import run {run_id} is no longer recorded")
        )
    conn.execute(insert(import_created_t).values(import_id=run_id, kind=_MERGED, row_id=hi))


def _numbered_from(conn: Connection, base: int, added: int) -> bool:
    """Whether the battles just added are exactly ids ``base + 1`` to ``base + added``."""
    count, top = conn.execute(select(func.count(), func.max(battle_t.c.id)).where(battle_t.c.id > base)).one()
    return bool(count == added and top == base + added)


def merged_reach(conn: Connection, run_id: int) -> int | None:
    """The sequence number the run's merged rows reach (exclusive), as its last merge step recorded it;
    None for a run that never recorded one."""
    reach = conn.scalar(
        select(func.max(import_created_t.c.row_id)).where(
            import_created_t.c.import_id == run_id, import_created_t.c.kind == _MERGED
        )
    )
    return None if reach is None else int(reach)


def remove_merged(conn: Connection, bounds: dict[str, Any]) -> None:
    """Remove the votes and battles the run's merge wrote from the staged rows ``lo`` to ``hi``."""
    conn.execute(_REMOVE_VOTES, bounds)
    conn.execute(_REMOVE_BATTLES, bounds)
