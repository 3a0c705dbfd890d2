"""Interchange files without a database: reading rows, typed field checks, the canonical row hash.

Two schemas travel in and out of Arena:

- the *catalog*: one model output per row (``prompt_id``, ``prompt``, ``category``, ``language``,
  ``model``, ``output``); ``prompt`` is a string or a list of ``{role, content}`` messages;
- *battles* in the Chatbot Arena format (``question_id``, ``model_a``, ``model_b``, ``winner``, ``judge``,
  ``conversation_a``, ``conversation_b``, ``turn``, ``anony``, ``language``, ``tstamp``).

Both can be JSONL, a JSON array, CSV or Parquet, optionally gzipped. Validation happens row by row,
before anything touches a database (battles in :mod:`votes.battle_rows`, catalogs in
:mod:`votes.catalog_records`), and every
problem is reported with the file, the line or row, and the reason. :func:`canonical_json` is the one
canonical form of a row; the writers (:mod:`votes.file_writers`) and the hashes use it, which is what makes
export -> import -> export byte-identical.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "BATTLE_COLUMNS",
    "BATTLE_EXTRA_COLUMNS",
    "CATALOG_COLUMNS",
    "FORMATS",
    "NAME_MAX",
    "Refusal",
    "SHORT_MAX",
    "FileFormat",
    "InputError",
    "Kind",
    "Message",
    "RowFields",
    "canonical_json",
    "text_cells",
    "check_columns",
    "detect_format",
    "detect_kind",
    "read_rows",
    "rows_sha256",
]

FileFormat = Literal["jsonl", "json", "csv", "parquet"]
Kind = Literal["catalog", "battles"]
FORMATS: tuple[FileFormat, ...] = ("jsonl", "json", "csv", "parquet")

BATTLE_COLUMNS = (
    "question_id",
    "model_a",
    "model_b",
    "winner",
    "judge",
    "conversation_a",
    "conversation_b",
    "turn",
    "anony",
    "language",
    "tstamp",
)
#: Columns of our own a battle row carries only when they differ from their defaults (1 and true).
BATTLE_EXTRA_COLUMNS = ("weight", "sided")
CATALOG_COLUMNS = ("prompt_id", "prompt", "category", "language", "model", "output")
_REQUIRED: dict[Kind, tuple[str, ...]] = {
    "battles": ("model_a", "model_b", "winner"),
    "catalog": ("prompt_id", "prompt"),
}
NAME_MAX = 200
SHORT_MAX = 100

Message = dict[str, str]


class InputError(ValueError):
    """A file that cannot be imported: names the file, the line or row, and the reason."""

    def __init__(self, file: str | Path, where: str | None, reason: str) -> None:
        self.file = str(file)
        self.where = where
        self.reason = reason
        super().__init__(f"{self.file}: {where}: {reason}" if where else f"{self.file}: {reason}")


@dataclass(frozen=True)
class Refusal:
    """A row left out: where it is in its file and why."""

    where: str
    reason: str


# --------------------------------------------------------------------------------------------- reading


def _open_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise InputError(path, None, f"not a valid gzip file ({exc})") from None
    return data


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
    path: Path, fmt: FileFormat | None = None
) -> tuple[FileFormat, list[tuple[str, dict[str, Any]]]]:
    """Read every row of a file as ``(location, mapping)`` pairs, location being e.g. ``"line 7"``.

    CSV cells are strings (empty cells are missing values); the parsers below convert them.
    """
    if not path.is_file():
        raise InputError(path, None, "no such file")
    if fmt is None and path.suffix.lower() == ".parquet":
        fmt = "parquet"
    if fmt == "parquet":
        return fmt, _read_parquet(path)
    data = _open_bytes(path)
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
    rows: list[tuple[str, dict[str, Any]]] = []
    loads = json.loads
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            value = loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(path, where, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(value, dict):
            raise InputError(path, where, f"expected a JSON object, got {_type_name(value)}")
        rows.append((where, value))
    return rows


def _read_json(path: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            path, f"line {exc.lineno}", f"invalid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise InputError(path, None, f"expected a JSON array of objects, got {_type_name(value)}")
    rows: list[tuple[str, dict[str, Any]]] = []
    for number, item in enumerate(value, start=1):
        where = f"item {number}"
        if not isinstance(item, dict):
            raise InputError(path, where, f"expected a JSON object, got {_type_name(item)}")
        rows.append((where, item))
    return rows


def _read_csv(path: Path, text: str) -> list[tuple[str, dict[str, Any]]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        return []
    except csv.Error as exc:
        raise InputError(path, "line 1", f"invalid CSV ({exc})") from None
    if len(set(header)) != len(header):
        raise InputError(path, "line 1", "duplicate column names in the header")
    rows: list[tuple[str, dict[str, Any]]] = []
    width = len(header)
    try:
        for cells in reader:
            where = f"line {reader.line_num}"
            if not cells:
                continue
            if len(cells) != width:
                raise InputError(path, where, f"expected {width} cells like the header, found {len(cells)}")
            rows.append((where, {k: v for k, v in zip(header, cells, strict=True) if v != ""}))
    except csv.Error as exc:
        raise InputError(path, f"line {reader.line_num}", f"invalid CSV ({exc})") from None
    return rows


def _read_parquet(path: Path, data: bytes | None = None) -> list[tuple[str, dict[str, Any]]]:
    try:
        source: Any = pa.BufferReader(data) if data is not None else str(path)
        table = pq.read_table(source)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(path, None, f"not a readable Parquet file ({exc})") from None
    records = table.to_pylist()
    return [(f"row {i}", {k: v for k, v in rec.items() if v is not None}) for i, rec in enumerate(records, 1)]


def detect_kind(path: Path, rows: Sequence[tuple[str, Mapping[str, Any]]]) -> Kind:
    """Battles have ``model_a``; a catalog has ``prompt_id``."""
    for _, row in rows[:50]:
        if "model_a" in row or "winner" in row:
            return "battles"
        if "prompt_id" in row or "output" in row:
            return "catalog"
    raise InputError(path, None, "cannot tell whether this is a catalog or battles (no model_a or prompt_id)")


# ------------------------------------------------------------------------------------------ validation


class RowFields:
    """Typed field access on one raw row; CSV rows hold strings that are converted on the way."""

    def __init__(self, path: Path, where: str, raw: Mapping[str, Any], *, text_cells: bool) -> None:
        self.path, self.where, self.raw, self.text_cells = path, where, raw, text_cells

    def fail(self, reason: str) -> InputError:
        return InputError(self.path, self.where, reason)

    def string(self, key: str, *, required: bool = False, max_length: int = NAME_MAX) -> str | None:
        value = self.raw.get(key)
        if value is None:
            if required:
                raise self.fail(f"missing field {key!r}")
            return None
        if not isinstance(value, str):
            raise self.fail(f"{key!r} must be a string, got {_type_name(value)}")
        if value == "":
            if required:
                raise self.fail(f"{key!r} must not be empty")
            return None
        if len(value) > max_length:
            raise self.fail(f"{key!r} is longer than {max_length} characters")
        if "\x00" in value:
            raise self.fail(f"{key!r} contains a NUL character")
        return value

    def identifier(self, key: str, *, required: bool = False) -> str | None:
        value = self.raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return self.string(key, required=required)

    def text(self, key: str, *, required: bool = False) -> str | None:
        return self.string(key, required=required, max_length=10_000_000)

    def integer(self, key: str) -> int | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if self.text_cells and isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                raise self.fail(f"{key!r} must be an integer, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{key!r} must be an integer, got {_type_name(value)}")
        return value

    def boolean(self, key: str) -> bool | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if self.text_cells and isinstance(value, str):
            lowered = value.strip().lower()
            if lowered in ("true", "1"):
                return True
            if lowered in ("false", "0"):
                return False
            raise self.fail(f"{key!r} must be true or false, got {value!r}")
        if not isinstance(value, bool):
            raise self.fail(f"{key!r} must be true or false, got {_type_name(value)}")
        return value

    def number(self, key: str) -> float | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if self.text_cells and isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise self.fail(f"{key!r} must be a number, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"{key!r} must be a number, got {_type_name(value)}")
        result = float(value)
        if not math.isfinite(result):
            raise self.fail(f"{key!r} must be a finite number")
        return result

    def messages(self, key: str, *, required: bool = False, text_allowed: bool = False) -> Any:
        """A conversation ``[{role, content}, ...]`` (JSON-encoded in CSV and Parquet string cells)."""
        value = self.raw.get(key)
        if value is None:
            if required:
                raise self.fail(f"missing field {key!r}")
            return None
        if isinstance(value, str):
            if text_allowed and not _looks_like_conversation(value):
                if value == "":
                    raise self.fail(f"{key!r} must not be empty")
                return value
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise self.fail(f"{key!r} is not valid JSON ({exc.msg})") from None
        if not isinstance(value, list) or not value:
            raise self.fail(f"{key!r} must be a non-empty list of {{role, content}} messages")
        out: list[Message] = []
        for i, message in enumerate(value):
            if not isinstance(message, dict):
                raise self.fail(f"{key!r} message {i} must be an object with role and content")
            role, content = message.get("role"), message.get("content")
            if not isinstance(role, str) or not role or not isinstance(content, str):
                raise self.fail(f"{key!r} message {i} needs a string 'role' and a string 'content'")
            if "\x00" in role or "\x00" in content:
                raise self.fail(f"{key!r} message {i} contains a NUL character")
            out.append({"role": role, "content": content})
        return tuple(out)


def _looks_like_conversation(value: str) -> bool:
    return value.lstrip().startswith("[{")


def text_cells(fmt: FileFormat) -> bool:
    """CSV cells are text to convert; the other formats carry typed values."""
    return fmt == "csv"


def check_columns(
    path: Path, fmt: FileFormat, rows: Sequence[tuple[str, Mapping[str, Any]]], kind: Kind
) -> None:
    """CSV and Parquet have a header: report a missing column once, for the whole file."""
    if fmt not in ("csv", "parquet") or not rows:
        return
    seen: set[str] = set()
    for _, row in rows:
        seen.update(row)
    missing = [c for c in _REQUIRED[kind] if c not in seen]
    if missing:
        raise InputError(path, None, f"missing column {missing[0]!r}")


# --------------------------------------------------------------------------------------------- writing


# One encoder for every line: json.dumps with options builds a new encoder per call (2x slower).
_CANONICAL = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def canonical_json(row: Mapping[str, Any]) -> str:
    """One JSONL line, the same on every platform: keys in schema order, UTF-8, shortest float repr."""
    return _CANONICAL.encode(row)


def rows_sha256(rows: Iterable[Mapping[str, Any]], *, kind: Kind = "battles") -> str:
    """sha256 of the rows' canonical JSONL export, computed without writing the file."""
    columns = BATTLE_COLUMNS if kind == "battles" else CATALOG_COLUMNS
    extra = BATTLE_EXTRA_COLUMNS if kind == "battles" else ()
    digest = hashlib.sha256()
    for row in rows:
        line = {c: row[c] for c in columns} | {c: row[c] for c in extra if c in row}
        digest.update(canonical_json(line).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )
