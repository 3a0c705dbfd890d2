"""The admin upload: a bad row answers 422 naming the file and line; the import runs in its own bounded
pool off the web worker, and uploads beyond that pool's queue are refused with 503 and Retry-After; a
full disk answers 507 with the CLI's one line, and the log gets that line, not a traceback."""

from __future__ import annotations

import errno
import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

import arena.web.routes.admin
import votes.imports.files
from tests.arena.conftest import AppFactory
from tests.factories import ADMIN_TOKEN
from votes.db import make_engine

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
GOOD = b'{"model_a": "a", "model_b": "b", "winner": "tie"}\n'


def test_admin_import_answers_422_naming_the_line(make_client: AppFactory) -> None:
    client = make_client()
    auth = AUTH
    good = GOOD
    bad = b'{"model_a": "a\\u202e", "model_b": "b", "winner": "tie"}\n'
    response = client.post("/api/admin/import", files={"file": ("up.jsonl", good + bad)}, headers=auth)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith("up.jsonl: line 2: ") and "U+202E" in detail, detail
    response = client.post("/api/admin/import", files={"file": ("up.jsonl", good)}, headers=auth)
    assert response.status_code == 200, response.text


def test_admin_import_runs_in_its_own_thread(
    make_client: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_client()
    seen: list[str] = []
    real = votes.imports.files.import_file

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(arena.web.routes.admin, "import_file", spy)
    response = client.post("/api/admin/import", files={"file": ("up.jsonl", GOOD)}, headers=AUTH)
    assert response.status_code == 200, response.text
    assert seen and seen[0].startswith("arena-import"), seen


def test_admin_imports_beyond_the_queue_are_503(
    make_client: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_client()
    slots = threading.BoundedSemaphore(1)
    slots.acquire()  # every slot taken by imports running elsewhere
    monkeypatch.setattr(arena.web.routes.admin, "_import_slots", slots)
    response = client.post("/api/admin/import", files={"file": ("up.jsonl", GOOD)}, headers=AUTH)
    assert response.status_code == 503 and response.headers["Retry-After"], response.text


def _cramped_import(url: str) -> Callable[..., object]:
    """`votes.imports.files.import_file` on its own engine of ``url`` whose SQLite file may grow by two pages
    only: a disk with two pages to spare, as in the CLI's full-disk test."""

    def cramped(_engine: Engine, path: Path, **kwargs: Any) -> object:
        engine = make_engine(url)

        @event.listens_for(engine, "connect")
        def _limit(dbapi_conn: Any, _record: object) -> None:
            cursor = dbapi_conn.cursor()
            pages = cursor.execute("PRAGMA page_count").fetchone()[0]
            cursor.execute(f"PRAGMA max_page_count = {pages + 2}")
            cursor.close()

        try:
            return votes.imports.files.import_file(engine, path, **kwargs)
        finally:
            engine.dispose()

    return cramped


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_full_disk_during_admin_import_is_507_with_one_line(
    make_client: AppFactory, db_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client()
    before = client.get("/api/leaderboard").json()
    monkeypatch.setattr(arena.web.routes.admin, "import_file", _cramped_import(db_url))
    secret = "row-value-that-must-not-be-logged"
    rows = []
    for i in range(3000):
        conversation = [
            {"role": "user", "content": f"{secret} {i}"},
            {"role": "assistant", "content": "x" * 300},
        ]
        row = {"question_id": f"big{i}", "model_a": "alpha", "model_b": "beta", "winner": "model_a"}
        rows.append(json.dumps({**row, "conversation_a": conversation, "conversation_b": conversation}))
    upload = ("\n".join(rows) + "\n").encode()
    with caplog.at_level(logging.DEBUG):
        response = client.post("/api/admin/import", files={"file": ("big.jsonl", upload)}, headers=AUTH)
    assert response.status_code == 507, response.text
    detail = response.json()["detail"]
    assert detail == (
        "the database could not write (database or disk is full); nothing was written. "
        "Free some space and try again."
    ), detail
    assert "Traceback" not in caplog.text and secret not in caplog.text and secret not in response.text
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        f"admin import of big.jsonl refused: {detail}"
    ]
    assert client.get("/api/leaderboard").json() == before  # all or nothing: no model or vote came in


def test_no_room_for_a_file_write_is_507(make_client: AppFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file write refused for room (ENOSPC), not a database one, answers 507 as well, on each backend."""
    client = make_client()

    def no_room(*_args: object, **_kwargs: object) -> object:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(arena.web.routes.admin, "import_file", no_room)
    response = client.post("/api/admin/import", files={"file": ("up.jsonl", GOOD)}, headers=AUTH)
    assert response.status_code == 507, response.text
    assert response.json()["detail"].startswith(os.strerror(errno.ENOSPC) + "; nothing was written.")


def test_other_import_failures_stay_500(make_client: AppFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a write that found no room is a 507: any other fault is still a server error."""
    client = make_client()

    def broken(*_args: object, **_kwargs: object) -> object:
        raise RuntimeError("a bug")

    monkeypatch.setattr(arena.web.routes.admin, "import_file", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        client.post("/api/admin/import", files={"file": ("up.jsonl", GOOD)}, headers=AUTH)
