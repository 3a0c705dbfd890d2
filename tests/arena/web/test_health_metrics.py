"""`/healthz`, `/readyz` and `/metrics` in one process: what they answer, what moves the counters, and the
settings that turn metrics off or put them behind the admin token."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import Engine

from tests.arena.conftest import AppFactory
from tests.factories import ADMIN_TOKEN
from votes.migrate import upgrade_database


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text (0 when the series has no sample yet)."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


def _metrics(client: TestClient) -> str:
    reply = client.get("/metrics")
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/plain")
    return reply.text


def _battle(client: TestClient) -> dict[str, str]:
    reply = client.get("/api/battles/next")
    assert reply.status_code == 200, reply.text
    battle: dict[str, str] = reply.json()
    return battle


def test_healthz_answers_and_sets_no_cookie(client: TestClient) -> None:
    reply = client.get("/healthz")
    assert reply.status_code == 200 and reply.json() == {"status": "ok"}
    assert "set-cookie" not in reply.headers


def test_readyz_names_an_unmigrated_schema_then_turns_ready(
    client: TestClient, seeded: Engine, db_url: str
) -> None:
    reply = client.get("/readyz")  # tables made by create_all: no migration recorded
    assert reply.status_code == 503
    assert reply.json()["checks"]["database"] == "ok"
    assert reply.json()["checks"]["schema"].startswith("at nothing")
    upgrade_database(db_url)
    reply = client.get("/readyz")
    assert reply.status_code == 200, reply.text
    assert reply.json() == {
        "status": "ready",
        "checks": {"database": "ok", "schema": "ok", "vote_writer": "ok"},
    }


def test_readyz_names_a_stopped_vote_writer(client: TestClient, db_url: str) -> None:
    upgrade_database(db_url)
    state = client.app.state.arena  # type: ignore[attr-defined]
    state.writer.stop()
    try:
        reply = client.get("/readyz")
        assert reply.status_code == 503
        assert reply.json()["checks"]["vote_writer"] == "not running"
    finally:
        state.writer.start()


def test_votes_and_refusals_move_their_counters(client: TestClient) -> None:
    before = _metrics(client)
    battle = _battle(client)
    ok = client.post(
        "/api/votes",
        json={"token": battle["token"], "winner": "model_a"},
        headers={"X-CSRF-Token": battle["csrf_token"]},
    )
    assert ok.status_code == 200, ok.text
    replayed = client.post(  # the same answer again: a retry, not a new vote
        "/api/votes",
        json={"token": battle["token"], "winner": "model_a"},
        headers={"X-CSRF-Token": battle["csrf_token"]},
    )
    assert replayed.status_code == 200 and replayed.json()["replayed"] is True
    other = client.post(  # the same token with another winner: refused
        "/api/votes",
        json={"token": battle["token"], "winner": "tie"},
        headers={"X-CSRF-Token": battle["csrf_token"]},
    )
    assert other.status_code == 409, other.text
    fresh = _battle(client)
    no_csrf = client.post("/api/votes", json={"token": fresh["token"], "winner": "tie"})
    assert no_csrf.status_code == 403
    forged = client.post(
        "/api/votes",
        json={"token": fresh["token"][:-4] + "AAAA", "winner": "tie"},
        headers={"X-CSRF-Token": fresh["csrf_token"]},
    )
    assert forged.status_code == 400, forged.text
    after = _metrics(client)

    def moved(name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert moved("arena_votes_accepted_total") == 1
    assert moved("arena_votes_refused_total", reason="already_voted") == 1
    assert moved("arena_votes_refused_total", reason="csrf") == 1
    assert moved("arena_votes_refused_total", reason="token_forged") == 1
    assert moved("arena_votes_refused_total", reason="rate_limited") == 0
    assert moved("arena_battles_issued_total") == 2
    assert moved("arena_request_duration_seconds_count", route="/api/votes", method="POST") == 5
    assert moved("arena_vote_commit_wait_seconds_count") == 3  # the forged and CSRF ones never got there
    assert sample(after, "arena_votes_awaiting_commit") == 0
    assert moved("arena_vote_writer_votes_total") >= 1
    assert sample(after, "arena_flagged_annotators") == 0


def test_flagged_annotators_are_counted(client: TestClient) -> None:
    battle = _battle(client)
    client.post(
        "/api/votes",
        json={"token": battle["token"], "winner": "model_b"},
        headers={"X-CSRF-Token": battle["csrf_token"]},
    )
    annotator = client.get("/api/me").json()["annotator_id"]
    reply = client.post(
        f"/api/admin/annotators/{annotator}/flag", json={}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    assert reply.status_code == 200, reply.text
    assert sample(_metrics(client), "arena_flagged_annotators") == 1


def test_metrics_carry_no_annotator_identity(client: TestClient) -> None:
    battle = _battle(client)
    client.post(
        "/api/votes",
        json={"token": battle["token"], "winner": "tie"},
        headers={"X-CSRF-Token": battle["csrf_token"]},
    )
    text = _metrics(client)
    session = client.cookies.get("arena_session") or ""
    ours = [f for f in text_string_to_metric_families(text) if f.name.startswith("arena_")]
    assert len(ours) >= 8
    label_names = {k for f in ours for s in f.samples for k in s.labels}
    assert label_names <= {"reason", "route", "method", "result", "le"}, label_names
    assert battle["token"] not in text and battle["csrf_token"] not in text
    assert not session or session not in text


@pytest.mark.parametrize(
    ("mode", "token", "status"), [("off", None, 404), ("admin", None, 401), ("admin", ADMIN_TOKEN, 200)]
)
def test_metrics_setting(make_client: AppFactory, mode: str, token: str | None, status: int) -> None:
    client = make_client(metrics=mode)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    assert client.get("/metrics", headers=headers).status_code == status
    assert client.get("/healthz").status_code == 200
