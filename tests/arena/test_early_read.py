"""A board's read begun in a thread as the command starts (arena.publish.early_read): the counts and the
scan's texts fetched ahead are those a read in the main thread gives, in one snapshot of the store that the
main thread goes on reading in; the read changes nothing, and gives up (the command then reads as
before) where it cannot be a plain read of an up-to-date store."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert
from sqlalchemy.engine import Engine

from arena.publish.early_read import EarlyRead
from leaderboard.battles import Battles
from leaderboard.data import PairCounts
from tests.factories import assert_same_battles, write_jsonl
from votes.db import make_engine
from votes.imports.files import import_file
from votes.migrate import upgrade_database
from votes.models import utcnow
from votes.reads import scans
from votes.reads.cells import load_pair_counts
from votes.reads.filters import VoteFilter
from votes.reads.ledger import LedgerDigest, ledger_sha256
from votes.reads.scans import load_battles
from votes.tables import import_run_t

FILTER = VoteFilter(exclude_flagged=True)


def _rows(n: int, *, offset: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "model_a": ("alpha", "beta", "gamma")[k % 3],
            "model_b": ("delta", "epsilon")[k % 2],
            "winner": ("model_a", "model_b", "tie", "tie (bothbad)")[k % 4],
            "judge": ("j-one", "j-two")[k % 2],
            "tstamp": 1.7e9 + 3 * (k + offset),
        }
        for k in range(n)
    ]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    """A migrated SQLite store in a file holding 60 imported votes, and its URL."""
    url = f"sqlite:///{tmp_path}/arena.db"
    upgrade_database(url)
    engine = make_engine(url)
    import_file(engine, write_jsonl(tmp_path / "battles.jsonl", _rows(60)))
    try:
        yield url, engine
    finally:
        engine.dispose()


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 7 votes, so a scan has several."""
    monkeypatch.setattr(scans, "SCAN_CHUNK", 7)


def _same_counts(a: PairCounts, b: PairCounts) -> None:
    assert a.models == b.models and a.same_as(b)


def _scan(conn: Any, fetched: Any = None) -> tuple[Battles, str]:
    ledger = LedgerDigest(conn)
    battles = load_battles(conn, filters=FILTER, who=True, each_chunk=ledger.update, fetched=fetched)
    return battles, ledger.hexdigest(FILTER)


@pytest.mark.parametrize("budget", [1, 10**9])
def test_the_early_read_is_the_main_threads_read(
    store: tuple[str, Engine], small_chunks: None, budget: int
) -> None:
    """Fetched within a budget of one chunk or of all: the same counts, battles and ledger digest."""
    url, engine = store
    with engine.connect() as conn:
        counts = load_pair_counts(conn, filters=FILTER)
        battles, digest = _scan(conn)
        assert digest == ledger_sha256(conn, FILTER)
    with EarlyRead(url, FILTER, budget=budget) as early:
        early_counts = early.counts()
        assert early_counts is not None
        _same_counts(early_counts, counts)
        early._thread.join(timeout=30)  # every chunk the budget allows is fetched before it is taken
        taken = early.take()
        assert taken is not None
        conn, fetched = taken
        assert fetched is not None
        held = len(fetched._fetched)
        assert held == 1 if budget == 1 else held == 9  # 60 votes, 7 a chunk
        early_battles, early_digest = _scan(conn, fetched)
        assert fetched.used
        with pytest.raises(RuntimeError):
            early.take()
    assert_same_battles(early_battles, battles)
    assert early_digest == digest


def _delete_votes(engine: Engine, n: int) -> None:
    """The first ``n`` votes deleted (a plain statement, committed)."""
    assert engine.url.database is not None
    with closing(sqlite3.connect(engine.url.database, isolation_level=None)) as raw:
        raw.execute("DELETE FROM vote WHERE id IN (SELECT id FROM vote ORDER BY id LIMIT ?)", (n,))


def test_what_changes_after_the_read_began_is_not_in_it(store: tuple[str, Engine]) -> None:
    """Votes deleted once the counts are read are still in the scan fetched ahead and in anything read
    afterwards on the connection taken over: one snapshot, as in one thread."""
    url, engine = store
    with EarlyRead(url, FILTER, budget=1) as early:
        counts = early.counts()
        assert counts is not None
        _delete_votes(engine, 30)
        taken = early.take()
        assert taken is not None
        conn, fetched = taken
        battles, _ = _scan(conn, fetched)
        assert len(battles.model_a) == 60
        _same_counts(load_pair_counts(conn, filters=FILTER), counts)
    with engine.connect() as fresh:
        assert int(load_pair_counts(fresh, filters=FILTER).count.sum()) == 30


