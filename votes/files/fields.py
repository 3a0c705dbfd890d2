"""Typed field checks on one raw row of an interchange file, with the reason for each refusal.

:class:`RowFields` reads a field as a string, a model name in its stored form, an identifier, a number,
a flag, a time or a conversation, converting CSV's text cells on the way (:func:`text_cells`), and
raises :class:`votes.files.records.InputError` naming the file, the row and the reason.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from votes.files.reading import load_json
from votes.files.records import NAME_MAX, TSTAMP_MAX, FileFormat, InputError, Message, type_name
from votes.names import model_name

__all__ = ["RowFields", "text_cells"]


_INT64 = 1 << 63


_SURROGATE = re.compile("[\ud800-\udfff]")


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
            raise self.fail(f"{key!r} must be a string, got {type_name(value)}")
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
            raise self.fail(f"{key!r} must be a string, got {type_name(value)}")
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
            raise self.fail(f"{key!r} must be an integer, got {type_name(value)}")
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
            raise self.fail(f"{key!r} must be true or false, got {type_name(value)}")
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
            raise self.fail(f"{key!r} must be a number, got {type_name(value)}")
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
