"""How many rows of an import run came before each row with the same digest, counted in memory.

An import key is a row's digest and its occurrence number among identical rows of the file. Counting
the earlier occurrences through an index of the staging table on (run, digest) cost more disk writes
than anything else in an import: hash-ordered keys touch index pages all over the index in every
short transaction. A run belongs to one process, so the counts are kept here instead, 12 bytes per
distinct digest: its first 64 bits and the sequence number of its first row (32 bits while the run's
rows are numbered below 2**32), in sorted numpy arrays merged like a log-structured tree (a few levels,
each searched with ``searchsorted``). A digest seen once, nearly every one of a file, has no count
stored: the counts of those seen more than once are in a dictionary by prefix.

Two different digests can share 64 bits. A prefix already counted is therefore checked against the
full digest of its first row (one primary-key look-up in the staging table, or this batch's own row);
a digest whose prefix belongs to another is counted apart, exactly, in a small dictionary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = ["LEVEL_CAP", "DigestCounts", "Numbered", "digest_prefixes"]

#: Digests read from the database per look-up, for :class:`DigestCounts.keys`.
FetchDigests = Callable[[Sequence[int]], Mapping[int, str]]

#: Distinct digests a level grows to at most by merging (24 MB): a merge briefly holds the merged level
#: twice, so the largest level bounds that extra memory; ten million rows make a few more levels to search.
LEVEL_CAP = 2_000_000

_U64 = npt.NDArray[np.uint64]
_I64 = npt.NDArray[np.int64]
#: A level's sequence numbers: unsigned 32-bit while they fit, 64-bit after.
_SEQ_32_END = 2**32


def digest_prefixes(digests: Iterable[str]) -> _U64:
    """The first 64 bits of each hexadecimal digest (decoded in one pass, not one number per digest)."""
    heads = "".join(d[:16] for d in digests)
    if len(heads) % 16:
        raise ValueError("a digest shorter than 16 hexadecimal digits")
    return np.frombuffer(bytes.fromhex(heads), dtype=">u8").astype(np.uint64)


class Numbered(NamedTuple):
    """A batch's import keys, and the two integers the store finds each by: the first 64 bits of its
    digest as a signed number (what a 64-bit integer column holds) and its occurrence number."""

    keys: list[str]
    digests: _I64
    copies: _I64


def _seq_array(seqs: _I64) -> npt.NDArray[np.uint32] | _I64:
    """Sequence numbers in 32 bits when every one fits (the memory of a level's second column halved)."""
    if not len(seqs) or int(seqs.max()) < _SEQ_32_END:
        return seqs.astype(np.uint32)
    return seqs


class _Level:
    """One sorted run of distinct prefixes, with each one's first sequence number."""

    __slots__ = ("prefixes", "seqs")

    def __init__(self, prefixes: _U64, seqs: npt.NDArray[np.uint32] | _I64) -> None:
        self.prefixes, self.seqs = prefixes, seqs

    def find(self, prefixes: _U64) -> _I64:
        """Each prefix's index in this level, or -1."""
        at = np.searchsorted(self.prefixes, prefixes)
        inside = at < len(self.prefixes)
        found = np.zeros(len(prefixes), dtype=bool)
        found[inside] = self.prefixes[at[inside]] == prefixes[inside]
        return np.where(found, at, -1).astype(np.int64)


class DigestCounts:
    """Occurrence counts of the digests of one import run, in the order its rows are staged."""

    def __init__(self) -> None:
        self._levels: list[_Level] = []
        # The count of each prefix counted in a level that was seen more than once (one when absent).
        self._repeats: dict[int, int] = {}
        # Digests whose 64-bit prefix belongs to an earlier, different digest (practically never).
        self._apart: dict[str, int] = {}

    def clear(self) -> None:
        """Forget every count (the run's rows are all staged): the memory is given back at once."""
        self._levels.clear()
        self._repeats.clear()
        self._apart.clear()

    def keys(self, digests: Sequence[str], first_seq: int, fetch: FetchDigests) -> list[str]:
        """The import keys of a batch numbered from ``first_seq``: each digest and how many rows before
        it (earlier batches' and this batch's) had the same digest. ``fetch`` returns the staged digests
        of the given sequence numbers of this run (earlier batches only)."""
        return self.numbered(digests, first_seq, fetch).keys

    def apart(self, digests: Sequence[str]) -> npt.NDArray[np.bool_]:
        """Whether each digest's first 64 bits belong to another digest of the run, seen first: its keys
        cannot be told by those bits and the occurrence number (:mod:`votes.imports.keys`)."""
        if not self._apart:
            return np.zeros(len(digests), dtype=bool)
        return np.array([d in self._apart for d in digests], dtype=bool)

    def numbered(self, digests: Sequence[str], first_seq: int, fetch: FetchDigests) -> Numbered:
        """:meth:`keys`, with each key's occurrence number apart."""
        prefixes = digest_prefixes(digests)
        # The batch's prefixes in order, once: each level is searched with sorted keys (a binary search
        # that starts where the last one ended touches few new pages: a quarter of the time of keys in
        # hash order), and rows sharing a prefix are neighbours.
        order = np.argsort(prefixes, kind="stable")
        ordered = prefixes[order]
        # Each row's level (-1: none) and position in it; levels hold disjoint prefixes.
        at_level = np.full(len(digests), -1, dtype=np.int64)
        at = np.zeros(len(digests), dtype=np.int64)
        first_seqs: list[int] = []
        found = np.empty(len(digests), dtype=np.int64)
        for number, level in enumerate(self._levels):
            found[order] = level.find(ordered)
            hit = found >= 0
            at_level[hit], at[hit] = number, found[hit]
            first_seqs.extend(level.seqs[found[hit]].tolist())
        stored = fetch(sorted(set(first_seqs))) if first_seqs else {}
        # A row whose prefix no level holds and no other row of the batch shares is its digest's first
        # occurrence (nearly every row of a file): its key is made without the walk below.
        group = np.cumsum(np.concatenate(([True], ordered[1:] != ordered[:-1]))) - 1
        shared = np.empty(len(digests), dtype=np.int64)
        shared[order] = np.bincount(group)[group]
        alone = (at_level < 0) & (shared == 1)
        if self._apart:
            alone &= np.array([d not in self._apart for d in digests], dtype=bool)
        keys: list[str] = [f"{d}-0" for d in digests]
        copies = np.zeros(len(digests), dtype=np.int64)
        # prefix -> [first seq, count] for the other prefixes new in this batch (those of rows alone go
        # to the new level as arrays, without a dictionary entry per row)
        new: dict[int, list[int]] = {}
        for row in np.flatnonzero(~alone).tolist():
            digest, prefix, number, i = digests[row], int(prefixes[row]), int(at_level[row]), int(at[row])
            n = self._apart.get(digest)
            if n is not None:
                self._apart[digest] = n + 1
            elif number >= 0:
                level = self._levels[number]
                if stored.get(int(level.seqs[i])) == digest:
                    n = self._repeats.get(prefix, 1)
                    self._repeats[prefix] = n + 1
                else:
                    n, self._apart[digest] = 0, 1
            elif (entry := new.get(prefix)) is not None:
                if digests[entry[0] - first_seq] == digest:
                    n = entry[1]
                    entry[1] = n + 1
                else:
                    n, self._apart[digest] = 0, 1
            else:
                n = 0
                new[prefix] = [first_seq + row, 1]
            keys[row] = f"{digest}-{n}"
            copies[row] = n
        rows = np.flatnonzero(alone)
        values = np.array(list(new.values()), dtype=np.int64).reshape(-1, 2)
        self._repeats.update((prefix, entry[1]) for prefix, entry in new.items() if entry[1] > 1)
        self._push(
            np.concatenate([prefixes[rows], np.fromiter(new, dtype=np.uint64, count=len(new))]),
            np.concatenate([first_seq + rows.astype(np.int64), values[:, 0]]),
        )
        return Numbered(keys, prefixes.view(np.int64), copies)

    def _push(self, prefixes: _U64, seqs: _I64) -> None:
        """Add a batch's new prefixes (with each one's first sequence number) as a level, merging levels
        of similar size (amortised n log n)."""
        if not len(prefixes):
            return
        order = np.argsort(prefixes, kind="stable")
        level = _Level(prefixes[order], _seq_array(seqs[order]))
        while (
            self._levels
            and len(self._levels[-1].prefixes) <= 2 * len(level.prefixes)
            and len(self._levels[-1].prefixes) + len(level.prefixes) <= LEVEL_CAP
        ):
            level = _merged(self._levels.pop(), level)
        self._levels.append(level)


def _merged(old: _Level, new: _Level) -> _Level:
    """Two levels of disjoint prefixes as one sorted level. Each new prefix's place is found by binary
    search and every value is written once into the merged arrays: no sort and no concatenated copy, so a
    merge holds little more than the two levels and their sum (at ten million rows the largest merge is
    the import's peak)."""
    size = len(old.prefixes) + len(new.prefixes)
    at_new = np.searchsorted(old.prefixes, new.prefixes) + np.arange(len(new.prefixes))
    is_old = np.ones(size, dtype=bool)
    is_old[at_new] = False

    def placed(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> npt.NDArray[Any]:
        out = np.empty(size, dtype=np.result_type(a, b))  # 32-bit sequence numbers beside 64-bit ones
        out[is_old], out[at_new] = a, b
        return out

    return _Level(placed(old.prefixes, new.prefixes), placed(old.seqs, new.seqs))
