"""Interchange files' schemas: their columns, the errors that name a file's row, the canonical row form.

Two schemas travel in and out of Arena:

- the *catalog*: one model output per row (``prompt_id``, ``prompt``, ``category``, ``language``,
  ``model``, ``output``); ``prompt`` is a string or a list of ``{role, content}`` messages;
- *battles* in the Chatbot Arena format (``question_id``, ``model_a``, ``model_b``, ``winner``, ``judge``,
  ``conversation_a``, ``conversation_b``, ``turn``, ``anony``, ``language``, ``tstamp``).

Both can be JSONL, a JSON array, CSV or Parquet, optionally gzipped (read by :mod:`votes.files.reading`).
Validation happens row by row, before anything touches a database (typed fields in
:mod:`votes.files.fields`; battles in :mod:`votes.files.battle_rows`, catalogs in
:mod:`votes.files.catalog_records`), and every problem is reported with the file, the line or row, and
the reason (:class:`InputError`). :func:`canonical_json` is the one canonical form of a row; the writers
(:mod:`votes.files.writers`) and the hashes use it, which is what makes export -> import -> export
byte-identical.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "BATTLE_COLUMNS",
    "BATTLE_EXTRA_COLUMNS",
    "CATALOG_COLUMNS",
    "FORMATS",
    "NAME_MAX",
    "SHORT_MAX",
    "TSTAMP_MAX",
    "FileFormat",
    "InputError",
    "Kind",
    "Message",
    "Refusal",
    "RowError",
    "canonical_json",
    "check_columns",
    "detect_kind",
    "rows_sha256",
    "type_name",
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


#: Largest accepted ``tstamp`` (seconds since 1970): the last second of the year 9999, the end of the
#: calendar every database and Python's datetime hold. Negative times are refused too.
TSTAMP_MAX = 253_402_300_799.0


Message = dict[str, str]


class InputError(ValueError):
    """A file that cannot be imported: names the file, the line or row, and the reason."""

    def __init__(self, file: str | Path, where: str | None, reason: str) -> None:
        self.file = str(file)
        self.where = where
        self.reason = reason
        super().__init__(f"{self.file}: {where}: {reason}" if where else f"{self.file}: {reason}")


class RowError(InputError):
    """One bad row of a file that is otherwise readable: the row a reader given a list of refusals (the
    commands' ``--skip-invalid``) would leave out and list, raised when it was given none. A command that
    has the option says so in its message; an unreadable file (bad JSON, a missing column) is a plain
    :class:`InputError`, which no option skips."""

    def __init__(self, file: str | Path, where: str, reason: str) -> None:
        super().__init__(file, where, reason)

    @classmethod
    def of(cls, file: str | Path, refusal: Refusal) -> RowError:
        """The error of a refused row."""
        return cls(file, refusal.where, refusal.reason)


@dataclass(frozen=True)
class Refusal:
    """A row left out: where it is in its file and why."""

    where: str
    reason: str


def detect_kind(path: Path, rows: Sequence[tuple[str, Mapping[str, Any]]]) -> Kind:
    """Battles have ``model_a``; a catalog has ``prompt_id``."""
    for _, row in rows[:50]:
        if "model_a" in row or "winner" in row:
            return "battles"
        if "prompt_id" in row or "output" in row:
            return "catalog"
    raise InputError(path, None, "cannot tell whether this is a catalog or battles (no model_a or prompt_id)")


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


def type_name(value: Any) -> str:
    """What a JSON value is, in words, for a message (``an object``, ``a list``, ``a number``, ...)."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )
