"""Battle tokens, CSRF, rate limits, admin auth and blindness, through the real app on both backends."""

from __future__ import annotations

import base64
import re
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from tests.arena.conftest import AppFactory
from tests.factories import ADMIN_TOKEN, MODEL_NAMES
from votes.models import Battle, LiveRating, Vote

TOKEN_RE = re.compile(r'name="token" value="([^"]+)"')
CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


def n_votes(engine: Engine) -> int:
    with Session(engine) as s:
        return int(s.exec(select(func.count()).select_from(Vote)).one())


def live_rows(engine: Engine) -> list[tuple[int, float, int]]:
    with Session(engine) as s:
        return [(r.model_id, r.rating, r.games) for r in s.exec(select(LiveRating)).all()]


def next_battle(client: TestClient) -> dict[str, object]:
    response = client.get("/api/battles/next")
    assert response.status_code == 200, response.text
    data: dict[str, object] = response.json()
    return data


def vote(client: TestClient, battle: dict[str, object], winner: str = "model_a", **headers: str):  # type: ignore[no-untyped-def]
    h = {"X-CSRF-Token": str(battle["csrf_token"]), **headers}
    return client.post("/api/votes", json={"token": battle["token"], "winner": winner}, headers=h)


def test_api_vote_reveals_names_and_updates_ratings(client: TestClient, seeded: Engine) -> None:
    battle = next_battle(client)
    response = vote(client, battle, "model_b")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model_a"] in MODEL_NAMES and body["model_b"] in MODEL_NAMES
    assert body["model_a"] != body["model_b"]
    assert body["ratings"]["model_b"]["change"] > 0 > body["ratings"]["model_a"]["change"]
    assert n_votes(seeded) == 1
    board = {row["model"]: row for row in client.get("/api/leaderboard").json()}
    assert board[body["model_b"]]["rating"] == body["ratings"]["model_b"]["after"]
    assert board[body["model_b"]]["games"] == 1
    assert client.get("/api/me").json()["votes"] == 1


def test_model_names_absent_before_the_vote(client: TestClient) -> None:
    pages = [client.get("/vote"), client.get("/vote", headers={"X-Arena-Fragment": "1"})]
    battle = client.get("/api/battles/next")
    token = battle.json()["token"]
    # The token is encrypted: not even base64-decoded does it carry a name or readable ids.
    decoded = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    for text in [p.text for p in pages] + [battle.text, decoded.decode("latin-1")]:
        for name in MODEL_NAMES:
            assert name not in text
    assert b'"ma"' not in decoded
    assert b'"model_a_id"' not in decoded


def test_forged_token_refused(client: TestClient, seeded: Engine) -> None:
    battle = next_battle(client)
    token = str(battle["token"])
    forged = token[:-6] + ("AAAAAA" if not token.endswith("AAAAAA") else "BBBBBB")
    for bad in (forged, "not-a-token", ""):
        response = vote(client, {**battle, "token": bad})
        assert response.status_code == 400
        assert "not valid" in response.json()["detail"]
    assert n_votes(seeded) == 0 and live_rows(seeded) == []


def test_replayed_token_refused_or_answered_with_first_result(client: TestClient, seeded: Engine) -> None:
    battle = next_battle(client)
    first = vote(client, battle, "model_a")
    assert first.status_code == 200
    ratings = live_rows(seeded)
    other = vote(client, battle, "tie")
    assert other.status_code == 409
    assert "already been voted" in other.json()["detail"]
    same = vote(client, battle, "model_a")  # a retry of the very same vote: the first answer, nothing new
    assert same.status_code == 200
    assert same.json()["replayed"] is True
    assert same.json()["vote_id"] == first.json()["vote_id"]
    assert same.json()["ratings"] == first.json()["ratings"]
    assert n_votes(seeded) == 1 and live_rows(seeded) == ratings


def test_idempotency_key_returns_first_result(client: TestClient, seeded: Engine) -> None:
    b1 = next_battle(client)
    r1 = vote(client, b1, "model_a", **{"Idempotency-Key": "k-1"})
    b2 = next_battle(client)
    r2 = vote(client, b2, "model_b", **{"Idempotency-Key": "k-1"})
    assert r1.status_code == r2.status_code == 200
    assert r2.json()["vote_id"] == r1.json()["vote_id"] and r2.json()["replayed"]
    assert n_votes(seeded) == 1


