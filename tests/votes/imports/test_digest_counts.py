"""In-memory occurrence counts of an import run's digests, against a plain dictionary count."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

import votes.imports.digest_counts
from votes.imports.digest_counts import DigestCounts


def _expected(digests: Sequence[str]) -> list[str]:
    seen: dict[str, int] = {}
    keys = []
    for d in digests:
        keys.append(f"{d}-{seen.get(d, 0)}")
        seen[d] = seen.get(d, 0) + 1
    return keys


def _run(digests: list[str], batch: int) -> list[str]:
    counts = DigestCounts()
    staged: dict[int, str] = {}
    keys: list[str] = []

    def fetch(seqs: Sequence[int]) -> Mapping[int, str]:
        return {s: staged[s] for s in seqs}

    for start in range(0, len(digests), batch):
        part = digests[start : start + batch]
        keys.extend(counts.keys(part, start, fetch))
        staged.update(enumerate(part, start=start))
    return keys


def test_counts_repeats_within_and_across_batches() -> None:
    rng = random.Random(3)
    pool = [f"{rng.getrandbits(160):040x}" for _ in range(300)]
    digests = [rng.choice(pool) for _ in range(2_000)]
    for batch in (1, 7, 100, 2_000):
        assert _run(digests, batch) == _expected(digests)


def test_digests_sharing_their_first_64_bits_are_counted_apart() -> None:
    rng = random.Random(4)
    prefix = "ab" * 8
    twins = [prefix + f"{rng.getrandbits(96):024x}" for _ in range(4)]
    others = [f"{rng.getrandbits(160):040x}" for _ in range(20)]
    digests = [rng.choice(twins + others) for _ in range(500)]
    for batch in (1, 3, 50, 500):
        assert _run(digests, batch) == _expected(digests)


def test_many_distinct_digests_merged_through_levels_keep_their_counts() -> None:
    """Mostly new digests (as in a real file), repeated now and then, in batches of every size: the
    levels merge many times and every repeat still finds its earlier rows; the levels stay sorted."""
    rng = random.Random(5)
    fresh = [f"{rng.getrandbits(160):040x}" for _ in range(6_000)]
    digests = [fresh[i] if rng.random() < 0.9 else rng.choice(fresh[: i + 1]) for i in range(6_000)]
    for batch in (1, 13, 250, 6_000):
        assert _run(digests, batch) == _expected(digests)
    counts = DigestCounts()
    counts.keys(digests[:3_000], 0, lambda seqs: {s: digests[s] for s in seqs})
    for start in range(3_000, 6_000, 97):
        counts.keys(digests[start : start + 97], start, lambda seqs: {s: digests[s] for s in seqs})
    for level in counts._levels:
        assert (level.prefixes[1:] > level.prefixes[:-1]).all()


def test_levels_stop_merging_at_the_cap_and_still_count_every_repeat(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the cap levels are left apart (more levels to search, no big merge): the keys are the same."""
    monkeypatch.setattr(votes.imports.digest_counts, "LEVEL_CAP", 400)
    rng = random.Random(6)
    fresh = [f"{rng.getrandbits(160):040x}" for _ in range(5_000)]
    digests = [fresh[i] if rng.random() < 0.85 else rng.choice(fresh[: i + 1]) for i in range(5_000)]
    for batch in (1, 37, 150):
        assert _run(digests, batch) == _expected(digests)
    counts = DigestCounts()
    for start in range(0, 5_000, 150):
        counts.keys(digests[start : start + 150], start, lambda seqs: {s: digests[s] for s in seqs})
    sizes = [len(level.prefixes) for level in counts._levels]
    assert max(sizes) <= 400 and len(sizes) >= 5000 * 0.85 // 400, sizes


def test_sequence_numbers_past_32_bits_merge_with_those_below() -> None:
    """Levels hold 32-bit sequence numbers while they fit and 64-bit ones after; merged together they
    keep every number, so a repeat still finds its first row's digest."""
    rng = random.Random(7)
    fresh = [f"{rng.getrandbits(160):040x}" for _ in range(3_000)]
    digests = [fresh[i] if rng.random() < 0.8 else rng.choice(fresh[: i + 1]) for i in range(3_000)]
    base = 2**32 - 1_500  # the run's rows numbered across 2**32
    staged: dict[int, str] = {}
    counts = DigestCounts()
    keys: list[str] = []
    for start in range(0, 3_000, 300):
        part = digests[start : start + 300]
        keys.extend(counts.keys(part, base + start, lambda seqs: {s: staged[s] for s in seqs}))
        staged.update(enumerate(part, start=base + start))
    assert keys == _expected(digests)
    assert {level.seqs.dtype for level in counts._levels} == {np.dtype(np.int64)}  # merged with the 32-bit
    first = DigestCounts()
    first.keys(digests[:300], 0, lambda seqs: {})
    assert {level.seqs.dtype for level in first._levels} == {np.dtype(np.uint32)}


def test_a_file_of_distinct_rows_costs_twelve_bytes_a_row_and_clear_gives_it_back() -> None:
    rng = random.Random(8)
    digests = [f"{rng.getrandbits(160):040x}" for _ in range(20_000)]
    counts = DigestCounts()
    for start in range(0, len(digests), 1_000):
        counts.keys(digests[start : start + 1_000], start, lambda seqs: {s: digests[s] for s in seqs})
    held = sum(level.prefixes.nbytes + level.seqs.nbytes for level in counts._levels)
    assert held == 12 * len(digests)
    assert not counts._repeats
    counts.clear()
    assert not counts._levels
    # counted again from nothing: the same keys as a new count
    assert counts.keys(digests[:5], 0, lambda seqs: {}) == _expected(digests[:5])
