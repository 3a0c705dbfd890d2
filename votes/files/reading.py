"""Reading an interchange file's rows: JSONL, a JSON array, CSV or Parquet, gzipped or not.

:func:`read_rows` gives every row of a file as ``(location, mapping)`` pairs, where the location names
the line or row for the messages (:class:`votes.files.records.InputError`); the parsers of
:mod:`votes.files.fields` then check each field. Reading refuses hostile input early: a gzip that
expands beyond a cap (:data:`MAX_EXPANDED_BYTES`), JSON nested too deeply or holding an integer of
thousands of digits (:func:`load_json`).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from leaderboard.spreadsheet import unescape_cell
from votes.files.records import FileFormat, InputError, type_name

__all__ = [
    "MAX_EXPANDED_BYTES",
    "csv_rows",
    "detect_format",
    "input_chunks",
    "input_sha256",
    "jsonl_rows",
    "load_json",
    "read_input_bytes",
    "read_rows",
]


#: Default cap on a gzipped file's expanded size (a few bytes of gzip can expand to gigabytes).
MAX_EXPANDED_BYTES = 1 << 30


_READ_CHUNK = 1 << 20


def input_chunks(path: Path, max_expanded: int | None = None) -> Generator[bytes, None, None]:
    """The bytes of a file in 1 MiB chunks, gunzipped when it is gzip, refused as soon as they expand
    beyond ``max_expanded`` bytes (:data:`MAX_EXPANDED_BYTES` by default)."""
    cap = MAX_EXPANDED_BYTES if max_expanded is None else max_expanded
    with path.open("rb") as fh:
        if fh.read(2) != b"\x1f\x8b":
            fh.seek(0)
            while chunk := fh.read(_READ_CHUNK):
                yield chunk
            return
        fh.seek(0)
        expanded = 0
        try:
            with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                while chunk := gz.read(_READ_CHUNK):
                    expanded += len(chunk)
                    if expanded > cap:
                        raise InputError(
                            path,
                            None,
                            f"expands to more than {cap:,} bytes when decompressed (the limit; raise it "
                            "with ARENA_MAX_EXPANDED_BYTES or --max-expanded-bytes)",
                        )
                    yield chunk
        except (OSError, EOFError) as exc:
            raise InputError(path, None, f"not a valid gzip file ({exc})") from None


def read_input_bytes(path: Path, max_expanded: int | None = None) -> bytes:
    """The bytes of a file, gunzipped when it is gzip, decompressed in 1 MiB steps and refused as soon as
    it expands beyond ``max_expanded`` bytes (:data:`MAX_EXPANDED_BYTES` by default), so a gzip bomb
    costs at most the cap in memory and a fraction of a second."""
    with path.open("rb") as fh:
        if fh.read(2) != b"\x1f\x8b":
            fh.seek(0)
            return fh.read()
    return b"".join(input_chunks(path, max_expanded))


def input_sha256(path: Path, max_expanded: int | None = None) -> str:
    """sha256 of what :func:`read_input_bytes` gives (``sha256sum``, or ``zcat | sha256sum`` of a gzipped
    file), hashed a chunk at a time: the file is never whole in memory. Refuses what it refuses."""
    digest = hashlib.sha256()
    for chunk in input_chunks(path, max_expanded):
        digest.update(chunk)
    return digest.hexdigest()


def _open_bytes(path: Path, max_expanded: int | None = None) -> bytes:
    return read_input_bytes(path, max_expanded)


def load_json(text: str | bytes) -> Any:
    """``json.loads`` whose every failure on hostile text is a :class:`json.JSONDecodeError`: nesting
    too deep for the parser (RecursionError) and integers beyond Python's digit limit included."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", "", 0) from None
    except ValueError as exc:  # an integer of thousands of digits
        raise json.JSONDecodeError(str(exc).split(";")[0], "", 0) from None