def test_expired_token_refused(make_client: AppFactory, seeded: Engine) -> None:
    now = [1_000_000.0]
    client = make_client(clock=lambda: now[0], battle_token_ttl_seconds=60)
    battle = next_battle(client)
    now[0] += 61
    response = vote(client, battle)
    assert response.status_code == 410
    assert "expired" in response.json()["detail"]
    assert n_votes(seeded) == 0
    # The HTML form sends the annotator to a fresh battle instead.
    page = client.get("/vote")
    form = {"token": TOKEN_RE.search(page.text).group(1), "csrf_token": CSRF_RE.search(page.text).group(1)}  # type: ignore[union-attr]
    now[0] += 61
    response = client.post("/vote", data={**form, "winner": "tie"}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/vote?notice=expired"
    assert "expired" in client.get(response.headers["location"]).text


def test_foreign_token_refused(make_client: AppFactory, seeded: Engine) -> None:
    alice, mallory = make_client(), make_client()
    battle = next_battle(alice)
    mallory_battle = next_battle(mallory)
    response = vote(mallory, {**mallory_battle, "token": battle["token"]})
    assert response.status_code == 403
    assert "another session" in response.json()["detail"]
    assert n_votes(seeded) == 0


def test_missing_or_wrong_csrf_refused(client: TestClient, seeded: Engine) -> None:
    battle = next_battle(client)
    no_header = client.post("/api/votes", json={"token": battle["token"], "winner": "tie"})
    wrong = vote(client, battle, "tie", **{"X-CSRF-Token": "0" * 64})
    assert no_header.status_code == wrong.status_code == 403
    page = client.get("/vote")
    token = TOKEN_RE.search(page.text).group(1)  # type: ignore[union-attr]
    form = client.post("/vote", data={"token": token, "winner": "tie"}, follow_redirects=False)
    assert form.status_code == 403 and "security token" in form.text
    assert n_votes(seeded) == 0
    # Another session's CSRF token does not work either.
    other = TestClient(client.app)
    other.get("/vote")
    stolen = other.post(
        "/api/votes",
        json={"token": battle["token"], "winner": "tie"},
        headers={"X-CSRF-Token": str(battle["csrf_token"])},
    )
    assert stolen.status_code == 403
    assert n_votes(seeded) == 0


def test_no_session_refused(client: TestClient) -> None:
    fresh = TestClient(client.app)
    response = fresh.post("/api/votes", json={"token": "x", "winner": "tie"})
    assert response.status_code == 403 and "session" in response.json()["detail"]


def test_rate_limit_trips_and_recovers(make_client: AppFactory, seeded: Engine) -> None:
    now = [1_200_000.0]
    client = make_client(clock=lambda: now[0], rate_limit_per_minute=3, battle_token_ttl_seconds=10_000)
    codes = [vote(client, next_battle(client)).status_code for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    limited = vote(client, next_battle(client))
    assert int(limited.headers["Retry-After"]) >= 1
    assert n_votes(seeded) == 3
    now[0] += 60  # next window
    assert vote(client, next_battle(client)).status_code == 200
    assert n_votes(seeded) == 4


def test_rate_limit_per_address(make_client: AppFactory) -> None:
    now = [1_300_000.0]
    client = make_client(clock=lambda: now[0], rate_limit_per_address_per_minute=4)
    codes = [client.get("/api/battles/next").status_code for _ in range(6)]
    assert codes == [200, 200, 200, 200, 429, 429]
    assert client.get("/vote").status_code == 429
    now[0] += 60
    assert client.get("/api/battles/next").status_code == 200


def test_admin_refuses_without_token(client: TestClient) -> None:
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("post", "/api/admin/annotators/1/flag", {"json": {"reason": "x"}}),
        ("post", "/api/admin/invites", {"json": {}}),
        ("post", "/api/admin/publish", {"json": {}}),
        ("post", "/api/admin/live-ratings/rebuild", {}),
        ("post", "/api/admin/import", {"files": {"file": ("a.jsonl", b"{}")}}),
    ]
    for method, url, kwargs in calls:
        assert getattr(client, method)(url, **kwargs).status_code == 401
        bad = getattr(client, method)(url, headers={"Authorization": "Bearer wrong"}, **kwargs)
        assert bad.status_code == 401


def test_admin_disabled_without_configured_token(make_client: AppFactory) -> None:
    client = make_client(admin_token=None)
    response = client.post("/api/admin/invites", json={}, headers={"Authorization": "Bearer anything"})
    assert response.status_code == 403


def test_admin_flag_excludes_votes_from_live_ratings(client: TestClient, seeded: Engine) -> None:
    for _ in range(3):
        assert vote(client, next_battle(client)).status_code == 200
    annotator = client.get("/api/me").json()["annotator_id"]
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    response = client.post(f"/api/admin/annotators/{annotator}/flag", json={"reason": "test"}, headers=auth)
    assert response.status_code == 200
    assert all(games == 0 and rating == 1000.0 for _m, rating, games in live_rows(seeded))
    # Their later votes are stored but do not move the live ratings.
    assert vote(client, next_battle(client)).status_code == 200
    assert n_votes(seeded) == 4
    assert all(games == 0 for _m, _r, games in live_rows(seeded))


def test_invite_link_signs_in_an_invited_annotator(make_client: AppFactory) -> None:
    admin = make_client(invite_only=True)
    assert TestClient(admin.app).get("/vote").status_code == 403
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    invite = admin.post("/api/admin/invites", json={"label": "ann-1"}, headers=auth).json()
    guest = TestClient(admin.app)
    path = invite["url"].replace("http://testserver", "")
    page = guest.get(path)
    assert page.status_code == 200 and 'name="token"' in page.text
    assert guest.get("/api/me").json()["annotator_id"] == invite["annotator_id"]


def test_security_headers(client: TestClient) -> None:
    for url in ("/", "/vote", "/api/leaderboard", "/static/arena.css"):
        headers = client.get(url).headers
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "unsafe-inline" not in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
    cookie = (
        client.get("/vote").headers.get("set-cookie")
        or TestClient(client.app).get("/vote").headers["set-cookie"]
    )
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie


def test_battles_one_per_token_in_the_database(client: TestClient, seeded: Engine) -> None:
    for winner in ("model_a", "model_b", "tie", "tie (bothbad)"):
        battle = next_battle(client)
        assert vote(client, battle, winner).status_code == 200
        assert vote(client, battle, winner).json()["replayed"]
    with Session(seeded) as s:
        battles = s.exec(select(Battle)).all()
    assert len(battles) == 4 and len({b.token_id for b in battles}) == 4
    assert all(b.pair_probability is not None and 0 < b.pair_probability <= 1 for b in battles)
