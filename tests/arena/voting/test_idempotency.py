"""Idempotent votes: a retried vote, sequential or concurrent, returns the first result and writes one row."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from leaderboard.online.elo import EloConfig
from votes.models import Battle, Vote
from votes.voting.ratings import replay_live_ratings
from votes.voting.views import live_standings

N_CONCURRENT = 8


def counts(engine: Engine) -> tuple[int, int]:
    with Session(engine) as s:
        n_votes = s.execute(select(func.count()).select_from(Vote)).scalar_one()
        n_battles = s.execute(select(func.count()).select_from(Battle)).scalar_one()
        return int(n_votes), int(n_battles)


def next_battle(client: TestClient) -> dict[str, Any]:
    response = client.get("/api/battles/next")
    assert response.status_code == 200, response.text
    battle: dict[str, Any] = response.json()
    return battle


def post_vote(client: TestClient, battle: dict[str, Any], winner: str, key: str | None = None) -> Any:
    headers = {"X-CSRF-Token": battle["csrf_token"]}
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post("/api/votes", json={"token": battle["token"], "winner": winner}, headers=headers)


def assert_live_equals_replay(engine: Engine) -> None:
    with Session(engine) as s:
        live = {x.model: (round(x.rating, 9), x.games) for x in live_standings(session=s) if x.games}
        replay = {
            m: (round(r, 9), g)
            for m, (r, g) in replay_live_ratings(session=s, config=EloConfig(k=4.0)).items()
        }
    assert live == replay


def test_concurrent_retries_of_one_token_record_one_vote(make_client: Any, seeded: Engine) -> None:
    client: TestClient = make_client()
    battle = next_battle(client)
    with ThreadPoolExecutor(N_CONCURRENT) as pool:
        responses = list(pool.map(lambda _: post_vote(client, battle, "model_b"), range(N_CONCURRENT)))
    assert [r.status_code for r in responses] == [200] * N_CONCURRENT, [r.text for r in responses]
    bodies = [r.json() for r in responses]
    assert len({b["vote_id"] for b in bodies}) == 1
    assert sum(not b["replayed"] for b in bodies) == 1
    # Every answer reports the same ratings: the first result, not a recomputation.
    assert len({(b["ratings"]["model_a"]["after"], b["ratings"]["model_b"]["after"]) for b in bodies}) == 1
    assert counts(seeded) == (1, 1)
    assert_live_equals_replay(seeded)


def test_concurrent_same_idempotency_key_records_one_vote(make_client: Any, seeded: Engine) -> None:
    client: TestClient = make_client()
    battle = next_battle(client)
    with ThreadPoolExecutor(N_CONCURRENT) as pool:
        responses = list(
            pool.map(lambda _: post_vote(client, battle, "tie", key="retry-42"), range(N_CONCURRENT))
        )
    assert {r.status_code for r in responses} == {200}
    assert len({r.json()["vote_id"] for r in responses}) == 1
    assert counts(seeded) == (1, 1)


def test_conflicting_retries_keep_the_first_vote(make_client: Any, seeded: Engine) -> None:
    client: TestClient = make_client()
    battle = next_battle(client)
    winners = ["model_a", "model_b", "tie", "tie (bothbad)"] * 2
    with ThreadPoolExecutor(N_CONCURRENT) as pool:
        responses = list(pool.map(lambda w: post_vote(client, battle, w), winners))
    ok = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 409]
    assert len(ok) + len(refused) == len(winners)
    # Only retries with the winning vote's outcome are answered; the rest are refused; one vote stands.
    assert len({r.json()["winner"] for r in ok}) == 1
    assert refused and all("already" in r.json()["detail"] for r in refused)
    assert counts(seeded) == (1, 1)


def test_idempotency_keys_are_per_annotator(make_client: Any, seeded: Engine) -> None:
    first, second = make_client(), make_client()
    b1, b2 = next_battle(first), next_battle(second)
    r1 = post_vote(first, b1, "model_a", key="same-key")
    r2 = post_vote(second, b2, "model_b", key="same-key")
    assert r1.status_code == r2.status_code == 200
    # Another annotator's identical key is a different vote, not a replay of the first one's.
    assert r1.json()["vote_id"] != r2.json()["vote_id"]
    assert not r2.json()["replayed"]
    assert counts(seeded) == (2, 2)


def test_form_resubmission_is_idempotent(make_client: Any, seeded: Engine) -> None:
    import re

    client: TestClient = make_client()
    page = client.get("/vote")
    token = re.search(r'name="token" value="([^"]+)"', page.text)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token and csrf
    form = {"token": token.group(1), "csrf_token": csrf.group(1), "winner": "model_a"}
    first = client.post("/vote", data=form, follow_redirects=False)
    again = client.post("/vote", data=form, follow_redirects=False)
    assert first.status_code in (200, 303) and again.status_code in (200, 303)
    if first.status_code == 303:
        assert first.headers["location"] == again.headers["location"]
    assert counts(seeded) == (1, 1)
