"""`arena publish` when things go wrong: names that look like TeX, a comparison graph in parts, a full disk,
a crash half-way; and the leftovers of earlier crashes cleaned up (with a log line) at the next publish."""

from __future__ import annotations

import errno
import json
import logging
import os
import random
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

import arena.cli.commands.data
import arena.cli.store
import leaderboard.snapshot.files
from arena.cli.main import app
from arena.publish.staging import STAGING_PREFIX
from votes.db import is_sqlite, make_engine, storage_failure
from votes.reads.snapshots import list_snapshots

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[3]
TEX_NAMES = ("$\\badcmd$", "gpt$\\mathbf{5}$-spoof")
OLD = time.time() - 7 * 86400


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output  # stdout and stderr as the user sees them


def write_battles(path: Path, groups: list[list[str]], n: int = 240, seed: int = 3) -> Path:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            a, b = rng.sample(groups[i % len(groups)], 2)
            winner = rng.choice(["model_a", "model_b", "tie"])
            row = {"question_id": f"q{i}", "model_a": a, "model_b": b, "winner": winner, "tstamp": float(i)}
            fh.write(json.dumps(row) + "\n")
    return path


@pytest.fixture
def url(db_url: str) -> str:
    if not is_sqlite(db_url):
        code, out = run("db", "upgrade", "--database-url", db_url)
        assert code == 0, out
    return db_url


def imported(url: str, tmp_path: Path, groups: list[list[str]]) -> str:
    code, out = run("import", str(write_battles(tmp_path / "votes.jsonl", groups)), "--database-url", url)
    assert code == 0, out
    return url


def publish(url: str, folder: Path) -> tuple[int, str]:
    return run("publish", "--database-url", url, "--snapshot-dir", str(folder), "--bootstrap", "4")


def published_rows(url: str) -> list[str]:
    engine = make_engine(url)
    try:
        from sqlmodel import Session

        with Session(engine) as session:
            return [r.id for r in list_snapshots(session=session)]
    finally:
        engine.dispose()


def test_publish_draws_tex_like_model_names_literally(url: str, tmp_path: Path) -> None:
    imported(url, tmp_path, [["alpha", *TEX_NAMES]])
    code, out = publish(url, tmp_path / "snaps")
    assert code == 0, out
    (folder,) = (tmp_path / "snaps").iterdir()
    svg = (folder / "ratings.svg").read_text(encoding="utf-8")
    for name in TEX_NAMES:  # the name as text, not a bold 5 or an error
        assert name in svg, name
    assert "mathbf" in svg


def test_publish_on_a_graph_in_parts_is_one_line_and_exit_1(url: str, tmp_path: Path) -> None:
    imported(url, tmp_path, [["a1", "a2"], ["b1", "b2"]])
    code, out = publish(url, tmp_path / "snaps")
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    assert "(a1, a2)" in out and "(b1, b2)" in out and "--each-component" in out
    assert published_rows(url) == []
    assert not (tmp_path / "snaps").exists() or not any((tmp_path / "snaps").iterdir())


