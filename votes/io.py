"""Import and export: files of catalogs and Chatbot Arena battles in and out of the store.

An import is all-or-nothing and idempotent:

- the whole file is read and validated first (:mod:`votes.records`, :mod:`votes.catalog_records`), so a
  bad row fails before any write;
- everything is written in one transaction with bulk ``executemany`` inserts (one statement per batch of
  rows, not one ORM object per row), so a 100,000-battle file takes seconds
  (:mod:`votes.import_battles`, :mod:`votes.import_catalog`);
- importing the same file again adds nothing.

Exports write the same schemas deterministically (:func:`votes.file_writers.write_rows`), so
export -> import into an empty database -> export gives byte-identical files.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import Engine

from votes.catalog_records import parse_catalog
from votes.file_writers import write_rows
from votes.import_battles import import_battle_records
from votes.import_catalog import import_catalog_records
from votes.live import LiveConfig
from votes.queries import VoteFilter, iter_catalog_rows, iter_vote_rows
from votes.records import FileFormat, Kind, detect_kind, parse_battles, read_rows

__all__ = ["ImportReport", "export_catalog", "export_votes", "import_file"]


@dataclass(frozen=True)
class ImportReport:
    """What an import did. ``n_added`` counts battles (with their votes) or catalog outputs."""

    path: str
    kind: Kind
    format: FileFormat
    n_rows: int
    n_added: int
    n_skipped: int
    n_models_added: int
    n_prompts_added: int
    n_outputs_added: int
    seconds: float


def import_file(
    engine: Engine,
    path: str | Path,
    *,
    fmt: FileFormat | None = None,
    kind: Kind | None = None,
    elo_config: LiveConfig | None = None,
) -> ImportReport:
    """Validate a whole file, then write it in one transaction; raises :class:`InputError` on bad input.

    Nothing is written when any row is invalid or conflicts with what the database already holds.
    """
    started = time.perf_counter()
    path = Path(path)
    fmt, rows = read_rows(path, fmt)
    kind = kind or (detect_kind(path, rows) if rows else "battles")
    with engine.begin() as conn:
        if kind == "battles":
            records_b = parse_battles(path, fmt, rows)
            added = import_battle_records(conn, records_b, file=path, elo_config=elo_config)
        else:
            records_c = parse_catalog(path, fmt, rows)
            added = import_catalog_records(conn, records_c, file=path)
    return ImportReport(
        path=str(path),
        kind=kind,
        format=fmt,
        n_rows=len(rows),
        n_added=added.rows,
        n_skipped=len(rows) - added.rows,
        n_models_added=added.models,
        n_prompts_added=added.prompts,
        n_outputs_added=added.outputs,
        seconds=time.perf_counter() - started,
    )


def export_votes(
    engine: Engine, out: str | Path, *, fmt: FileFormat = "jsonl", filters: VoteFilter | None = None
) -> int:
    """Write votes in the Chatbot Arena battle schema, in vote-id (commit) order; returns the row count."""
    with engine.connect() as conn:
        return write_rows(iter_vote_rows(conn, filters), Path(out), kind="battles", fmt=fmt)


def export_catalog(engine: Engine, out: str | Path, *, fmt: FileFormat = "jsonl") -> int:
    """Write prompts and outputs in the catalog schema (prompt id order, then output id order)."""
    with engine.connect() as conn:
        return write_rows(iter_catalog_rows(conn), Path(out), kind="catalog", fmt=fmt)
