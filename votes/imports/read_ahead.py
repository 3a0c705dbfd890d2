"""An iterator's next item made in a worker thread while the caller works on the current one.

An import reads, checks and hashes a batch (pyarrow, numpy and hashlib, which release the interpreter
lock for their bulk work) and then writes it to the database (SQLite and the PostgreSQL driver release
it while the statement runs). Done one after the other, each core waits on the other half; with the next
batch read ahead, reading and writing overlap on two cores. One item ahead at most: memory holds two
batches, never the file.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar, cast

__all__ = ["read_ahead"]

T = TypeVar("T")

_END = object()


def read_ahead(items: Iterable[T]) -> Generator[T, None, None]:
    """The items of ``items`` in order, each next one produced in one worker thread meanwhile.

    An exception raised while producing an item is raised here, in the caller's thread, when that item
    is due. When the caller stops early (an error, Ctrl-C, ``close``), the item being produced is
    finished and dropped, and ``items`` is not advanced further."""
    source = iter(items)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="read-ahead") as worker:
        coming = worker.submit(next, source, _END)
        while True:
            item = coming.result()
            if item is _END:
                return
            coming = worker.submit(next, source, _END)
            yield cast(T, item)
