"""The vote ledger on both backends: a battles CSV the readers take back to the same votes, its sha256 is
``sha256sum`` of the written file, hostile names stay one cell, and the filter shows in the digest."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from tests.factories import write_jsonl
from votes.files.columns import read_battles
from votes.imports.files import import_file
from votes.reads.battle_shares import battle_shares_of, weekly_battle_shares
from votes.reads.filters import VoteFilter
from votes.reads.ledger import LEDGER_HEADER, LedgerDigest, iter_ledger_blocks, ledger_sha256, write_ledger
from votes.reads.scans import load_battles

# Model names a CSV would misread (formula starts are refused at the door; judges below carry them).
HOSTILE = ('comma, "quoted" model', "plain-model", "ünïcode-模型", "semi;colon's")


def _rows(n: int = 300, seed: int = 3) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for k in range(n):
        a, b = (str(x) for x in rng.choice(HOSTILE, size=2, replace=False))
        row: dict[str, Any] = {
            "model_a": a,
            "model_b": b,
            "winner": ("model_a", "model_b", "tie", "tie (bothbad)")[k % 4],
            "judge": ("=cmd|x", 'judge "one", two', None)[k % 3],
            "language": "German" if k % 5 == 0 else "English",
            "tstamp": 1.7e9 + k + (k % 7) / 8.0,
        }
        if k % 6 == 1:
            row["weight"] = 0.25
        if k % 10 == 3:
            row["sided"] = False
        rows.append(row)
    return rows


def test_ledger_reads_back_to_the_stored_votes_and_hashes_as_sha256sum(
    engine: Engine, tmp_path: Path
) -> None:
    import_file(engine, write_jsonl(tmp_path / "battles.jsonl", _rows()))
    n, digest = write_ledger(engine, tmp_path / "ledger.csv")
    data = (tmp_path / "ledger.csv").read_bytes()
    assert n == 300 and data.startswith(LEDGER_HEADER.encode())
    assert hashlib.sha256(data).hexdigest() == digest
    assert b'"\'=cmd|x"' in data  # a judge label a spreadsheet would run is escaped
    with engine.connect() as conn:
        assert ledger_sha256(conn) == digest
        stored = load_battles(conn)
    read = read_battles(tmp_path / "ledger.csv")
    assert read.digest == digest  # recompute --from the ledger records the same votes sha256
    got = read.battles
    assert got.models == stored.models  # hostile names come back whole, apostrophes taken off
    assert set(stored.models) == set(HOSTILE)
    for field in ("model_a", "model_b", "outcome"):
        assert np.array_equal(getattr(got, field), getattr(stored, field)), field
    ones = np.ones(len(stored.model_a))
    assert np.array_equal(
        ones if got.weight is None else got.weight, ones if stored.weight is None else stored.weight
    )
    sides = ones.astype(bool)
    assert np.array_equal(
        sides if got.sided is None else got.sided, sides if stored.sided is None else stored.sided
    )
    assert got.time is not None and stored.time is not None
    assert np.allclose(got.time, stored.time, rtol=0.0, atol=1e-6)


def test_ledger_digest_follows_the_filter_and_new_votes(engine: Engine, tmp_path: Path) -> None:
    import_file(engine, write_jsonl(tmp_path / "battles.jsonl", _rows(120)))
    with engine.connect() as conn:
        everything = ledger_sha256(conn)
        german = ledger_sha256(conn, VoteFilter(language="German"))
        blocks = b"".join(iter_ledger_blocks(conn, VoteFilter(language="German")))
    assert german != everything
    assert blocks.count(b"\n") == 1 + 24  # the header and every fifth vote
    assert hashlib.sha256(blocks).hexdigest() == german
    import_file(engine, write_jsonl(tmp_path / "more.jsonl", _rows(10, seed=9)))
    with engine.connect() as conn:
        assert ledger_sha256(conn) != everything


def test_empty_store_ledger_is_the_header(engine: Engine, tmp_path: Path) -> None:
    n, digest = write_ledger(engine, tmp_path / "empty.csv")
    assert n == 0 and digest == hashlib.sha256(LEDGER_HEADER.encode()).hexdigest()


def _scan_digest(engine: Engine, filters: VoteFilter | None) -> tuple[str, str, bool]:
    """The ledger digest built from the board's scan, the ledger statement's, and whether the scan's
    columns were formatted (not read again)."""
    with engine.connect() as conn:
        ledger = LedgerDigest(conn)
        load_battles(conn, filters=filters, who=True, each_chunk=ledger.update)
        formatted = ledger._usable
        return ledger.hexdigest(filters), ledger_sha256(conn, filters), formatted


FILTERS = (
    None,
    VoteFilter(exclude_flagged=True),
    VoteFilter(annotators=("all",)),  # the judges' votes and their label cells too
    VoteFilter(language="German"),
    VoteFilter(exclude_flagged=True, flagged_weight=0.5),  # the board's weights differ from the ledger's
)


@pytest.mark.parametrize("filters", FILTERS)
def test_ledger_digest_from_the_scan_is_the_ledger_statements(
    engine: Engine, tmp_path: Path, filters: VoteFilter | None
) -> None:
    rows = _rows(400)
    # fractions SQLite rounds to the next second before strftime('%s'), and ones it does not
    for k, fraction in enumerate((0.9996, 0.9994, 0.999999, 0.5, 0.0)):
        rows[k]["tstamp"] = 1.7e9 + 10 * k + fraction
    rows[10]["weight"] = 1 / 3
    rows[11]["weight"] = 2.0
    import_file(engine, write_jsonl(tmp_path / "battles.jsonl", rows))
    scanned, statement, formatted = _scan_digest(engine, filters)
    assert scanned == statement
    assert formatted == (engine.dialect.name == "sqlite")  # PostgreSQL reads the ledger statement


@pytest.mark.parametrize(
    "stored",
    [
        "2023-11-14T22:13:20.250000",  # another form SQLite reads: its own text goes into the cell
        "2023-11-14 22:13:20",  # no fraction
        "2023-11-14 22:13:20.999500",  # exactly where SQLite's millisecond rounding may go either way
        "1969-12-31 23:59:59.250000",  # before 1970
    ],
)
def test_ledger_digest_reads_the_statement_for_times_it_does_not_format(
    engine: Engine, tmp_path: Path, stored: str
) -> None:
    scanned, statement, formatted = _digest_with_stored_time(engine, tmp_path, stored, "MAX")
    assert scanned == statement
    assert not formatted


def _digest_with_stored_time(
    engine: Engine, tmp_path: Path, stored: str, which: str
) -> tuple[str, str, bool]:
    """The scan's and the statement's digests after one vote's time (the ``which`` id) is stored as
    ``stored``, and whether the scan formatted the times itself (SQLite only: its time text)."""
    if engine.dialect.name != "sqlite":
        pytest.skip("stored time text is SQLite's")
    import_file(engine, write_jsonl(tmp_path / "battles.jsonl", _rows(50)))
    with engine.begin() as conn:
        conn.execute(
            text(f"UPDATE vote SET created_at = :t WHERE id = (SELECT {which}(id) FROM vote)"), {"t": stored}
        )
    return _scan_digest(engine, None)


@pytest.mark.parametrize("stored", ["1970-01-01 00:00:07.125000", "1970-01-02 03:46:40.000001"])
def test_ledger_digest_writes_seconds_of_every_width(engine: Engine, tmp_path: Path, stored: str) -> None:
    """A chunk's seconds are as wide as its largest: the smaller ones have no leading zeros."""
    scanned, statement, formatted = _digest_with_stored_time(engine, tmp_path, stored, "MIN")
    assert scanned == statement
    assert formatted


def test_ledger_digest_reads_the_statement_for_a_name_with_a_nul(engine: Engine, tmp_path: Path) -> None:
    """The lines are cut out of NUL-padded cells: a name holding a NUL byte is left to the statement."""
    if engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL text holds no NUL byte")
    import_file(engine, write_jsonl(tmp_path / "battles.jsonl", _rows(50)))
    with engine.begin() as conn:
        conn.execute(text("UPDATE model SET name = 'nul' || char(0) || 'model' WHERE name = 'plain-model'"))
    scanned, statement, formatted = _scan_digest(engine, None)
    assert scanned == statement
    assert not formatted


def test_weekly_shares_of_the_scan_are_the_stored_shares(engine: Engine, tmp_path: Path) -> None:
    rows = _rows(300)
    for k, row in enumerate(rows):
        row["tstamp"] = 1.7e9 + k * 7_919.5  # some three weeks and a half
    import_file(engine, write_jsonl(tmp_path / "battles.jsonl", rows))
    with engine.connect() as conn:
        who = load_battles(conn, filters=VoteFilter(), who=True)
    shares = battle_shares_of(who)
    assert len(shares) >= 4
    assert shares == weekly_battle_shares(engine, VoteFilter())
