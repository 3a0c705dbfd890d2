"""While the database cannot be reached: 503 with Retry-After, one log line per outage, then recovery."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from arena.app import OUTAGE_GAP_SECONDS, DatabaseOutageLog
from tests.arena.conftest import AppFactory


def test_requests_during_an_outage_are_503_with_retry_after_and_one_log_line(
    make_client: AppFactory, seeded: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client()
    assert client.get("/api/leaderboard").status_code == 200
    dbapi_error = seeded.dialect.loaded_dbapi.OperationalError

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise dbapi_error("connection refused (the database is down)")

    event.listen(seeded, "do_connect", refuse)
    seeded.dispose()  # pooled connections would otherwise hide the outage
    try:
        with caplog.at_level(logging.WARNING):
            answers = [client.get("/api/leaderboard") for _ in range(5)]
    finally:
        event.remove(seeded, "do_connect", refuse)
    assert [a.status_code for a in answers] == [503] * 5
    assert all(a.headers["Retry-After"] == "5" for a in answers)
    assert "database is unavailable" in answers[0].json()["detail"]
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert "database unavailable (OperationalError)" in lines[0].getMessage()
    assert lines[0].exc_info is None  # a line, not a traceback
    assert client.get("/api/leaderboard").status_code == 200  # back by itself


def test_an_outage_ends_after_a_quiet_gap(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    outage = DatabaseOutageLog(clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="arena.app"):
        for step in (0.0, 1.0, 10.0, 10.0 + OUTAGE_GAP_SECONDS + 1, 10.0 + OUTAGE_GAP_SECONDS + 2):
            now[0] = step
            outage.failed(RuntimeError("down"))
    assert len(caplog.records) == 2
