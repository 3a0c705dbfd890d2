"""SQLite's packed read of the votes (votes.reads.packed) gives what the row-by-row read gives, chunk after
chunk: the same battles and ledger digest, whatever the chunk holds (weights other than 1, times not in
canonical form, values of other types), and which chunks fell back to rows is what the texts allowed."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy.engine import Engine

from leaderboard.battles import Battles
from tests.factories import assert_same_battles, write_jsonl
from votes.dialects.sqlite import SQLITE
from votes.imports.files import import_file
from votes.reads import cells, scans
from votes.reads import packed as packed_votes
from votes.reads.filters import VoteFilter
from votes.reads.ledger import LedgerDigest, ledger_sha256
from votes.reads.scans import load_battles

FILTERS = (
    None,
    VoteFilter(exclude_flagged=True),
    VoteFilter(annotators=("all",)),
    VoteFilter(language="German"),
    VoteFilter(exclude_flagged=True, flagged_weight=0.5),
)


def _rows(n: int, *, weighted: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for k in range(n):
        row: dict[str, Any] = {
            "model_a": ("alpha", "beta, gamma", "ünïcode")[k % 3],
            "model_b": ("delta", "epsilon")[k % 2],
            "winner": ("model_a", "model_b", "tie", "tie (bothbad)")[k % 4],
            "judge": ("j-one", None, "j-two")[k % 3],
            "language": "German" if k % 5 == 0 else "English",
            "tstamp": 1.7e9 + 3 * k + (k % 7) / 8.0,
        }
        if k % 9 == 4:
            row["sided"] = False
        if weighted and k == 17:
            row["weight"] = 1 / 3
        rows.append(row)
    return rows


def _read(engine: Engine, filters: VoteFilter | None, who: bool) -> tuple[Battles, str | None, bool]:
    with engine.connect() as conn:
        if not who:
            return load_battles(conn, filters=filters), None, False
        ledger = LedgerDigest(conn)
        battles = load_battles(conn, filters=filters, who=True, each_chunk=ledger.update)
        assert ledger.hexdigest(filters) == ledger_sha256(conn, filters)
        return battles, ledger.hexdigest(filters), ledger._usable


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Chunks of 7 votes; the list records, chunk by chunk, whether it was read packed."""
    monkeypatch.setattr(scans, "SCAN_CHUNK", 7)
    packed: list[bool] = []
    real = packed_votes.packed_chunks

    def chunks(*args: Any, **kwargs: Any) -> Iterator[packed_votes.PackedChunk | packed_votes.RowsNeeded]:
        for found in real(*args, **kwargs):
            packed.append(isinstance(found, packed_votes.PackedChunk))
            yield found

    monkeypatch.setattr(scans, "packed_chunks", chunks)
    yield packed


def _rows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packed_votes, "_parse", lambda *args: None)


@pytest.mark.parametrize("filters", FILTERS)
@pytest.mark.parametrize("who", [True, False])
def test_packed_read_is_the_row_read(
    engine: Engine,
    tmp_path: Path,
    small_chunks: list[bool],
    monkeypatch: pytest.MonkeyPatch,
    filters: VoteFilter | None,
    who: bool,
) -> None:
    import_file(engine, write_jsonl(tmp_path / "battles.jsonl", _rows(60, weighted=True)))
    packed, digest, formatted = _read(engine, filters, who)
    read_packed = list(small_chunks)
    _rows_only(monkeypatch)
    rows, row_digest, _ = _read(engine, filters, who)
    assert_same_battles(packed, rows)
    assert digest == row_digest
    if engine.dialect.name == "sqlite":
        assert formatted == who
        # the weighted vote's chunk (when the filter selects it) was read row by row, the others packed
        selected = filters is None or filters.language is None
        assert read_packed.count(False) == (1 if selected else 0) and True in read_packed
    else:
        assert small_chunks == []


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("created_at", "2023-11-14T22:13:20.250000"),  # another form SQLite reads
        ("created_at", "2023-11-14 22:13:20"),  # no fraction: shorter than the canonical form
        ("created_at", "2023-11-14 22:13:20.0000001"),  # longer
        ("model_a_id", "seven"),  # text where an id belongs
        ("model_b_id", 2.5),  # a fraction where an id belongs
        ("sided", 2),  # a side that is neither 0 nor 1
        ("weight", 2.0),
    ],
)
def test_a_chunk_the_texts_cannot_carry_is_read_by_rows(
    engine: Engine, tmp_path: Path, small_chunks: list[bool], column: str, value: Any
) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("the packed read is SQLite's")
    import_file(engine, write_jsonl(tmp_path / "battles.jsonl", _rows(30, weighted=False)))
    # the file's own connection: no foreign keys checked, so an id may hold what no write stores
    with closing(sqlite3.connect(str(engine.url.database))) as raw, raw:
        raw.execute(f"UPDATE vote SET {column} = ? WHERE id = (SELECT MIN(id) + 9 FROM vote)", (value,))
    with engine.connect() as conn:
        expected: Any = None
        try:
            with pytest.MonkeyPatch.context() as mp:
                _rows_only(mp)
                expected = load_battles(conn, who=True)
        except (ValueError, TypeError) as exc:  # what the row read makes of a value no write stores
            expected = type(exc)
        del small_chunks[:]
        try:
            got: Any = load_battles(conn, who=True)
        except (ValueError, TypeError) as exc:
            got = type(exc)
    if isinstance(expected, Battles):
        assert_same_battles(got, expected)
    else:
        assert got is expected
    # the chunk holding the changed vote (the second of 7) fell back to rows, the first was packed (and
    # the others too, unless the rows of the second made the read fail)
    assert small_chunks == [True, False, True, True, True][: len(small_chunks)] and len(small_chunks) >= 2


