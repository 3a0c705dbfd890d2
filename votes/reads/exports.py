"""Votes and the catalog written out in the schemas they came in, deterministically.

Rows come from the store in a fixed order (:mod:`votes.reads.queries`) and go through
:func:`votes.files.writers.write_rows`, so export -> import into an empty database -> export gives
byte-identical files.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

from votes.files.records import (
    BATTLE_EXTRA_COLUMNS,
    FileFormat,
)
from votes.files.writers import write_rows
from votes.reads.queries import VoteFilter, has_weights_or_sides, iter_catalog_rows, iter_vote_rows

__all__ = ["export_catalog", "export_votes"]


def export_votes(
    engine: Engine, out: str | Path, *, fmt: FileFormat = "jsonl", filters: VoteFilter | None = None
) -> int:
    """Write votes in the Chatbot Arena battle schema, in vote-id (commit) order; returns the row count.

    When some vote is weighted or has no known side, the ``weight`` and ``sided`` columns follow."""
    with engine.connect() as conn:
        extra = BATTLE_EXTRA_COLUMNS if has_weights_or_sides(conn) else ()
        return write_rows(
            iter_vote_rows(conn, filters), Path(out), kind="battles", fmt=fmt, extra_columns=extra
        )


def export_catalog(engine: Engine, out: str | Path, *, fmt: FileFormat = "jsonl") -> int:
    """Write prompts and outputs in the catalog schema (prompt id order, then sample, then output id)."""
    with engine.connect() as conn:
        return write_rows(iter_catalog_rows(conn), Path(out), kind="catalog", fmt=fmt)
