"""Rows of a file read in batches, so an import of ten million battles holds one batch in memory at a time.

:func:`iter_row_batches` gives the same ``(location, mapping)`` pairs as
:func:`votes.files.reading.read_rows`, batch by batch: JSON lines and CSV are read line by line (gunzipped as
they stream, refused as soon as they expand beyond the cap), Parquet by record batch. A JSON array has no row
boundaries a reader can find without parsing it whole, so it is read whole (its size is bounded by the
decompression cap).
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from votes.bulk import gc_paused
from votes.files.reading import MAX_EXPANDED_BYTES, csv_rows, detect_format, jsonl_rows, read_rows
from votes.files.records import FileFormat, InputError

__all__ = ["BATCH_ROWS", "arrow_rows", "iter_parquet_batches", "iter_row_batches", "peek_format"]

#: Rows per batch: large enough that the per-batch statements are few, small enough to stay in memory.
BATCH_ROWS = 50_000
Rows = list[tuple[str, dict[str, Any]]]


class _Capped(io.RawIOBase):
    """A gunzipping reader that refuses to expand beyond ``cap`` bytes (the gzip-bomb guard)."""

    def __init__(self, path: Path, raw: IO[bytes], cap: int) -> None:
        self._path = path
        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self._cap = cap
        self._seen = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._gz.read(len(buffer))
        except (OSError, EOFError) as exc:
            raise InputError(self._path, None, f"not a valid gzip file ({exc})") from None
        self._seen += len(data)
        if self._seen > self._cap:
            raise InputError(
                self._path,
                None,
                f"expands to more than {self._cap:,} bytes when decompressed (the limit; raise it "
                "with ARENA_MAX_EXPANDED_BYTES or --max-expanded-bytes)",
            )
        buffer[: len(data)] = data
        return len(data)


def _open_text(path: Path, raw: IO[bytes], max_expanded: int | None) -> IO[str]:
    head = raw.read(2)
    raw.seek(0)
    stream: IO[bytes] = raw
    if head == b"\x1f\x8b":
        cap = MAX_EXPANDED_BYTES if max_expanded is None else max_expanded
        stream = io.BufferedReader(_Capped(path, raw, cap), buffer_size=1 << 20)
    return io.TextIOWrapper(stream, encoding="utf-8-sig", errors="strict", newline="")


def peek_format(path: Path, fmt: FileFormat | None) -> FileFormat:
    """The format of ``path`` from its name, else from its first bytes (decompressed when gzipped)."""
    if fmt is not None:
        return fmt
    with path.open("rb") as raw:
        head = raw.read(2)
        raw.seek(0)
        if head == b"\x1f\x8b":
            try:
                with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
                    start = gz.read(4096)
            except (OSError, EOFError) as exc:
                raise InputError(path, None, f"not a valid gzip file ({exc})") from None
        else:
            start = raw.read(4096)
    return detect_format(path, start)


def iter_row_batches(
    path: Path, fmt: FileFormat | None = None, *, max_expanded: int | None = None, size: int = BATCH_ROWS
) -> Iterator[tuple[FileFormat, Rows]]:
    """Yield ``(format, rows)`` batches of at most ``size`` rows; errors name the file and line."""
    if not path.is_file():
        raise InputError(path, None, "no such file")
    if fmt is None and path.suffix.lower() in (".parquet", ".pq"):
        fmt = "parquet"
    fmt = peek_format(path, fmt)
    if fmt == "parquet":
        yield from ((fmt, rows) for rows in _parquet_batches(path, size))
        return
    if fmt == "json":
        _, rows = read_rows(path, fmt, max_expanded=max_expanded)
        for start in range(0, len(rows), size):
            yield fmt, rows[start : start + size]
        return
    with path.open("rb") as raw, _open_text(path, raw, max_expanded) as text:
        read = jsonl_rows(path, _lines(text)) if fmt == "jsonl" else csv_rows(path, text)
        try:
            yield from ((fmt, batch) for batch in _batched(read, size))
        except UnicodeDecodeError as exc:
            raise InputError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _lines(text: IO[str]) -> Iterator[str]:
    """Lines split on ``\\n`` only, as :func:`votes.files.reading.read_rows` splits them (a ``\\r`` or a
    Unicode line separator inside a JSON string is not a line end)."""
    rest = ""
    while chunk := text.read(1 << 20):
        parts = (rest + chunk).split("\n")
        rest = parts.pop()
        yield from parts
    if rest:
        yield rest


def _batched(rows: Iterable[tuple[str, dict[str, Any]]], size: int) -> Iterator[Rows]:
    """``rows`` in lists of at most ``size``."""
    batch: Rows = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _parquet_batches(path: Path, size: int) -> Iterator[Rows]:
    for first_row, batch in iter_parquet_batches(path, size):
        yield arrow_rows(batch, first_row)


def iter_parquet_batches(path: Path, size: int = BATCH_ROWS) -> Iterator[tuple[int, pa.RecordBatch]]:
    """A Parquet file's record batches of at most ``size`` rows, each with the number of its first row
    (from 1); text columns stay dictionary-coded where the file codes them."""
    try:
        schema = pq.read_schema(str(path))
        coded = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
        with pq.ParquetFile(str(path), read_dictionary=coded) as reader:
            number = 1
            for batch in reader.iter_batches(batch_size=size):
                yield number, batch
                number += batch.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise InputError(path, None, f"not a readable Parquet file ({exc})") from None


def arrow_rows(batch: pa.RecordBatch, first_row: int) -> Rows:
    """A record batch as the careful path's rows: ``("row N", values without the nulls)``."""
    rows: Rows = []
    with gc_paused():  # a batch of plain dictionaries: no cycles for the collector to find
        for number, record in enumerate(batch.to_pylist(), start=first_row):
            rows.append((f"row {number}", {k: v for k, v in record.items() if v is not None}))
    return rows
