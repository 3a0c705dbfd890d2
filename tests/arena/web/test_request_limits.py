"""Request limits: bodies per route (413, declared or counted), headers (431), 422s that echo nothing."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi.testclient import TestClient

from tests.arena.conftest import AppFactory
from tests.factories import ADMIN_TOKEN

KIB = 1024


def test_a_declared_oversized_body_is_413_before_it_is_read(client: TestClient) -> None:
    body = b'{"token": "' + b"x" * (200 * KIB) + b'", "winner": "model_a"}'
    response = client.post("/api/votes", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert "at most 65,536 bytes" in response.json()["detail"]


def test_a_chunked_oversized_body_is_counted_and_413(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"token": "'
        for _ in range(100):
            yield b"x" * KIB
        yield b'", "winner": "model_a"}'

    response = client.post("/api/votes", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413


def test_validation_errors_do_not_echo_the_input(client: TestClient) -> None:
    marker = "echo-me-" + "y" * 30 * KIB
    battle = client.get("/api/battles/next").json()
    response = client.post(
        "/api/votes",
        json={"token": marker, "winner": 12345},
        headers={"X-CSRF-Token": str(battle["csrf_token"])},
    )
    assert response.status_code == 422
    assert "echo-me" not in response.text and len(response.content) < 2 * KIB
    assert all(set(e) == {"loc", "msg", "type"} for e in response.json()["detail"])


def test_too_many_or_too_large_headers_are_431(make_client: AppFactory) -> None:
    client = make_client(max_header_bytes=4 * KIB, max_headers=20)
    assert client.get("/", headers={"X-Big": "z" * (8 * KIB)}).status_code == 431
    many = {f"X-H{i}": "1" for i in range(30)}
    assert client.get("/", headers=many).status_code == 431
    assert client.get("/").status_code == 200


def test_the_admin_import_has_its_own_larger_limit(make_client: AppFactory) -> None:
    client = make_client(max_body_bytes=4 * KIB)
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    line = b'{"model_a": "a", "model_b": "b", "winner": "tie"}\n'
    body = line * 200  # about 10 kB: over the default limit, well under the upload limit
    response = client.post("/api/admin/import", files={"file": ("b.jsonl", body)}, headers=auth)
    assert response.status_code == 200, response.text
    assert client.post("/api/votes", content=b"{" + b" " * (5 * KIB) + b"}").status_code == 413
