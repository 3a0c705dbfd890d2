"""`arena backup` while votes arrive through the API, `arena restore` into a fresh database, the checks."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlmodel import Session
from typer.testing import CliRunner

from arena.cli.main import app as cli
from arena.settings import elo_config
from tests.arena.conftest import AppFactory
from tests.conftest import scratch_pg_database
from tests.factories import make_settings
from votes.db import is_sqlite, make_engine
from votes.migrate import upgrade_database
from votes.reads.backup import MANIFEST_NAME, read_manifest
from votes.voting.ratings import replay_live_ratings

RATING_TOL = 1e-9


class _Load:
    """Votes through the API on a thread of its own, each new session after a few votes; notes each
    acknowledged vote id with the monotonic time of its answer."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.acked: list[tuple[int, float]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            if i % 5 == 0:
                self.client.cookies.clear()  # a new annotator: the old one would run out of pairs
            battle = self.client.get("/api/battles/next").json()
            reply = self.client.post(
                "/api/votes",
                json={"token": battle["token"], "winner": ("model_a", "model_b", "tie")[i % 3]},
                headers={"X-CSRF-Token": battle["csrf_token"]},
            )
            if reply.status_code != 200:
                self.errors.append(reply.text)
                return
            self.acked.append((reply.json()["vote_id"], time.monotonic()))
            i += 1


def _live(url: str) -> dict[str, tuple[float, int]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT m.name, r.rating, r.games FROM liverating r JOIN model m ON m.id = r.model_id")
            ).all()
        return {name: (float(rating), int(games)) for name, rating, games in rows}
    finally:
        engine.dispose()


def _replayed(url: str) -> dict[str, tuple[float, int]]:
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            return replay_live_ratings(session=session, config=elo_config(make_settings(url)))
    finally:
        engine.dispose()


def _target_url(db_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if is_sqlite(db_url):
        return f"sqlite:///{tmp_path}/restored.db"
    manager = scratch_pg_database()
    url = manager.__enter__()
    request.addfinalizer(lambda: manager.__exit__(None, None, None))
    return url


def test_backup_under_load_restores_every_acknowledged_vote(
    make_client: AppFactory, db_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    upgrade_database(db_url)  # stamps the test schema, so the manifest names a revision
    load = _Load(make_client())
    load.thread.start()
    while len(load.acked) < 30 and not load.errors:
        time.sleep(0.01)
    started = time.monotonic()
    out = tmp_path / "backup"
    result = CliRunner().invoke(cli, ["backup", str(out), "--database-url", db_url])
    time.sleep(0.3)  # votes keep arriving after the backup: they must not matter
    load.stop.set()
    load.thread.join(30)
    assert not load.errors, load.errors
    assert result.exit_code == 0, result.output
    manifest = read_manifest(out)
    assert (out / MANIFEST_NAME).is_file()
    before = {vote_id for vote_id, at in load.acked if at < started}
    assert len(before) >= 30
    assert len(load.acked) > len(before), "no vote arrived while the backup ran or after it"

    verified = CliRunner().invoke(cli, ["backup", str(out), "--verify"])
    assert verified.exit_code == 0, verified.output

    target = _target_url(db_url, tmp_path, request)
    restored = CliRunner().invoke(cli, ["restore", str(out), "--database-url", target])
    assert restored.exit_code == 0, restored.output
    engine = make_engine(target)
    try:
        with engine.connect() as conn:
            ids = {row[0] for row in conn.execute(text("SELECT id FROM vote"))}
            if is_sqlite(target):
                assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"
    finally:
        engine.dispose()
    assert before <= ids, sorted(before - ids)
    assert len(ids) == manifest.row_counts["vote"]
    live, replayed = _live(target), _replayed(target)
    assert live.keys() == replayed.keys() and live
    for name, (rating, games) in live.items():
        assert games == replayed[name][1]
        assert rating == pytest.approx(replayed[name][0], abs=RATING_TOL)

    again = CliRunner().invoke(cli, ["restore", str(out), "--database-url", target])
    assert again.exit_code == 1 and "not empty" in again.output
    forced = CliRunner().invoke(cli, ["restore", str(out), "--database-url", target, "--force"])
    assert forced.exit_code == 0, forced.output


def test_verify_refuses_a_damaged_backup(make_client: AppFactory, db_url: str, tmp_path: Path) -> None:
    upgrade_database(db_url)
    make_client()
    out = tmp_path / "backup"
    assert CliRunner().invoke(cli, ["backup", str(out), "--database-url", db_url]).exit_code == 0
    data = out / read_manifest(out).file
    blob = bytearray(data.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    data.write_bytes(bytes(blob))
    result = CliRunner().invoke(cli, ["backup", str(out), "--verify"])
    assert result.exit_code == 1 and "sha256 differs" in result.output
