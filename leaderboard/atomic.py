"""Files that are either the old version or the whole new one: written aside, flushed, then renamed.

An export or a snapshot file that fails half-way (a full disk, a file size limit, a crash) must not leave
a truncated file where the previous good one was: readers open these files in spreadsheets and scripts
that would take a cut-off CSV at its word. So every output file is written to a temporary file in the same
folder, flushed to disk, and renamed over the target (atomic on POSIX); on any error the temporary file
is removed and the target is untouched.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal, overload

__all__ = ["atomic_file", "write_bytes_atomic"]


@overload
def atomic_file(target: Path | str, mode: Literal["wb"]) -> contextlib.AbstractContextManager[IO[bytes]]: ...
@overload
def atomic_file(
    target: Path | str, mode: Literal["w"], *, encoding: str = "utf-8", newline: str | None = None
) -> contextlib.AbstractContextManager[IO[str]]: ...
def atomic_file(
    target: Path | str, mode: Literal["w", "wb"], *, encoding: str = "utf-8", newline: str | None = None
) -> contextlib.AbstractContextManager[IO[Any]]:
    """Open a temporary file beside ``target``; on a clean exit it replaces ``target``.

    ``mode`` is ``"w"`` (text, with ``encoding`` and ``newline``) or ``"wb"``. The file gets the mode a
    plain ``open`` would give it (0666 less the umask).
    """
    return _atomic(Path(target), mode, encoding, newline)


@contextlib.contextmanager
def _atomic(target: Path, mode: str, encoding: str, newline: str | None) -> Iterator[IO[Any]]:
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.partial")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        binary = mode == "wb"
        handle: IO[Any] = os.fdopen(
            fd, mode, encoding=None if binary else encoding, newline=None if binary else newline
        )
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def write_bytes_atomic(target: Path | str, blob: bytes) -> None:
    """``target.write_bytes(blob)``, all or nothing."""
    with atomic_file(target, "wb") as handle:
        handle.write(blob)
