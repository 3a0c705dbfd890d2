"""Sign-in with OpenID Connect against a local provider started by the test: one annotator per account on
every device, a site that takes only signed-in votes, and each forged or replayed answer refused."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.engine import Engine

from arena.app import create_app
from arena.settings import Settings
from arena.signin import safe_next
from tests.factories import make_settings
from tests.factories import vote_once as vote
from tests.oidc_provider import CLIENT_ID, CLIENT_SECRET, LocalProvider, serve_provider
from votes.tables import annotator_t, battle_t, vote_t


@pytest.fixture
def provider() -> Iterator[LocalProvider]:
    with serve_provider() as p:
        yield p


def _client(engine: Engine, db_url: str, provider: LocalProvider, **overrides: Any) -> TestClient:
    settings = make_settings(
        db_url,
        oidc_issuer=provider.issuer,
        oidc_client_id=CLIENT_ID,
        oidc_client_secret=CLIENT_SECRET,
        **overrides,
    )
    return TestClient(create_app(settings, engine=engine, seed=1), base_url="http://testserver")


def _to_provider(client: TestClient, next_path: str = "/vote") -> str:
    start = client.get("/signin", params={"next": next_path}, follow_redirects=False)
    assert start.status_code == 303, start.text
    assert urlsplit(start.headers["location"]).path == "/authorize"
    back = httpx.get(start.headers["location"], follow_redirects=False)
    assert back.status_code == 302
    location = back.headers["location"]
    assert location.startswith("http://testserver/signin/callback?")
    return location


def sign_in(client: TestClient, next_path: str = "/vote") -> Any:
    """The site's answer to the provider's redirect back (a test client's response)."""
    return client.get(_to_provider(client, next_path), follow_redirects=False)


def _voters(engine: Engine) -> list[tuple[str, int]]:
    """(annotator kind, votes) per annotator who voted."""
    stmt = (
        select(annotator_t.c.kind, annotator_t.c.id)
        .join(battle_t, battle_t.c.annotator_id == annotator_t.c.id)
        .join(vote_t, vote_t.c.battle_id == battle_t.c.id)
    )
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
    counts: dict[tuple[str, int], int] = {}
    for kind, annotator in rows:
        counts[(str(kind), int(annotator))] = counts.get((str(kind), int(annotator)), 0) + 1
    return sorted((kind, n) for (kind, _), n in counts.items())


def test_one_account_is_one_annotator_on_every_device(
    seeded: Engine, db_url: str, provider: LocalProvider
) -> None:
    with _client(seeded, db_url, provider) as laptop, _client(seeded, db_url, provider) as phone:
        done = sign_in(laptop, "/vote?from=signin")
        assert done.status_code == 303 and done.headers["location"] == "/vote?from=signin"
        assert "arena_session" in done.cookies or "arena_session" in laptop.cookies
        assert vote(laptop) == 200
        assert sign_in(phone).status_code == 303
        assert vote(phone) == 200
        provider.subject = "bob"
        with _client(seeded, db_url, provider) as other:
            assert sign_in(other).status_code == 303
            assert vote(other) == 200
    assert _voters(seeded) == [("account", 1), ("account", 2)]
    with seeded.connect() as conn:
        keys = [
            k
            for (k,) in conn.execute(select(annotator_t.c.session_key).where(annotator_t.c.kind == "account"))
        ]
    assert all(k.startswith("oidc:") and "alice" not in k and "bob" not in k for k in keys)


def test_a_site_that_requires_sign_in_takes_only_signed_in_votes(
    seeded: Engine, db_url: str, provider: LocalProvider
) -> None:
    with _client(seeded, db_url, provider, require_sign_in=True) as client:
        page = client.get("/vote")
        assert page.status_code == 200 and 'href="/signin"' in page.text
        battle = client.get("/api/battles/next").json()
        refused = client.post(
            "/api/votes",
            json={"token": battle["token"], "winner": "model_a"},
            headers={"X-CSRF-Token": battle["csrf_token"]},
        )
        assert refused.status_code == 403 and refused.json()["sign_in"] == "/signin"
        form = client.post(
            "/vote", data={"token": battle["token"], "winner": "model_a", "csrf_token": battle["csrf_token"]}
        )
        assert form.status_code == 403 and "Sign in to vote" in form.text
        assert sign_in(client).status_code == 303
        assert vote(client) == 200
    assert _voters(seeded) == [("account", 1)]


@pytest.mark.parametrize("forge", ["aud", "iss", "nonce", "expired", "key"])
def test_a_forged_id_token_is_refused(
    seeded: Engine, db_url: str, provider: LocalProvider, forge: str
) -> None:
    provider.forge = forge
    with _client(seeded, db_url, provider, require_sign_in=True) as client:
        refused = sign_in(client)
        assert refused.status_code == 400
        assert "Sign-in failed" in refused.text
        assert vote(client) == 403
    with seeded.connect() as conn:
        assert conn.execute(select(annotator_t.c.id).where(annotator_t.c.kind == "account")).first() is None


def test_the_answer_must_belong_to_this_browsers_sign_in(
    seeded: Engine, db_url: str, provider: LocalProvider
) -> None:
    with _client(seeded, db_url, provider) as victim, _client(seeded, db_url, provider) as attacker:
        # An attacker's own callback URL, pushed to a victim (login CSRF): the victim never started it.
        stolen = _to_provider(attacker)
        assert victim.get(stolen, follow_redirects=False).status_code == 400
        # An altered state is refused and ends that attempt: not even the true answer is taken after it.
        callback = _to_provider(victim)
        parts = urlsplit(callback)
        assert victim.get(callback.replace("state=", "state=x", 1), follow_redirects=False).status_code == 400
        assert victim.get(f"{parts.path}?{parts.query}", follow_redirects=False).status_code == 400
        # A true answer signs in once; the same answer again is refused.
        parts = urlsplit(_to_provider(victim))
        assert victim.get(f"{parts.path}?{parts.query}", follow_redirects=False).status_code == 303
        replay = victim.get(f"{parts.path}?{parts.query}", follow_redirects=False)
        assert replay.status_code == 400  # the attempt's cookie is gone, and the provider took the code back
        assert victim.get("/signin/callback?error=access_denied", follow_redirects=False).status_code == 400


def test_young_accounts_are_refused_where_the_provider_states_their_age(
    seeded: Engine, db_url: str, provider: LocalProvider
) -> None:
    now = datetime.now(UTC)
    with _client(seeded, db_url, provider, oidc_min_account_age_days=30) as client:
        provider.extra_claims = {"created_at": int((now - timedelta(days=3)).timestamp())}
        young = sign_in(client)
        assert young.status_code == 400 and "younger than 30 days" in young.text
        provider.extra_claims = {"created_at": (now - timedelta(days=400)).isoformat()}
        assert sign_in(client).status_code == 303
        provider.subject, provider.extra_claims = "carol", {}  # no age stated: taken as it is
        assert sign_in(client).status_code == 303


def test_after_sign_in_only_paths_on_this_site() -> None:
    assert safe_next("/leaderboard?x=1") == "/leaderboard?x=1"
    for hostile in (
        "https://evil.example/",
        "//evil.example/x",
        "/\\evil.example",
        "javascript:alert(1)",
        None,
        "",
    ):
        assert safe_next(hostile) == "/vote"
    assert safe_next("/" + "a" * 600) == "/vote"


def test_sign_in_settings_are_checked_at_start() -> None:
    for bad in (
        {"oidc_issuer": "http://provider.example", "oidc_client_id": "c"},  # plain http off loopback
        {"oidc_issuer": "https://provider.example"},  # no client id
        {"require_sign_in": True},  # nothing to sign in with
    ):
        with pytest.raises(ValueError, match="OIDC|SIGN_IN|issuer"):
            Settings(secret_key="k", **bad)


def test_no_sign_in_routes_without_a_provider(seeded: Engine, db_url: str) -> None:
    with TestClient(create_app(make_settings(db_url), engine=seeded, seed=1)) as client:
        assert client.get("/signin", follow_redirects=False).status_code == 404
        assert 'href="/signin"' not in client.get("/vote").text
