"""Interchange files without a database: reading rows, typed field checks, the canonical row hash.

Two schemas travel in and out of Arena:

- the *catalog*: one model output per row (``prompt_id``, ``prompt``, ``category``, ``language``,
  ``model``, ``output``); ``prompt`` is a string or a list of ``{role, content}`` messages;
- *battles* in the Chatbot Arena format (``question_id``, ``model_a``, ``model_b``, ``winner``, ``judge``,
  ``conversation_a``, ``conversation_b``, ``turn``, ``anony``, ``language``, ``tstamp``).

Both can be JSONL, a JSON array, CSV or Parquet, optionally gzipped. Validation happens row by row,
before anything touches a database (battles in :mod:`votes.files.battle_rows`, catalogs in
:mod:`votes.files.catalog_records`), and every
problem is reported with the file, the line or row, and the reason. :func:`canonical_json` is the one
canonical form of a row; the writers (:mod:`votes.files.writers`) and the hashes use it, which is what makes
export -> import -> export byte-identical.
"""

from __future__ import annotations

import csv
import functools
import gzip
import hashlib
import io
import json
import math
import re
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from leaderboard.spreadsheet import unescape_cell
from votes.names import model_name

__all__ = [
    "csv_rows",
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
    "MAX_EXPANDED_BYTES",
    "TSTAMP_MAX",
    "canonical_json",
    "load_json",
    "input_chunks",
    "input_sha256",
    "read_input_bytes",
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
#: Default cap on a gzipped file's expanded size (a few bytes of gzip can expand to gigabytes).
MAX_EXPANDED_BYTES = 1 << 30
#: Largest accepted ``tstamp`` (seconds since 1970): the last second of the year 9999, the end of the
#: calendar every database and Python's datetime hold. Negative times are refused too.
TSTAMP_MAX = 253_402_300_799.0
_INT64 = 1 << 63
_SURROGATE = re.compile("[\ud800-\udfff]")
_READ_CHUNK = 1 << 20

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
    rows: list[tuple[str, dict[str, Any]]] = []
    loads = load_json
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
        value = load_json(text)
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


def detect_kind(path: Path, rows: Sequence[tuple[str, Mapping[str, Any]]]) -> Kind:
    """Battles have ``model_a``; a catalog has ``prompt_id``."""
    for _, row in rows[:50]:
        if "model_a" in row or "winner" in row:
            return "battles"
        if "prompt_id" in row or "output" in row:
            return "catalog"
    raise InputError(path, None, "cannot tell whether this is a catalog or battles (no model_a or prompt_id)")


# ------------------------------------------------------------------------------------------ validation


# A file names a few hundred models a million times: each distinct name is normalised once.
_stored_model_name = functools.lru_cache(maxsize=4096)(model_name)


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
        self.check_encodable(repr(key), value)
        return value

    def check_encodable(self, what: str, value: str) -> None:
        """Refuse a lone surrogate (JSON can spell one as an escape; UTF-8 cannot encode it)."""
        if not value.isascii() and (bad := _SURROGATE.search(value)) is not None:
            code = f"U+{ord(bad.group()):04X}"
            raise self.fail(f"{what} contains a lone surrogate ({code}), which is not valid Unicode text")

    def model(self, key: str, *, required: bool = False) -> str | None:
        """A model name in its stored form (:func:`votes.names.model_name`), or why it is refused."""
        value = self.raw.get(key)
        if value is None or value == "":
            return self.string(key, required=required)
        if not isinstance(value, str):
            raise self.fail(f"{key!r} must be a string, got {_type_name(value)}")
        try:
            return _stored_model_name(value)
        except ValueError as exc:
            raise self.fail(f"{key!r}: {exc}") from None

    def identifier(self, key: str, *, required: bool = False) -> str | None:
        value = self.raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            if not -_INT64 <= value < _INT64:
                raise self.fail(f"{key!r} is out of range (a 64-bit integer or a string)")
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
                number = int(value)
            except ValueError:
                raise self.fail(f"{key!r} must be an integer, got {value[:50]!r}") from None
            if not -_INT64 <= number < _INT64:
                raise self.fail(f"{key!r} is out of range (a 64-bit integer)")
            return number
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{key!r} must be an integer, got {_type_name(value)}")
        if not -_INT64 <= value < _INT64:
            raise self.fail(f"{key!r} is out of range (a 64-bit integer)")
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
        try:
            result = float(value)
        except OverflowError:  # an integer of hundreds of digits
            raise self.fail(f"{key!r} is out of range") from None
        if not math.isfinite(result):
            raise self.fail(f"{key!r} must be a finite number")
        return result

    def tstamp(self, key: str = "tstamp") -> float | None:
        """Seconds since 1970 (UTC), from 0 to :data:`TSTAMP_MAX`."""
        value = self.number(key)
        if value is not None and not 0.0 <= value <= TSTAMP_MAX:
            raise self.fail(
                f"{key!r} must be seconds since 1970 between 0 and {TSTAMP_MAX:.0f} (the year 9999), "
                f"got {value!r}"
            )
        return value

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
                value = load_json(value)
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
            self.check_encodable(f"{key!r} message {i}", role + content)
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