def detect_format(path: Path, data: bytes | None = None) -> FileFormat:
    """The file format from the extension (``.jsonl``, ``.ndjson``, ``.json``, ``.csv``, ``.parquet``,
    each optionally ``.gz``), else from the content."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    by_ext: dict[str, FileFormat] = {
        ".jsonl": "jsonl",
        ".ndjson": "jsonl",
        ".json": "json",
        ".csv": "csv",
        ".parquet": "parquet",
        ".pq": "parquet",
    }
    if ext in by_ext:
        fmt = by_ext[ext]
        if fmt != "json" or data is None:
            return fmt
    if data is None:
        data = _open_bytes(path)
    if data[:4] == b"PAR1":
        return "parquet"
    head = data[:4096].lstrip()
    if head.startswith(b"["):
        return "json"
    if head.startswith(b"{"):
        return "jsonl"
    return "csv"


def read_rows(
    path: Path, fmt: FileFormat | None = None, *, max_expanded: int | None = None
) -> tuple[FileFormat, list[tuple[str, dict[str, Any]]]]:
    """Read every row of a file as ``(location, mapping)`` pairs, location being e.g. ``"line 7"``.

    CSV cells are strings (empty cells are missing values); the parsers below convert them. A gzipped
    file may expand to at most ``max_expanded`` bytes (see :func:`read_input_bytes`).
    """
    if not path.is_file():
        raise InputError(path, None, "no such file")
    if fmt is None and path.suffix.lower() == ".parquet":
        fmt = "parquet"
    if fmt == "parquet":
        return fmt, _read_parquet(path)
    data = _open_bytes(path, max_expanded)
    fmt = fmt or detect_format(path, data)
    if fmt == "parquet":
        return fmt, _read_parquet(path, data)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if fmt == "jsonl":
        return fmt, _read_jsonl(path, text)
    if fmt == "json":
        return fmt, _read_json(path, text)
    return fmt, _read_csv(path, text)


def _read_jsonl(path: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    return list(jsonl_rows(path, text.split("\n")))


def jsonl_rows(path: Path, lines: Iterable[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """A JSON lines file's objects: ``("line N", object)``, blank lines passed over. ``lines`` are split on
    ``\\n`` only (a ``\\r`` or a Unicode line separator inside a JSON string is not a line end). Errors name
    the file and line."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            value = load_json(line)
        except json.JSONDecodeError as exc:
            raise InputError(path, where, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(value, dict):
            raise InputError(path, where, f"expected a JSON object, got {type_name(value)}")
        yield where, value


def _read_json(path: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    try:
        value = load_json(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            path, f"line {exc.lineno}", f"invalid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise InputError(path, None, f"expected a JSON array of objects, got {type_name(value)}")
    rows: list[tuple[str, dict[str, Any]]] = []
    for number, item in enumerate(value, start=1):
        where = f"item {number}"
        if not isinstance(item, dict):
            raise InputError(path, where, f"expected a JSON object, got {type_name(item)}")
        rows.append((where, item))
    return rows


def _read_csv(path: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    return list(csv_rows(path, io.StringIO(text, newline="")))


def csv_rows(path: Path, text: Iterable[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """A CSV file's rows after its header: ``("line N", cells)``, the cells unescaped (what the writer
    escaped for spreadsheets) and without the empty ones. Errors name the file and line."""
    reader = csv.reader(text)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        raise InputError(path, "line 1", f"invalid CSV ({exc})") from None
    if len(set(header)) != len(header):
        raise InputError(path, "line 1", "duplicate column names in the header")
    width = len(header)
    try:
        for cells in reader:
            where = f"line {reader.line_num}"
            if not cells:
                continue
            if len(cells) != width:
                raise InputError(path, where, f"expected {width} cells like the header, found {len(cells)}")
            cells = [unescape_cell(v) for v in cells]
            yield where, {k: v for k, v in zip(header, cells, strict=True) if v != ""}
    except csv.Error as exc:
        raise InputError(path, f"line {reader.line_num}", f"invalid CSV ({exc})") from None


def _read_parquet(path: Path, data: bytes | None = None) -> list[tuple[str, dict[str, Any]]]:
    try:
        source: Any = pa.BufferReader(data) if data is not None else str(path)
        table = pq.read_table(source)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(path, None, f"not a readable Parquet file ({exc})") from None
    records = table.to_pylist()
    return [(f"row {i}", {k: v for k, v in rec.items() if v is not None}) for i, rec in enumerate(records, 1)]
