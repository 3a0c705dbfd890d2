"""The vote ledger: the selected votes as one canonical CSV text the database writes, and its sha256.

A published snapshot names the votes it was fitted on by a sha256. Hashing the canonical JSONL export
(:func:`votes.queries.votes_sha256`) meant building a Python dict and a JSON line per vote, conversations
included: 52 s for a million votes. The ledger holds what a vote *is* for a board (the two models, the
outcome, the judge, the time, the weight and whether the sides are known), and the database itself
formats each line (SQL string expressions), so Python only joins lines and hashes them in blocks.

The ledger is a valid Chatbot Arena battles CSV (``model_a,model_b,winner,judge,tstamp,weight,sided``,
text cells quoted, ``\\n`` line ends), so the check needs nothing but standard tools and this package:
``arena export ledger --out votes.csv && sha256sum votes.csv`` prints a snapshot's ``votes_sha256``,
and ``arena recompute --from votes.csv`` with the snapshot's options gives its data files again.
Text a spreadsheet would run gets a leading apostrophe, as in every CSV written here
(:mod:`leaderboard.spreadsheet`); the readers take it off again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import BigInteger, Connection, Engine, Select, String, case, cast, func, literal, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from leaderboard.atomic import atomic_file
from votes.bulk import column_chunks
from votes.queries import VoteFilter, filter_votes
from votes.tables import annotator_t, model_t, vote_t

__all__ = ["LEDGER_COLUMNS", "iter_ledger_blocks", "ledger_sha256", "write_ledger"]

LEDGER_COLUMNS = ("model_a", "model_b", "winner", "judge", "tstamp", "weight", "sided")
LEDGER_HEADER = ",".join(LEDGER_COLUMNS) + "\n"
# Lines fetched and hashed per block: large enough that the per-block cost vanishes, small enough that a
# block's Python strings stay a few megabytes.
_BLOCK = 50_000
# First characters a spreadsheet would run (leaderboard.spreadsheet's rule, written in SQL).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _connection(db: Session | Connection) -> Connection:
    return db.connection() if isinstance(db, Session) else db


def _text_cell(value: ColumnElement[Any]) -> ColumnElement[str]:
    """A quoted CSV cell: inner quotes doubled, an apostrophe before a formula start; NULL stays NULL."""
    escaped = case(
        (func.substr(value, 1, 1).in_(_FORMULA_STARTS), literal("'").concat(value)),
        else_=value,
    )
    return literal('"').concat(func.replace(escaped, '"', '""')).concat('"')


def _seconds_text(conn: Connection) -> ColumnElement[str]:
    """The vote time as seconds since the epoch with six decimals, formatted by the database."""
    created = vote_t.c.created_at
    if conn.dialect.name == "sqlite":
        # Stored as 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC); strftime('%s') gives the whole seconds.
        stored = cast(created, String)
        return func.strftime("%s", stored).concat(".").concat(func.substr(stored, 21, 6))
    whole = cast(cast(func.extract("epoch", func.date_trunc("second", created)), BigInteger), String)
    return whole.concat(".").concat(func.to_char(created, "US"))


def _statement(conn: Connection, filters: VoteFilter | None) -> Select[Any]:
    """One text column, a ledger line per selected vote, in vote-id order.

    The model and judge cells are formatted once per model and annotator (materialised common table
    expressions), so the per-vote work is a few index look-ups and concatenations."""
    models = (
        select(model_t.c.id, _text_cell(model_t.c.name).label("cell"))
        .cte("ledger_models")
        .prefix_with("MATERIALIZED")
    )
    judge = func.coalesce(annotator_t.c.label, literal("annotator-").concat(cast(annotator_t.c.id, String)))
    judges = (
        select(annotator_t.c.id, _text_cell(judge).label("cell"))
        .cte("ledger_judges")
        .prefix_with("MATERIALIZED")
    )
    model_a, model_b = models.alias("ledger_model_a"), models.alias("ledger_model_b")
    sided = case((vote_t.c.sided, literal("true")), else_=literal("false"))
    parts: list[ColumnElement[str]] = [
        model_a.c.cell,
        model_b.c.cell,
        # an outcome is one of four fixed words (checked on every write): quoted, never escaped
        literal('"').concat(vote_t.c.winner).concat('"'),
        func.coalesce(judges.c.cell, literal("")),
        _seconds_text(conn),
        cast(vote_t.c.weight, String),
        sided,
    ]
    line = parts[0]
    for part in parts[1:]:
        line = line.concat(",").concat(part)
    source = (
        vote_t.join(model_a, vote_t.c.model_a_id == model_a.c.id)
        .join(model_b, vote_t.c.model_b_id == model_b.c.id)
        .outerjoin(judges, vote_t.c.annotator_id == judges.c.id)
    )
    stmt = select(line.label("line")).select_from(source).order_by(vote_t.c.id)
    return filter_votes(stmt, filters)


def _blocks(db: Session | Connection, filters: VoteFilter | None) -> Iterator[tuple[bytes, int]]:
    """The header (no votes), then blocks of lines with the number of votes in each."""
    conn = _connection(db)
    yield LEDGER_HEADER.encode("utf-8"), 0
    for (lines,) in column_chunks(conn, _statement(conn, filters), size=_BLOCK):
        yield ("\n".join(lines) + "\n").encode("utf-8"), len(lines)


def iter_ledger_blocks(db: Session | Connection, filters: VoteFilter | None = None) -> Iterator[bytes]:
    """The ledger of the selected votes (vote-id order) as UTF-8 blocks: the header, then lines."""
    for block, _ in _blocks(db, filters):
        yield block


def ledger_sha256(db: Session | Connection, filters: VoteFilter | None = None) -> str:
    """sha256 of the selected votes' ledger, equal to ``sha256sum`` of :func:`write_ledger`'s file."""
    digest = hashlib.sha256()
    for block in iter_ledger_blocks(db, filters):
        digest.update(block)
    return digest.hexdigest()


def write_ledger(engine: Engine, out: str | Path, *, filters: VoteFilter | None = None) -> tuple[int, str]:
    """Write the ledger of the selected votes (aside, then renamed); returns (votes, sha256)."""
    digest = hashlib.sha256()
    votes = 0
    with engine.connect() as conn, atomic_file(Path(out), "wb") as handle:
        for block, n in _blocks(conn, filters):
            handle.write(block)
            digest.update(block)
            votes += n
    return votes, digest.hexdigest()
