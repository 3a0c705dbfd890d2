"""Operations for real: `/metrics` summed over `arena serve --workers 2`, and `/readyz` following a
PostgreSQL that goes away and comes back while `/healthz` stays up.

The database "stops" behind a TCP proxy of the test's own (connections cut, new ones refused): the
PostgreSQL server on this machine is shared, so the test never stops it.
"""

from __future__ import annotations

import contextlib
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

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from arena.app import create_app
from tests.arena.test_health_metrics import sample
from tests.factories import make_settings
from tests.script_modules import load_script
from votes.migrate import upgrade_database

BENCH = load_script("_bench_common")  # free ports and the process table
PROBE_LIMIT_S = 2.0
POLL_S = 0.05


def _serve(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "ARENA_DATABASE_URL": f"sqlite:///{tmp_path}/arena.db",
        "ARENA_SECRET_KEY": "ops-serve-test-secret",
        "ARENA_RATE_LIMIT_PER_MINUTE": "100000",
        "ARENA_RATE_LIMIT_PER_ADDRESS_PER_MINUTE": "100000",
        "ARENA_SNAPSHOT_DIR": str(tmp_path / "snapshots"),
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    cmd = [sys.executable, "-m", "arena.cli", "serve", "--workers", "2", "--port", str(port)]
    cmd += ["--demo", "--demo-votes", "0", "--log-level", "warning"]
    with (tmp_path / "serve.log").open("wb") as out:
        return subprocess.Popen(
            cmd, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _metrics_folders() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("arena-metrics-*")}


def test_two_workers_count_every_vote_once(tmp_path: Path) -> None:
    folders_before = _metrics_folders()
    port = BENCH.free_port()
    server = _serve(tmp_path, port)
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, log.read_text()
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "server did not come up: " + log.read_text()
            time.sleep(0.2)
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
        assert len(_metrics_folders() - folders_before) == 1
    finally:
        os.killpg(server.pid, signal.SIGINT)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            pytest.fail("arena serve did not stop: " + log.read_text())
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
    assert _metrics_folders() - folders_before == set(), "the metrics folder was left behind"


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
