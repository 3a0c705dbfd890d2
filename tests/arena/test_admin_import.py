"""The admin upload: a bad row answers 422 naming the file and line; the import runs in its own bounded
pool off the web worker, and uploads beyond that pool's queue are refused with 503 and Retry-After."""

from __future__ import annotations

import threading

import pytest

import arena.routes.admin
import votes.io
from tests.arena.conftest import AppFactory
from tests.factories import ADMIN_TOKEN

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
    real = votes.io.import_file

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(arena.routes.admin, "import_file", spy)
    response = client.post("/api/admin/import", files={"file": ("up.jsonl", GOOD)}, headers=AUTH)
    assert response.status_code == 200, response.text
    assert seen and seen[0].startswith("arena-import"), seen


def test_admin_imports_beyond_the_queue_are_503(
    make_client: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_client()
    slots = threading.BoundedSemaphore(1)
    slots.acquire()  # every slot taken by imports running elsewhere
    monkeypatch.setattr(arena.routes.admin, "_import_slots", slots)
    response = client.post("/api/admin/import", files={"file": ("up.jsonl", GOOD)}, headers=AUTH)
    assert response.status_code == 503 and response.headers["Retry-After"], response.text
