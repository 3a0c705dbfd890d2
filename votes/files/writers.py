"""Interchange files written deterministically: JSONL, JSON, CSV and Parquet in a fixed column order.

Each file is written aside and renamed into place (:mod:`leaderboard.atomic`): a failed export leaves the
previous file. CSV text cells a spreadsheet would run are escaped (:mod:`leaderboard.spreadsheet`) and
read back exactly; JSON lines and Parquet hold the values as they are.

Fixed column order, fixed number formatting and one canonical JSON form
(:func:`votes.files.records.canonical_json`) make export -> import -> export byte-identical.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from leaderboard.atomic import atomic_file
from leaderboard.spreadsheet import escape_cell
from votes.files.records import BATTLE_COLUMNS, CATALOG_COLUMNS, FileFormat, Kind, canonical_json

__all__ = ["write_rows"]


def _csv_cell(value: Any) -> str:
    """One CSV cell; text a spreadsheet would run is escaped (:mod:`leaderboard.spreadsheet`)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, str):
        return escape_cell(value)
    return str(value)


_CONVERSATION = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
_PARQUET_SCHEMAS: dict[Kind, pa.Schema] = {
    "battles": pa.schema(
        [
            ("question_id", pa.string()),
            ("model_a", pa.string()),
            ("model_b", pa.string()),
            ("winner", pa.string()),
            ("judge", pa.string()),
            ("conversation_a", _CONVERSATION),
            ("conversation_b", _CONVERSATION),
            ("turn", pa.int64()),
            ("anony", pa.bool_()),
            ("language", pa.string()),
            ("tstamp", pa.float64()),
        ]
    ),
    # A conversation prompt is stored JSON-encoded in the string column (read back by the same rule).
    "catalog": pa.schema([(c, pa.string()) for c in CATALOG_COLUMNS]),
}


def write_rows(
    rows: Iterable[Mapping[str, Any]],
    out: Path,
    *,
    kind: Kind,
    fmt: FileFormat,
    extra_columns: tuple[str, ...] = (),
) -> int:
    """Write canonical rows (in the given order) deterministically; returns the number of rows.

    ``extra_columns`` (battles: ``weight``, ``sided``) follow the schema's columns; a row without one
    gets its default (1, true), left out of JSON lines and written out in CSV and Parquet.
    """
    defaults = {"weight": 1.0, "sided": True}
    columns = (BATTLE_COLUMNS if kind == "battles" else CATALOG_COLUMNS) + extra_columns
    if extra_columns:
        rows = ({**{c: defaults[c] for c in extra_columns}, **row} for row in rows)
    count = 0
    if fmt in ("jsonl", "json"):
        with atomic_file(out, "w", encoding="utf-8", newline="\n") as fh:
            if fmt == "json":
                fh.write("[\n")
            for row in rows:
                if fmt == "json" and count:
                    fh.write(",\n")
                line = {c: row[c] for c in columns if c not in extra_columns or row[c] != defaults[c]}
                fh.write(canonical_json(line))
                if fmt == "jsonl":
                    fh.write("\n")
                count += 1
            if fmt == "json":
                fh.write("\n]\n" if count else "]\n")
        return count
    if fmt == "csv":
        with atomic_file(out, "w", encoding="utf-8", newline="") as fh:
            # CRLF as RFC 4180 says; it also makes the writer quote any cell holding a bare \r.
            writer = csv.writer(fh, lineterminator="\r\n")
            writer.writerow(columns)
            for row in rows:
                writer.writerow([_csv_cell(row[c]) for c in columns])
                count += 1
        return count
    materialised = [{c: row[c] for c in columns} for row in rows]
    if kind == "catalog":
        for row in materialised:
            if isinstance(row["prompt"], list):
                row["prompt"] = json.dumps(row["prompt"], ensure_ascii=False)
    schema = _PARQUET_SCHEMAS[kind]
    for c in extra_columns:
        schema = schema.append(pa.field(c, pa.float64() if c == "weight" else pa.bool_()))
    table = pa.Table.from_pylist(materialised, schema=schema)
    with atomic_file(out, "wb") as handle:
        pq.write_table(table, handle, compression="zstd", write_statistics=False)
    return len(materialised)