def test_full_disk_during_publish_is_one_line_and_leaves_nothing(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    imported(url, tmp_path, [["alpha", "beta", "gamma"]])

    def no_room(path: Path | str, blob: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(leaderboard.snapshot.files, "write_bytes_atomic", no_room)
    code, out = publish(url, tmp_path / "snaps")
    assert code == 1, out
    assert "No space left on device" in out and "Traceback" not in out
    assert [line for line in out.splitlines() if "error" in line] == [out.splitlines()[-1]], out
    assert not any((tmp_path / "snaps").iterdir())  # the staging folder went with the failure
    assert published_rows(url) == []


def test_full_sqlite_database_during_import_is_one_line_without_row_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'small.db'}"
    imported(url, tmp_path, [["alpha", "beta"]])
    opened = arena.cli.store.open_store

    def cramped(settings: object, *, create: bool = False) -> Engine:
        engine = opened(settings, create=create)  # type: ignore[arg-type]

        @event.listens_for(engine, "connect")
        def _limit(dbapi_conn: object, _record: object) -> None:
            cursor = dbapi_conn.cursor()  # type: ignore[attr-defined]
            pages = cursor.execute("PRAGMA page_count").fetchone()[0]
            cursor.execute(f"PRAGMA max_page_count = {pages + 2}")  # a disk with two pages to spare
            cursor.close()

        return engine

    monkeypatch.setattr(arena.cli.commands.data, "open_store", cramped)
    secret = "row-value-that-must-not-be-logged"
    big = tmp_path / "big.jsonl"
    with big.open("w", encoding="utf-8") as fh:
        for i in range(3000):
            conversation = [
                {"role": "user", "content": f"{secret} {i}"},
                {"role": "assistant", "content": "x" * 300},
            ]
            row = {
                "question_id": f"big{i}",
                "model_a": "alpha",
                "model_b": "beta",
                "winner": "model_a",
                "conversation_a": conversation,
                "conversation_b": conversation,
            }
            fh.write(json.dumps(row) + "\n")
    with caplog.at_level(logging.DEBUG):
        code, out = run("import", str(big), "--database-url", url)
    assert code == 1, out
    assert "database or disk is full" in out and "Traceback" not in out, out
    assert len(out.strip().splitlines()) == 1, out
    assert secret not in out and secret not in caplog.text


def test_storage_failure_reads_only_the_driver_message() -> None:
    from sqlalchemy.exc import OperationalError

    exc = OperationalError(
        "INSERT INTO vote VALUES (?)", ("secret-value",), Exception("database or disk is full")
    )
    assert storage_failure(exc) == "the database could not write (database or disk is full)"
    assert storage_failure(ValueError("no votes")) is None
    assert storage_failure(OSError(errno.EFBIG, "File too large")) == os.strerror(errno.EFBIG)


def test_publish_cleans_up_leftovers_of_earlier_crashes(
    url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    imported(url, tmp_path, [["alpha", "beta", "gamma"]])
    snaps = tmp_path / "snaps"
    code, out = publish(url, snaps)
    assert code == 0, out
    (kept,) = list(snaps.iterdir())
    stale = snaps / f"{STAGING_PREFIX}0123abcd"
    running = snaps / f"{STAGING_PREFIX}4567ef01"  # young: maybe a publish running now
    orphan = snaps / "20250101T000000Z-all-0123456789"  # an id with no row
    other = snaps / "notes"
    for folder in (stale, running, orphan, other):
        folder.mkdir()
        (folder / "leaderboard.csv").write_text("model\n", encoding="utf-8")
    (orphan / "leaderboard.csv").chmod(0o444)
    orphan.chmod(0o555)
    for folder in (stale, orphan, other):
        os.utime(folder, (OLD, OLD))
    with caplog.at_level(logging.WARNING, logger="arena.publish.staging"):
        code, out = run("publish", "--database-url", url, "--snapshot-dir", str(snaps), "--bootstrap", "5")
    assert code == 0, out
    left = {p.name for p in snaps.iterdir()}
    assert stale.name not in left and orphan.name not in left
    assert {kept.name, running.name, other.name} <= left
    assert len(left) == 4  # plus the new snapshot
    assert f"removed {stale}" in caplog.text and f"removed {orphan}" in caplog.text


CRASH_AFTER_RENAME = """
import os, sys
from pathlib import Path
from arena.cli.main import app
real = Path.rename
def rename_then_die(self, target):
    result = real(self, target)
    os._exit(9)  # the process dies between the rename and the row
Path.rename = rename_then_die
app(sys.argv[1:])
"""


def test_crash_after_the_rename_leaves_a_frozen_folder_that_the_next_publish_removes(
    url: str, tmp_path: Path
) -> None:
    imported(url, tmp_path, [["alpha", "beta", "gamma"]])
    snaps = tmp_path / "snaps"
    args = ["publish", "--database-url", url, "--snapshot-dir", str(snaps), "--bootstrap", "4"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", CRASH_AFTER_RENAME, *args],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 9, done.stderr
    (crashed,) = list(snaps.iterdir())
    assert not crashed.name.startswith(STAGING_PREFIX)
    assert published_rows(url) == []
    assert not crashed.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    for f in crashed.iterdir():
        assert not f.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), f
    os.utime(crashed, (OLD, OLD))
    code, out = publish(url, snaps)
    assert code == 0, out
    assert crashed.name not in {p.name for p in snaps.iterdir()}
    assert len(published_rows(url)) == 1
