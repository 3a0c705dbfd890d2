"""`arena serve --workers 2` for real: two uvicorn workers and the vote writer process they share.

Votes through both workers land in the database; when the writer process is killed, votes go on (the
workers write them) and `arena serve` starts a new writer, which the workers use again; Ctrl-C (SIGINT to
the whole process group, as a terminal sends it) stops the workers first and then the writer, which answers
and commits what it holds; nothing is left running and the writer's socket folder is removed.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from tests.script_modules import load_script
from votes.db import make_engine

ROOT = Path(__file__).resolve().parents[4]


BENCH = load_script("_bench_common")  # the scripts' /proc process table and free port


def _group(pgid: int) -> list[str]:
    """Command lines of the live processes in a process group."""
    return [p.cmd for p in BENCH.processes_in_group(pgid).values()]


def _listening(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except OSError:
            return False
        return True


def _writers(pgid: int) -> list[int]:
    return [pid for pid, p in BENCH.processes_in_group(pgid).items() if BENCH.is_vote_writer(p.cmd)]


def test_two_workers_write_through_one_writer_process_and_stop_cleanly(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/arena.db"
    port = BENCH.free_port()
    env = {
        **os.environ,
        "ARENA_DATABASE_URL": url,
        "ARENA_SECRET_KEY": "serve-workers-test-secret",
        "ARENA_RATE_LIMIT_PER_MINUTE": "100000",
        "ARENA_RATE_LIMIT_PER_ADDRESS_PER_MINUTE": "100000",
        "ARENA_SNAPSHOT_DIR": str(tmp_path / "snapshots"),
    }
    cmd = [sys.executable, "-m", "arena.cli.main", "serve", "--workers", "2", "--port", str(port)]
    cmd += ["--demo", "--demo-votes", "0", "--log-level", "info"]  # info: a worker logs its reconnection
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            cmd, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, log.read_text()
            try:
                if httpx.get(f"{base}/api/leaderboard", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "server did not come up: " + log.read_text()
            time.sleep(0.2)
        writers = _writers(server.pid)
        assert len(writers) == 1, _group(server.pid)

        def vote_round(rounds: int) -> int:
            done = 0
            for i in range(rounds):  # new connections: the kernel spreads them over both workers
                with httpx.Client(base_url=base, timeout=30) as client:
                    for _ in range(4):
                        battle = client.get("/api/battles/next").json()
                        reply = client.post(
                            "/api/votes",
                            json={"token": battle["token"], "winner": ("model_a", "tie")[i % 2]},
                            headers={"X-CSRF-Token": battle["csrf_token"]},
                        )
                        assert reply.status_code == 200, reply.text
                        assert reply.json()["replayed"] is False
                        done += 1
            return done

        acknowledged = vote_round(6)
        os.kill(writers[0], signal.SIGKILL)
        acknowledged += vote_round(2)  # meanwhile the workers write their own votes
        ready = re.search(r"vote writer process ready on (\S+)", log.read_text())
        assert ready is not None, log.read_text()
        deadline = time.monotonic() + 60
        while not (_writers(server.pid) not in ([], writers) and _listening(ready.group(1))):
            assert time.monotonic() < deadline, "the vote writer was not started again: " + log.read_text()
            time.sleep(0.2)
        # A worker tries the socket again on a vote, at most once a second: vote until one has said that
        # its votes go to the new writer process.
        deadline = time.monotonic() + 60
        while "votes go to the vote writer" not in log.read_text().split("starting it again", 1)[1]:
            assert time.monotonic() < deadline, "no worker reached the new writer: " + log.read_text()
            acknowledged += vote_round(1)
            time.sleep(0.2)
        acknowledged += vote_round(4)
    finally:
        os.killpg(server.pid, signal.SIGINT)  # Ctrl-C in a terminal goes to the whole group
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            pytest.fail("arena serve did not stop on SIGINT: " + log.read_text())
    deadline = time.monotonic() + 30
    while _group(server.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _group(server.pid) == [], "left running after the stop"
    output = log.read_text()
    folder = re.search(r"vote writer process ready on (\S+)", output)
    assert folder is not None, output
    assert not Path(folder.group(1)).parent.exists()
    assert "the vote writer exited with status -9; starting it again" in output, output
    # The second writer wrote votes again (those that went to the workers' own writers are not its).
    written = [int(n) for n in re.findall(r"vote writer: (\d+) votes in \d+ transactions", output)]
    assert len(written) == 1 and 0 < written[0] <= acknowledged, output
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM vote")).scalar_one() == acknowledged
    finally:
        engine.dispose()