def test_texts_of_another_scan_are_not_used(store: tuple[str, Engine], small_chunks: None) -> None:
    """``load_battles`` reads texts fetched ahead only for its own filter (here: another one)."""
    url, engine = store
    other = VoteFilter(exclude_flagged=True, annotators=("j-one",))
    with engine.connect() as conn:
        expected = load_battles(conn, filters=other, who=True)
    with EarlyRead(url, FILTER) as early:
        taken = early.take()
        assert taken is not None
        conn, fetched = taken
        assert_same_battles(load_battles(conn, filters=other, who=True, fetched=fetched), expected)
        assert fetched is not None and not fetched.used


def test_no_store_file_no_read_and_nothing_created(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    with EarlyRead(f"sqlite:///{missing}", FILTER) as early:
        assert early.counts() is None
        assert early.take() is None
    assert not missing.exists()


def test_a_store_behind_the_newest_revision_is_not_read(tmp_path: Path) -> None:
    """The command migrates such a store after its options were checked; the early read leaves it."""
    url = f"sqlite:///{tmp_path}/old.db"
    upgrade_database(url, revision="0001")
    with EarlyRead(url, FILTER) as early:
        assert early.counts() is None and early.take() is None


def test_a_dead_import_run_gives_the_read_up(store: tuple[str, Engine]) -> None:
    """The command rolls a dead run back before its board is read: the early read cannot be that read."""
    url, engine = store
    old = utcnow() - timedelta(hours=1)
    with engine.begin() as conn:
        conn.execute(
            insert(import_run_t).values(path="x.jsonl", state="staging", started_at=old, heartbeat_at=old)
        )
    with EarlyRead(url, FILTER) as early:
        assert early.counts() is None and early.take() is None


def test_closing_ends_the_thread_and_the_transaction(store: tuple[str, Engine], small_chunks: None) -> None:
    """A read never taken over (the command failed first) is stopped and ends its transaction: a writer
    can then checkpoint the whole log (a reader's snapshot would hold its frames back)."""
    url, engine = store
    early = EarlyRead(url, FILTER)
    assert early.counts() is not None
    early.close()
    early.close()  # again: nothing
    assert not any(t.name == "arena-early-read" for t in threading.enumerate())
    assert engine.url.database is not None
    with closing(sqlite3.connect(engine.url.database, isolation_level=None)) as raw:
        busy, _, _ = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0


def test_the_counts_are_read_early_on_either_database(engine: Engine, db_url: str, tmp_path: Path) -> None:
    """On PostgreSQL too the counts come from the thread and the transaction is handed over (no texts:
    its scan is read row by row)."""
    upgrade_database(db_url)
    import_file(engine, write_jsonl(tmp_path / "battles.jsonl", _rows(40)))
    with engine.connect() as conn:
        counts = load_pair_counts(conn, filters=FILTER)
    with EarlyRead(db_url, FILTER) as early:
        early_counts = early.counts()
        assert early_counts is not None
        _same_counts(early_counts, counts)
        taken = early.take()
        assert taken is not None
        conn, fetched = taken
        assert (fetched is not None) == (engine.dialect.name == "sqlite")
        assert len(load_battles(conn, filters=FILTER, who=True, fetched=fetched).model_a) == 40


def test_a_writer_holding_the_lock_does_not_stop_the_read(store: tuple[str, Engine]) -> None:
    """The read takes no write lock, not even to look at the schema's revision: a writer in the middle
    of a transaction (a live vote, an import's step) does not hold it up."""
    url, engine = store
    assert engine.url.database is not None
    with closing(sqlite3.connect(engine.url.database, isolation_level=None)) as writer:
        writer.execute("BEGIN IMMEDIATE")
        try:
            with EarlyRead(url, FILTER) as early:
                assert early._counted.wait(10)  # well inside the store's 30 s busy timeout
                assert early.counts() is not None
        finally:
            writer.execute("ROLLBACK")
