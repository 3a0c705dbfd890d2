"""A file into the store, all or nothing: the one entry point of every import.

An import is all-or-nothing and idempotent:

- battles are read, validated and staged in batches (:mod:`votes.files.batches`, :mod:`votes.imports.runs`):
  each batch is a short transaction through the driver's bulk path, nothing reaches ``battle`` or
  ``vote`` before the whole file is valid, and a bad row anywhere removes every row the run wrote;
- a catalog is read and validated whole (:mod:`votes.files.catalog_records`) and written in one transaction
  (:mod:`votes.imports.catalog`);
- importing the same file again adds nothing.

Exports (:mod:`votes.reads.exports`) write the same schemas deterministically, so export -> import into an
empty database -> export gives byte-identical files.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from sqlalchemy.engine import Engine

from votes.bulk import gc_paused
from votes.files.batches import BATCH_ROWS, arrow_rows, iter_parquet_batches, iter_row_batches, peek_format
from votes.files.battle_rows import BattleRecord
from votes.files.catalog_records import parse_catalog
from votes.files.convert import ImportReport, select_battle_records
from votes.files.fields import text_cells
from votes.files.formats import CLEAN_BATTLE, SourceFormat, detect_source_format, map_catalog_rows
from votes.files.reading import read_rows
from votes.files.records import FileFormat, InputError, Kind, Refusal, detect_kind
from votes.files.selection import BattleFilter, keep_mask
from votes.imports.catalog import import_catalog_records
from votes.imports.clean_columns import CleanBatch, clean_batch, rows_table
from votes.imports.runs import BetweenBatches, import_battle_batches
from votes.voting.live import LiveConfig

__all__ = ["detect_catalog_kind", "import_file"]


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

    Battles may come in any shape of :mod:`votes.files.formats` (detected from the columns, or named by
    ``source_format``); arena-hard question and answer files are catalogs. Chatbot Arena battles are read
    and validated in batches and written as an import run (:mod:`votes.imports.runs`): short transactions,
    so live votes are not held back, and every row of the run removed again when any row is invalid,
    conflicts with what the database holds, or the import stops half way. Without ``skip_invalid``
    nothing is written when any row is invalid; with it the valid rows are written and the others
    returned in ``refused``. ``filters`` choose the battles written; self-battles among them are
    refused, never dropped unsaid. A gzipped file may expand to at most ``max_expanded`` bytes
    (:data:`votes.files.reading.MAX_EXPANDED_BYTES` by default). ``between_batches`` is called between the
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
        if shape in (None, CLEAN_BATTLE) and tables is not None:
            read = itertools.chain([first_table] if first_table else [], tables)
        elif shape in (None, CLEAN_BATTLE):
            read = itertools.chain([head] if head else [], (rows for _, rows in batches))
        else:  # other shapes are mapped over the whole file (a mapping may pair rows)
            _, all_rows = read_rows(path, fmt, max_expanded=max_expanded)
            read = [all_rows]
        filters = filters or BattleFilter()

        def careful(rows: list[tuple[str, dict[str, object]]]) -> Iterator[list[BattleRecord]]:
            with gc_paused():  # a batch's records are many small objects without cycles
                records, tally.note, _, n_filtered = select_battle_records(
                    path, fmt, rows, shape, refused, filters, baseline
                )
            tally.n_rows += len(rows)
            tally.n_filtered += n_filtered
            tally.n_candidates += len(records)
            for start in range(0, len(records), BATCH_ROWS):
                yield records[start : start + BATCH_ROWS]

        # Rows read from JSON (typed) or CSV (text cells, converted there) are checked as columns too.
        row_tables = shape == CLEAN_BATTLE and fmt in ("jsonl", "json", "csv")
        as_text = text_cells(fmt)

        def record_batches() -> Iterator[list[BattleRecord] | CleanBatch]:
            for item in read:
                if isinstance(item, list):
                    table = rows_table(item) if row_tables else None
                else:
                    first_row, table = item
                clean = (
                    clean_batch(table, text_cells=as_text)
                    if table is not None and shape == CLEAN_BATTLE
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


#: Rows a file's kind and shape are told from (as :func:`votes.files.formats.detect_source_format` reads
# them).
_HEAD_ROWS = 50


def _parquet_tables(path: Path, fmt: FileFormat | None) -> Iterator[tuple[int, pa.RecordBatch]] | None:
    """A Parquet file's record batches (see :func:`votes.files.batches.iter_parquet_batches`); None for
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
