"""The HTML vote flow without a browser: battle page, form post, reveal, and each refusal, on both backends.

The pages go through the same voting service as the JSON API; these tests read the template and its
context (the rendered HTML is the browser tests' job).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from tests.arena.conftest import AppFactory
from votes.models import Vote

FRAGMENT = {"X-Arena-Fragment": "1"}


def n_votes(engine: Engine) -> int:
    with Session(engine) as s:
        return int(s.exec(select(func.count()).select_from(Vote)).one())


def battle_form(client: TestClient) -> dict[str, str]:
    """Load /vote and return the form's hidden fields."""
    page: Any = client.get("/vote")
    assert page.status_code == 200 and page.template.name == "pages/vote.html"
    return {"token": page.context["battle"].token, "csrf_token": page.context["csrf_token"]}


def test_form_vote_redirects_to_the_reveal(client: TestClient, seeded: Engine) -> None:
    first: Any = client.get("/vote")
    assert first.context["n_votes"] == 0 and first.context["battle"] is not None
    form = {"token": first.context["battle"].token, "csrf_token": first.context["csrf_token"]}
    posted = client.post("/vote", data={**form, "winner": "model_b"}, follow_redirects=False)
    assert posted.status_code == 303 and posted.headers["location"].startswith("/battles/")
    assert n_votes(seeded) == 1
    reveal: Any = client.get(posted.headers["location"])
    assert reveal.status_code == 200 and reveal.template.name == "pages/reveal.html"
    assert reveal.context["result"].winner == "model_b" and reveal.context["n_votes"] == 1
    assert reveal.context["result"].model_a != reveal.context["result"].model_b
    again: Any = client.get("/vote")
    assert again.context["n_votes"] == 1


def test_fragment_vote_answers_with_the_reveal(client: TestClient, seeded: Engine) -> None:
    form = battle_form(client)
    posted: Any = client.post("/vote", data={**form, "winner": "tie"}, headers=FRAGMENT)
    assert posted.status_code == 200 and posted.template.name == "partials/_reveal.html"
    assert posted.context["result"].winner == "tie"
    battle: Any = client.get("/vote", headers=FRAGMENT)
    assert battle.template.name == "partials/_battle.html" and battle.context["n_votes"] == 1


def test_the_same_form_posted_twice_counts_once(client: TestClient, seeded: Engine) -> None:
    form = battle_form(client)
    first = client.post("/vote", data={**form, "winner": "model_a"}, follow_redirects=False)
    again = client.post("/vote", data={**form, "winner": "model_a"}, follow_redirects=False)
    assert first.status_code == again.status_code == 303
    assert first.headers["location"] == again.headers["location"]
    changed: Any = client.post("/vote", data={**form, "winner": "model_b"})
    assert changed.status_code == 409 and changed.template.name == "pages/message.html"
    assert changed.context["link"] == first.headers["location"]
    assert n_votes(seeded) == 1


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"token": "not-a-token"}, 400),
        ({"csrf_token": "wrong"}, 403),
        ({"winner": "both"}, 422),
    ],
)
def test_refused_form_posts_write_nothing(
    client: TestClient, seeded: Engine, change: dict[str, str], status: int
) -> None:
    form = {**battle_form(client), "winner": "model_a", **change}
    for headers in ({}, FRAGMENT):
        response: Any = client.post("/vote", data=form, headers=headers)
        assert response.status_code == status
        expected = "partials/_message.html" if headers else "pages/message.html"
        assert response.template.name == expected
    assert n_votes(seeded) == 0


def test_expired_fragment_post_is_gone(make_client: AppFactory, seeded: Engine) -> None:
    now = [1_000_000.0]
    client = make_client(clock=lambda: now[0], battle_token_ttl_seconds=60)
    form = battle_form(client)
    now[0] += 61
    response: Any = client.post("/vote", data={**form, "winner": "tie"}, headers=FRAGMENT)
    assert response.status_code == 410 and response.template.name == "partials/_message.html"
    assert n_votes(seeded) == 0


def test_a_reveal_is_only_for_its_annotator(make_client: AppFactory, seeded: Engine) -> None:
    alice, bob = make_client(), make_client()
    posted = alice.post("/vote", data={**battle_form(alice), "winner": "model_a"}, follow_redirects=False)
    battle_form(bob)  # bob has a session too
    assert alice.get(posted.headers["location"]).status_code == 200
    assert bob.get(posted.headers["location"]).status_code == 404
    assert alice.get("/battles/999999").status_code == 404


def test_no_session_cannot_post_or_reveal(client: TestClient) -> None:
    assert client.post("/vote", data={"token": "x", "winner": "tie"}).status_code == 403
    assert client.get("/battles/1").status_code == 403


def test_reveal_reads_while_another_writer_holds_the_lock(
    client: TestClient, seeded: Engine, db_url: str
) -> None:
    if not db_url.startswith("sqlite"):
        pytest.skip("SQLite's database-wide write lock")
    posted = client.post("/vote", data={**battle_form(client), "winner": "model_a"}, follow_redirects=False)
    writer = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None, timeout=1.0)
    try:
        writer.execute("BEGIN IMMEDIATE")  # hold the write lock, as a long import would
        reveal: Any = client.get(posted.headers["location"])
        assert reveal.status_code == 200 and reveal.context["n_votes"] == 1
    finally:
        writer.execute("ROLLBACK")
        writer.close()
