"""Battle files of any shape read as validated Chatbot Arena battles, without a database.

:func:`select_battle_records` maps a file's rows (:mod:`votes.files.formats`), validates them
(:mod:`votes.files.battle_rows`) and applies the filters (:mod:`votes.files.selection`): the one path that
:func:`convert_battles` (``arena convert``), :func:`read_battle_records` and the store's import
(:func:`votes.imports.files.import_file`) share. :class:`ImportReport` is what any of them reports.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from votes.files.battle_rows import SELF_BATTLE, BattleRecord, parse_battles
from votes.files.formats import CLEAN_BATTLE, SourceFormat, detect_source_format, map_source_rows
from votes.files.reading import read_rows
from votes.files.records import BATTLE_EXTRA_COLUMNS, FileFormat, InputError, Kind, Refusal, RowError
from votes.files.selection import BattleFilter, keep_mask, record_columns
from votes.files.writers import write_rows

__all__ = ["ImportReport", "convert_battles", "read_battle_records", "select_battle_records"]


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
    source_format: str = CLEAN_BATTLE
    note: str = ""
    refused: tuple[Refusal, ...] = ()
    n_filtered: int = 0
    #: New model names that differ only in case from an existing model: ``(new, existing)``.
    name_collisions: tuple[tuple[str, str], ...] = ()
    #: A catalog's prompt ids (``prompt_id``), stored before or now, in file order.
    prompt_ids: tuple[str, ...] = ()


def select_battle_records(
    path: Path,
    fmt: FileFormat,
    rows: list[tuple[str, dict[str, object]]],
    shape: SourceFormat | None,
    refused: list[Refusal] | None,
    filters: BattleFilter,
    baseline: str | None,
) -> tuple[list[BattleRecord], str, SourceFormat | None, int]:
    """Battle rows of any shape, validated and selected; bad ones raise or go to ``refused``.

    Returns the records kept, the note of how the rows were mapped, the shape and the number of rows the
    filters left out."""
    note = ""
    mapped_rows = rows
    if shape not in (None, CLEAN_BATTLE):
        mapped = map_source_rows(path, rows, shape, baseline=baseline)
        if mapped.refused and refused is None:
            raise RowError.of(path, mapped.refused[0])
        if refused is not None:
            refused.extend(mapped.refused)
        mapped_rows, note = mapped.rows, mapped.note
    row_fmt = fmt if shape in (None, CLEAN_BATTLE) else "jsonl"
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
            raise RowError(path, record.where, reason)
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

    Raises :class:`InputError` as :func:`votes.imports.files.import_file` does; ``n_added`` counts the battles
    written.
    """
    started = time.perf_counter()
    path = Path(path)
    in_fmt, rows = read_rows(path)
    shape = source_format or detect_source_format(rows)
    refused: list[Refusal] | None = [] if skip_invalid else None
    records, note, shape, n_filtered = select_battle_records(
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
        source_format=str(shape or CLEAN_BATTLE),
        note=note,
        refused=tuple(refused or ()),
        n_filtered=n_filtered,
    )


def read_battle_records(path: str | Path) -> list[BattleRecord]:
    """The validated battles of a file in any shape :func:`votes.imports.files.import_file` reads
    (self-battles refused), without a database; a bad row raises :class:`InputError` naming the file and
    row."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "no such file")
    in_fmt, rows = read_rows(path)
    records, _note, _shape, _n = select_battle_records(
        path, in_fmt, rows, detect_source_format(rows), None, BattleFilter(), None
    )
    return records