def test_integer_texts_are_read_strictly() -> None:
    read = packed_votes._integers
    np.testing.assert_array_equal(read("1,-2,30", 3), [1, -2, 30])
    for bad in ("1, ,2", "1,,2", "1,2,", ",1,2", "1,+2", "1, 2", "1,2.5", "1,9223372036854775808", "1,-"):
        assert read(bad, 3 if bad.count(",") == 2 else bad.count(",") + 1) is None, bad
    assert read("1,2", 3) is None
    assert read(None, 1) is None


@pytest.mark.parametrize("filters", FILTERS)
@pytest.mark.parametrize("weighted", [True, False])
def test_packed_cells_are_the_row_cells(
    engine: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    filters: VoteFilter | None,
    weighted: bool,
) -> None:
    """SQLite's counts come packed (one row of texts) when every cell's weights sum to its vote number,
    else row by row: either way the cells the rows give, side-less votes in cells of their own."""
    import_file(engine, write_jsonl(tmp_path / "battles.jsonl", _rows(60, weighted=weighted)))
    packed: list[bool] = []
    real = packed_votes.packed_cells

    def spy(*args: Any) -> packed_votes.PackedCells | None:
        found = real(*args)
        packed.append(found is not None)
        return found

    monkeypatch.setattr(cells, "packed_cells", spy)
    with engine.connect() as conn:
        counts = cells.load_pair_counts(conn, filters=filters)
        monkeypatch.setattr(cells, "packed_cells", lambda *args: None)
        rows = cells.load_pair_counts(conn, filters=filters)
    assert counts.models == rows.models
    for name in ("model_a", "model_b", "outcome", "count", "votes", "sided"):
        x, y = getattr(counts, name), getattr(rows, name)
        if x is None or y is None:
            assert x is None and y is None, name
        else:
            assert x.dtype == y.dtype, name
            np.testing.assert_array_equal(x, y, err_msg=name)
    assert counts.sided is not None  # some votes have no known side
    if engine.dialect.name != "sqlite":
        assert packed == []
    else:
        # weighted: the 1/3 vote's cell (unless a flagged weight or the language leaves it out) and a
        # down-weighted filter's cells are not whole numbers
        whole = not weighted or (filters is not None and filters.language is not None)
        if filters is not None and filters.flagged_weight is not None:
            whole = whole and counts.votes is None
        assert packed == [whole]


def test_cells_with_an_unknown_outcome_are_read_by_rows(engine: Engine, tmp_path: Path) -> None:
    """An outcome word no write stores has no digit: the packed counts give way to the rows, whose
    reading names the word."""
    if engine.dialect.name != "sqlite":
        pytest.skip("the packed read is SQLite's")
    import_file(engine, write_jsonl(tmp_path / "battles.jsonl", _rows(30, weighted=False)))
    with closing(sqlite3.connect(str(engine.url.database))) as raw, raw:
        raw.execute("UPDATE vote SET winner = 'draw' WHERE id = (SELECT MIN(id) FROM vote)")
    with engine.connect() as conn:
        stmt = cells.pair_counts_statement(VoteFilter(), dialect=SQLITE)
        assert packed_votes.packed_cells(conn, stmt) is None
        with pytest.raises(ValueError, match="draw"):
            cells.load_pair_counts(conn)
