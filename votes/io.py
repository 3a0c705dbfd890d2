"""Import and export: files of catalogs and Chatbot Arena battles in and out of the store.

An import is all-or-nothing and idempotent:

- battles are read, validated and staged in batches (:mod:`votes.row_batches`, :mod:`votes.import_runs`):
  each batch is a short transaction through the driver's bulk path, nothing reaches ``battle`` or
  ``vote`` before the whole file is valid, and a bad row anywhere removes every row the run wrote;
- a catalog is read and validated whole (:mod:`votes.catalog_records`) and written in one transaction
  (:mod:`votes.import_catalog`);
- importing the same file again adds nothing.

Exports write the same schemas deterministically (:func:`votes.file_writers.write_rows`), so
export -> import into an empty database -> export gives byte-identical files.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from sqlalchemy.engine import Engine

from votes.battle_rows import SELF_BATTLE, BattleRecord, parse_battles
from votes.bulk import gc_paused
from votes.catalog_records import parse_catalog
from votes.file_writers import write_rows
from votes.formats import SourceFormat, detect_source_format, map_catalog_rows, map_source_rows
from votes.import_catalog import import_catalog_records
from votes.import_columns import CleanBatch, clean_batch, rows_table
from votes.import_runs import BetweenBatches, import_battle_batches
from votes.live import LiveConfig
from votes.queries import VoteFilter, has_weights_or_sides, iter_catalog_rows, iter_vote_rows
from votes.records import (
    BATTLE_EXTRA_COLUMNS,
    FileFormat,
    InputError,
    Kind,
    Refusal,
    detect_kind,
    read_rows,
    text_cells,
)
from votes.row_batches import BATCH_ROWS, arrow_rows, iter_parquet_batches, iter_row_batches, peek_format
from votes.selection import BattleFilter, keep_mask, record_columns

__all__ = [
    "ImportReport",
    "convert_battles",
    "export_catalog",
    "export_votes",
    "import_file",
    "read_battle_records",
]


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
    source_format: str = "clean-battle"
    note: str = ""
    refused: tuple[Refusal, ...] = ()
    n_filtered: int = 0
    #: New model names that differ only in case from an existing model: ``(new, existing)``.
    name_collisions: tuple[tuple[str, str], ...] = ()
    #: A catalog's prompt ids (``prompt_id``), stored before or now, in file order.
    prompt_ids: tuple[str, ...] = ()


def import_file(
    engine: Engine,
    path: str | Path,
    *,
    fmt: FileFormat | None = None,
    kind: Kind | None = None,
    elo_config: LiveConfig | None = None,
    source_format: SourceFormat | None = None,
    skip_invalid: bool = False,
    filters: BattleFilter | None = None,
    baseline: str | None = None,
    max_expanded: int | None = None,
    between_batches: BetweenBatches | None = None,
) -> ImportReport:
    """Import a file, all or nothing; raises :class:`InputError` on bad input.

    Battles may come in any shape of :mod:`votes.formats` (detected from the columns, or named by
    ``source_format``); arena-hard question and answer files are catalogs. Chatbot Arena battles are read
    and validated in batches and written as an import run (:mod:`votes.import_runs`): short transactions,
    so live votes are not held back, and every row of the run removed again when any row is invalid,
    conflicts with what the database holds, or the import stops half way. Without ``skip_invalid``
    nothing is written when any row is invalid; with it the valid rows are written and the others
    returned in ``refused``. ``filters`` choose the battles written; self-battles among them are
    refused, never dropped unsaid. A gzipped file may expand to at most ``max_expanded`` bytes
    (:data:`votes.records.MAX_EXPANDED_BYTES` by default). ``between_batches`` is called between the
    run's short transactions.
    """
    started = time.perf_counter()
    path = Path(path)
    tables = _parquet_tables(path, fmt)
    if tables is not None:  # read as Arrow batches: clean ones are checked and staged as columns
        fmt = "parquet"
        first_table = next(tables, None)
        head = arrow_rows(first_table[1].slice(0, _HEAD_ROWS), first_table[0]) if first_table else []
        batches: Iterator[tuple[FileFormat, list[tuple[str, dict[str, object]]]]] = iter(())
    else:
        batches = iter_row_batches(path, fmt, max_expanded=max_expanded)
        first = next(batches, None)
        fmt, head = first if first is not None else (peek_format(path, fmt), [])
    shape = detect_source_format(head) if source_format is None and kind != "catalog" else source_format
    kind = kind or (
        "battles" if shape is not None else (detect_catalog_kind(path, head) if head else "battles")
    )
    refused: list[Refusal] | None = [] if skip_invalid else None
    tally = _Tally()
    prompt_ids: tuple[str, ...] = ()
    if kind == "battles":
        read: Iterable[list[tuple[str, dict[str, object]]] | tuple[int, pa.RecordBatch]]
        if shape in (None, "clean-battle") and tables is not None:
            read = itertools.chain([first_table] if first_table else [], tables)
        elif shape in (None, "clean-battle"):
            read = itertools.chain([head] if head else [], (rows for _, rows in batches))
        else:  # other shapes are mapped over the whole file (a mapping may pair rows)
            _, all_rows = read_rows(path, fmt, max_expanded=max_expanded)
            read = [all_rows]
        filters = filters or BattleFilter()

        def careful(rows: list[tuple[str, dict[str, object]]]) -> Iterator[list[BattleRecord]]:
            with gc_paused():  # a batch's records are many small objects without cycles
                records, tally.note, _, n_filtered = _battle_records(
                    path, fmt, rows, shape, refused, filters, baseline
                )
            tally.n_rows += len(rows)
            tally.n_filtered += n_filtered
            tally.n_candidates += len(records)
            for start in range(0, len(records), BATCH_ROWS):
                yield records[start : start + BATCH_ROWS]

        # Rows read from JSON (typed) or CSV (text cells, converted there) are checked as columns too.
        row_tables = shape == "clean-battle" and fmt in ("jsonl", "json", "csv")
        as_text = text_cells(fmt)

        def record_batches() -> Iterator[list[BattleRecord] | CleanBatch]:
            for item in read:
                if isinstance(item, list):
                    table = rows_table(item) if row_tables else None
                else:
                    first_row, table = item
                clean = (
                    clean_batch(table, text_cells=as_text)
                    if table is not None and shape == "clean-battle"
                    else None
                )
                if clean is not None:
                    keep = keep_mask(clean.selection(), filters)
                    kept = clean if keep.all() else clean.take(keep)
                    if not kept.self_battles().any():  # else the careful path refuses them by row
                        tally.n_rows += len(clean)
                        tally.n_filtered += int((~keep).sum())
                        tally.n_candidates += len(kept)
                        for start in range(0, len(kept), BATCH_ROWS):
                            yield kept[start : start + BATCH_ROWS]
                        continue
                yield from careful(item if isinstance(item, list) else arrow_rows(table, first_row))

        added = import_battle_batches(
            engine, record_batches(), file=path, elo_config=elo_config, between=between_batches
        )
    else:
        _, rows = read_rows(path, fmt, max_expanded=max_expanded)
        tally.n_rows = tally.n_candidates = len(rows)
        with engine.begin() as conn:
            catalog_rows, tally.note = map_catalog_rows(path, rows)
            records_c = parse_catalog(path, fmt if not tally.note else "jsonl", catalog_rows)
            added = import_catalog_records(conn, records_c, file=path)
            prompt_ids = tuple(dict.fromkeys(r.prompt_id for r in records_c))
    return ImportReport(
        path=str(path),
        kind=kind,
        format=fmt,
        n_rows=tally.n_rows,
        n_added=added.rows,
        n_skipped=tally.n_candidates - added.rows,
        n_models_added=added.models,
        n_prompts_added=added.prompts,
        n_outputs_added=added.outputs,
        seconds=time.perf_counter() - started,
        source_format=str(shape or "catalog"),
        note=tally.note,
        refused=tuple(refused or ()),
        n_filtered=tally.n_filtered,
        name_collisions=tuple(added.name_collisions),
        prompt_ids=prompt_ids,
    )


#: Rows a file's kind and shape are told from (as :func:`votes.formats.detect_source_format` reads them).
_HEAD_ROWS = 50


def _parquet_tables(path: Path, fmt: FileFormat | None) -> Iterator[tuple[int, pa.RecordBatch]] | None:
    """A Parquet file's record batches (see :func:`votes.row_batches.iter_parquet_batches`); None for
    a file in another format."""
    if fmt not in (None, "parquet"):
        return None
    if not path.is_file():
        raise InputError(path, None, "no such file")
    if peek_format(path, fmt) != "parquet":
        return None
    return iter_parquet_batches(path, BATCH_ROWS)


@dataclass
class _Tally:
    """What the batches of one import held, summed as they stream by."""

    n_rows: int = 0
    n_candidates: int = 0
    n_filtered: int = 0
    note: str = ""


def detect_catalog_kind(path: Path, rows: list[tuple[str, dict[str, object]]]) -> Kind:
    """Catalog or battles for rows of no known battle shape (arena-hard questions and answers are
    catalogs)."""
    head = {k for _, row in rows[:50] for k in row}
    if "uid" in head and ("prompt" in head or "messages" in head):
        return "catalog"
    return detect_kind(path, rows)


def _battle_records(
    path: Path,
    fmt: FileFormat,
    rows: list[tuple[str, dict[str, object]]],
    shape: SourceFormat | None,
    refused: list[Refusal] | None,
    filters: BattleFilter,
    baseline: str | None,
) -> tuple[list[BattleRecord], str, SourceFormat | None, int]:
    """Battle rows of any shape, validated and selected; bad ones raise or go to ``refused``."""
    note = ""
    mapped_rows = rows
    if shape not in (None, "clean-battle"):
        mapped = map_source_rows(path, rows, shape, baseline=baseline)
        if mapped.refused and refused is None:
            raise InputError(path, mapped.refused[0].where, mapped.refused[0].reason)
        if refused is not None:
            refused.extend(mapped.refused)
        mapped_rows, note = mapped.rows, mapped.note
    row_fmt = fmt if shape in (None, "clean-battle") else "jsonl"
    records = parse_battles(path, row_fmt, mapped_rows, refused=refused, allow_self_battles=True)
    keep = keep_mask(record_columns(records), filters)
    out: list[BattleRecord] = []
    for record, kept in zip(records, keep, strict=True):
        if not kept:
            continue
        if record.model_a != record.model_b:
            out.append(record)
            continue
        reason = f"model {record.model_a!r} {SELF_BATTLE}"
        if refused is None:
            raise InputError(path, record.where, reason)
        refused.append(Refusal(record.where, reason))
    return out, note, shape, int((~keep).sum())


def convert_battles(
    path: str | Path,
    out: str | Path,
    *,
    fmt: FileFormat = "jsonl",
    source_format: SourceFormat | None = None,
    skip_invalid: bool = False,
    filters: BattleFilter | None = None,
    baseline: str | None = None,
) -> ImportReport:
    """Write a battles file of any shape as Chatbot Arena battles (with ``weight`` and ``sided`` where
    they matter), without a database; reading the result back gives the same battles.

    Raises :class:`InputError` as :func:`import_file` does; ``n_added`` counts the battles written.
    """
    started = time.perf_counter()
    path = Path(path)
    in_fmt, rows = read_rows(path)
    shape = source_format or detect_source_format(rows)
    refused: list[Refusal] | None = [] if skip_invalid else None
    records, note, shape, n_filtered = _battle_records(
        path, in_fmt, rows, shape, refused, filters or BattleFilter(), baseline
    )
    n = write_rows(
        (r.row() for r in records), Path(out), kind="battles", fmt=fmt, extra_columns=BATTLE_EXTRA_COLUMNS
    )
    return ImportReport(
        path=str(path),
        kind="battles",
        format=in_fmt,
        n_rows=len(rows),
        n_added=n,
        n_skipped=0,
        n_models_added=0,
        n_prompts_added=0,
        n_outputs_added=0,
        seconds=time.perf_counter() - started,
        source_format=str(shape or "clean-battle"),
        note=note,
        refused=tuple(refused or ()),
        n_filtered=n_filtered,
    )


def read_battle_records(path: str | Path) -> list[BattleRecord]:
    """The validated battles of a file in any shape :func:`import_file` reads (self-battles refused),
    without a database; a bad row raises :class:`InputError` naming the file and row."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "no such file")
    in_fmt, rows = read_rows(path)
    records, _note, _shape, _n = _battle_records(
        path, in_fmt, rows, detect_source_format(rows), None, BattleFilter(), None
    )
    return records


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
