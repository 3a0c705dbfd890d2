"""Operations for real: `/metrics` summed over `arena serve --workers 2`, and `/readyz` following a
PostgreSQL that goes away and comes back while `/healthz` stays up.

The database "stops" behind a TCP proxy of the test's own (connections cut, new ones refused): the
PostgreSQL server on this machine is shared, so the test never stops it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from arena.app import create_app
from tests.arena.web.test_health_metrics import sample
from tests.factories import make_settings
from tests.script_modules import load_script
from votes.migrate import upgrade_database

BENCH = load_script("_bench_common")  # free ports and the process table
PROBE_LIMIT_S = 2.0
POLL_S = 0.05


def _serve(
    tmp_path: Path, port: int, *, extra: tuple[str, ...] = ("--workers", "2"), json_logs: bool = False
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "ARENA_DATABASE_URL": f"sqlite:///{tmp_path}/arena.db",
        "ARENA_SECRET_KEY": "ops-serve-test-secret",
        "ARENA_RATE_LIMIT_PER_MINUTE": "100000",
        "ARENA_RATE_LIMIT_PER_ADDRESS_PER_MINUTE": "100000",
        "ARENA_SNAPSHOT_DIR": str(tmp_path / "snapshots"),
        # The server's own temporary folder: its metrics folder is then this test's alone, even when
        # other tests start servers in parallel.
        "TMPDIR": str(_server_tmp(tmp_path)),
    }
    if json_logs:
        env["ARENA_LOG_FORMAT"] = "json"
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    cmd = [sys.executable, "-m", "arena.cli.main", "serve", *extra, "--port", str(port)]
    cmd += ["--demo", "--demo-votes", "0", "--log-level", "warning"]
    with (tmp_path / "serve.log").open("wb") as out:
        return subprocess.Popen(
            cmd, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _wait_ready(server: subprocess.Popen[bytes], base: str, log: Path) -> None:
    deadline = time.monotonic() + 180
    while True:
        assert server.poll() is None, log.read_text()
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "server did not come up: " + log.read_text()
        time.sleep(0.2)


def _stop(server: subprocess.Popen[bytes], log: Path) -> None:
    os.killpg(server.pid, signal.SIGINT)
    try:
        server.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        pytest.fail("arena serve did not stop: " + log.read_text())


def _vote(client: httpx.Client, headers: dict[str, str] | None = None) -> httpx.Response:
    battle = client.get("/api/battles/next").json()
    reply = client.post(
        "/api/votes",
        json={"token": battle["token"], "winner": "model_a"},
        headers={"X-CSRF-Token": battle["csrf_token"], **(headers or {})},
    )
    assert reply.status_code == 200 and reply.json()["replayed"] is False, reply.text
    return reply


_SERVER_TMP: dict[Path, Path] = {}


def _server_tmp(tmp_path: Path) -> Path:
    """A short temporary folder of the test's own (the writer's Unix socket path must stay short)."""
    if tmp_path not in _SERVER_TMP:
        _SERVER_TMP[tmp_path] = Path(tempfile.mkdtemp(prefix="ops-"))
    return _SERVER_TMP[tmp_path]


def _metrics_folders(tmp_path: Path) -> set[str]:
    return {p.name for p in _server_tmp(tmp_path).glob("arena-metrics-*")}


def test_two_workers_count_every_vote_once(tmp_path: Path) -> None:
    folders_before = _metrics_folders(tmp_path)
    port = BENCH.free_port()
    server = _serve(tmp_path, port)
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    try:
        _wait_ready(server, base, log)
        cast = 0
        for i in range(8):  # a new connection each round: the kernel spreads them over both workers
            with httpx.Client(base_url=base, timeout=30) as client:
                for j in range(3):
                    battle = client.get("/api/battles/next").json()
                    reply = client.post(
                        "/api/votes",
                        json={"token": battle["token"], "winner": ("model_a", "tie", "model_b")[j]},
                        headers={"X-CSRF-Token": battle["csrf_token"]},
                    )
                    assert reply.status_code == 200 and reply.json()["replayed"] is False, reply.text
                    cast += 1
                if i == 0:
                    replay = client.post(  # the last token again, with another winner
                        "/api/votes",
                        json={"token": battle["token"], "winner": "model_a"},
                        headers={"X-CSRF-Token": battle["csrf_token"]},
                    )
                    assert replay.status_code == 409, replay.text
                    fresh = client.get("/api/battles/next").json()
                    no_csrf = client.post("/api/votes", json={"token": fresh["token"], "winner": "tie"})
                    assert no_csrf.status_code == 403, no_csrf.text
        texts = {httpx.get(f"{base}/metrics", timeout=10).text for _ in range(6)}  # whichever worker answers
        assert len(_metrics_folders(tmp_path) - folders_before) == 1
    finally:
        _stop(server, log)
    for text in texts:
        assert sample(text, "arena_votes_accepted_total") == cast
        assert sample(text, "arena_votes_refused_total", reason="already_voted") == 1
        assert sample(text, "arena_votes_refused_total", reason="csrf") == 1
        # The shared writer process answered every vote and the refused second winner, in its own file.
        assert sample(text, "arena_vote_writer_votes_total") == cast + 1
        assert (
            sample(text, "arena_request_duration_seconds_count", route="/api/votes", method="POST")
            == cast + 2
        )
    assert _metrics_folders(tmp_path) - folders_before == set(), "the metrics folder was left behind"


def _json_lines(log: Path) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text().splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict):
                out.append(record)
    return out


def test_writer_process_logs_each_commit_under_the_request_id(tmp_path: Path) -> None:
    port = BENCH.free_port()
    server = _serve(tmp_path, port, json_logs=True)
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    try:
        _wait_ready(server, base, log)
        with httpx.Client(base_url=base, timeout=30) as client:
            given = _vote(client, {"X-Request-ID": "vote-from-the-test-42"})
            generated = _vote(client)
        # The writer logs right after the commit that answered: wait for both lines.
        deadline = time.monotonic() + 30
        while sum(r.get("message") == "vote committed" for r in _json_lines(log)) < 2:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        _stop(server, log)
    assert given.headers["x-request-id"] == "vote-from-the-test-42"
    generated_id = generated.headers["x-request-id"]
    commits = [r for r in _json_lines(log) if r.get("message") == "vote committed"]
    by_id = {r.get("request_id"): r for r in commits}
    # Logged by the writer process (its logger, not the worker's), with the vote it committed.
    assert by_id["vote-from-the-test-42"]["logger"] == "votes.voting.writer.service", commits
    assert by_id["vote-from-the-test-42"]["vote_id"] == given.json()["vote_id"]
    assert by_id[generated_id]["vote_id"] == generated.json()["vote_id"]
    assert len(commits) == 2, commits


def test_one_worker_with_a_writer_process_reports_the_writer_metrics(tmp_path: Path) -> None:
    folders_before = _metrics_folders(tmp_path)
    port = BENCH.free_port()
    server = _serve(tmp_path, port, extra=("--workers", "1", "--writer-process"))
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    try:
        _wait_ready(server, base, log)
        with httpx.Client(base_url=base, timeout=30) as client:
            for _ in range(3):
                _vote(client)
        text = httpx.get(f"{base}/metrics", timeout=10).text
        assert len(_metrics_folders(tmp_path) - folders_before) == 1
    finally:
        _stop(server, log)
    assert "vote writer process ready" in log.read_text()
    # The writer process's own samples (it commits the votes) and the single worker's, in one answer.
    assert sample(text, "arena_vote_writer_votes_total") == 3
    assert sample(text, "arena_vote_writer_commit_seconds_count") >= 1
    assert sample(text, "arena_votes_accepted_total") == 3
    assert _metrics_folders(tmp_path) - folders_before == set()


class _Proxy:
    """A TCP forwarder to ``target``, cut (connections closed, new ones refused) and restored at will."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = BENCH.free_port()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self.up()

    def up(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, []
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (close alone does not)
            listener.close()
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _seconds_until(client: TestClient, path: str, status: int) -> float:
    started = time.monotonic()
    while client.get(path).status_code != status:
        assert time.monotonic() - started < 10 * PROBE_LIMIT_S, f"{path} never answered {status}"
        time.sleep(POLL_S)
    return time.monotonic() - started


@pytest.fixture
def proxied_pg(pg_url: str) -> Iterator[tuple[_Proxy, str]]:
    upgrade_database(pg_url)
    url = make_url(pg_url)
    proxy = _Proxy((url.host or "127.0.0.1", url.port or 5432))
    try:
        yield proxy, url.set(port=proxy.port).render_as_string(hide_password=False)
    finally:
        proxy.down()


@pytest.mark.postgres
def test_readyz_follows_postgresql_down_and_back(proxied_pg: tuple[_Proxy, str]) -> None:
    proxy, url = proxied_pg
    with TestClient(create_app(make_settings(url))) as client:
        assert client.get("/readyz").status_code == 200
        proxy.down()
        went_down = _seconds_until(client, "/readyz", 503)
        reply = client.get("/readyz")
        assert reply.json()["checks"]["database"].startswith("unreachable"), reply.text
        assert client.get("/healthz").status_code == 200
        proxy.up()
        came_back = _seconds_until(client, "/readyz", 200)
        assert client.get("/healthz").status_code == 200
    assert went_down < PROBE_LIMIT_S, went_down
    assert came_back < PROBE_LIMIT_S, came_back
