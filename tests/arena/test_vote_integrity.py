"""Vote integrity: one judgement per annotator, prompt and pair; visitors cost nothing until they vote;
limits keyed on the address, which a new cookie does not shed."""

from __future__ import annotations

import random

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, func, select

from arena.security import Signer, address_key
from leaderboard.data import Outcome
from leaderboard.online.elo import EloConfig
from tests.arena.conftest import AppFactory
from tests.factories import battles_for
from votes.models import Annotator, Battle, Vote
from votes.voting.annotators import create_annotator
from votes.voting.battles import RepeatJudgementError, VoteRequest, VoteResult
from votes.voting.ratings import replay_live_ratings
from votes.voting.recording import record_votes
from votes.voting.views import live_standings

CONFIG = EloConfig(k=4.0)


def _count(engine: Engine, table: type[Annotator] | type[Vote]) -> int:
    with Session(engine) as s:
        return int(s.exec(select(func.count()).select_from(table)).one())


def _fetch(client: TestClient) -> dict[str, object] | None:
    response = client.get("/api/battles/next")
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    data: dict[str, object] = response.json()
    return data


def _vote(client: TestClient, battle: dict[str, object]) -> int:
    headers = {"X-CSRF-Token": str(battle["csrf_token"])}
    response = client.post(
        "/api/votes", json={"token": battle["token"], "winner": "model_a"}, headers=headers
    )
    return response.status_code


# ------------------------------------------------------------------------- one judgement per battle


def test_tokens_fetched_ahead_never_repeat_a_prompt_and_pair(client: TestClient, seeded: Engine) -> None:
    """Fetch battles without voting until none is left: each (prompt, pair) comes once, and each votes."""
    fetched = []
    for _ in range(50):
        battle = _fetch(client)
        if battle is None:
            break
        fetched.append(battle)
    assert len(fetched) == 36  # 6 prompts x 6 pairs of 4 models, then 404
    assert [_vote(client, b) for b in fetched] == [200] * 36
    with Session(seeded) as s:
        keys = s.exec(select(Battle.prompt_id, Battle.model_a_id, Battle.model_b_id)).all()
    assert len({(p, min(a, b), max(a, b)) for p, a, b in keys}) == len(keys) == 36


def _swapped(request: VoteRequest, token: str) -> VoteRequest:
    """The same prompt and pair with the sides swapped, under another token."""
    b = request.battle
    battle = type(b)(
        token_id=token,
        annotator_id=b.annotator_id,
        prompt_id=b.prompt_id,
        output_a_id=b.output_b_id,
        output_b_id=b.output_a_id,
        model_a_id=b.model_b_id,
        model_b_id=b.model_a_id,
        issued_at=b.issued_at,
        pair_probability=b.pair_probability,
    )
    return VoteRequest(battle=battle, winner=Outcome.MODEL_A)


def _assert_live_equals_replay(engine: Engine) -> None:
    with Session(engine) as s:
        live = {x.model: (round(x.rating, 9), x.games) for x in live_standings(session=s) if x.games}
        replay = {m: (round(r, 9), g) for m, (r, g) in replay_live_ratings(session=s, config=CONFIG).items()}
    assert live == replay


@pytest.mark.parametrize("conflicts", ["savepoint", "one-by-one"])
def test_second_judgement_of_a_prompt_and_pair_is_refused_by_the_store(
    seeded: Engine, conflicts: str
) -> None:
    with Session(seeded) as s:
        annotator = create_annotator(session=s).id
        s.commit()
    assert annotator is not None
    first, other = battles_for(seeded, random.Random(4), annotator, 2)
    requests = [
        VoteRequest(battle=first, winner=Outcome.MODEL_B),
        VoteRequest(battle=other, winner=Outcome.TIE),
    ]
    requests.append(_swapped(requests[0], "again-in-the-same-batch"))
    with Session(seeded) as s:
        results = record_votes(session=s, requests=requests, config=CONFIG, conflicts=conflicts)  # type: ignore[arg-type]
        s.commit()
    assert [type(r) for r in results] == [VoteResult, VoteResult, RepeatJudgementError]
    with Session(seeded) as s:  # a later batch, through yet another token
        (late,) = record_votes(session=s, requests=[_swapped(requests[0], "later")], config=CONFIG)
        s.commit()
    assert isinstance(late, RepeatJudgementError)
    assert _count(seeded, Vote) == 2
    _assert_live_equals_replay(seeded)


def test_optimistic_batch_collides_on_a_repeat_judgement(seeded: Engine) -> None:
    """The group writer's optimistic path: the repeat collides, and the careful path then refuses it."""
    with Session(seeded) as s:
        annotator = create_annotator(session=s).id
        s.commit()
    assert annotator is not None
    (battle,) = battles_for(seeded, random.Random(8), annotator, 1)
    request = VoteRequest(battle=battle, winner=Outcome.MODEL_A)
    with Session(seeded) as s:
        record_votes(session=s, requests=[request], config=CONFIG)
        s.commit()
    with Session(seeded) as s, pytest.raises(IntegrityError):
        record_votes(session=s, requests=[_swapped(request, "other")], config=CONFIG, conflicts="raise")
    _assert_live_equals_replay(seeded)


# ------------------------------------------------------------------ visitors cost nothing until they vote


def test_anonymous_visits_write_no_annotator_until_the_first_vote(
    make_client: AppFactory, seeded: Engine
) -> None:
    client = make_client(new_sessions_per_address_per_hour=1000)
    before = _count(seeded, Annotator)
    for _ in range(30):  # thirty cookie-less visitors
        client.cookies.clear()
        assert _fetch(client) is not None
        assert client.get("/vote").status_code == 200
    assert _count(seeded, Annotator) == before
    battles = [_fetch(client), _fetch(client)]  # fetched ahead, before the first vote
    assert [_vote(client, b) for b in battles if b is not None] == [200, 200]
    assert _count(seeded, Annotator) == before + 1  # both votes under the one row written by the first
    with Session(seeded) as s:
        owners = set(s.exec(select(Vote.annotator_id)).all())
    assert len(owners) == 1 and next(iter(owners)) is not None and next(iter(owners)) > 0  # type: ignore[operator]


def test_new_sessions_per_address_are_capped(make_client: AppFactory, seeded: Engine) -> None:
    now = [2_000_000.0]
    client = make_client(clock=lambda: now[0], new_sessions_per_address_per_hour=5)
    codes = []
    kept: dict[str, str] = {}
    for _ in range(8):
        client.cookies.clear()
        codes.append(client.get("/api/battles/next").status_code)
        kept = kept or (dict(client.cookies) if len(codes) == 5 else {})
    assert codes == [200] * 5 + [429] * 3
    client.cookies.update(kept)
    battle = _fetch(client)  # a session handed out before still works: only new ones are refused
    assert battle is not None and _vote(client, battle) == 200
    now[0] += 3600
    client.cookies.clear()
    assert client.get("/api/battles/next").status_code == 200


def test_rate_limit_is_checked_before_any_write(make_client: AppFactory, seeded: Engine) -> None:
    client = make_client(rate_limit_per_address_per_minute=3, clock=lambda: 3_000_000.0)
    before = _count(seeded, Annotator)
    codes = []
    for _ in range(20):
        client.cookies.clear()
        codes.append(client.get("/api/battles/next").status_code)
    assert codes == [200] * 3 + [429] * 17
    assert _count(seeded, Annotator) == before


# ------------------------------------------------------------------------ limits a cookie does not shed


def test_dropping_the_cookie_does_not_reset_the_vote_limit(make_client: AppFactory, seeded: Engine) -> None:
    now = [4_000_000.0]
    client = make_client(
        clock=lambda: now[0],
        votes_per_address_per_minute=5,
        rate_limit_per_minute=3,
        votes_per_address_per_day=8,
    )
    counted = 0
    for _ in range(6):  # a new cookie every two votes
        client.cookies.clear()
        for _ in range(2):
            battle = _fetch(client)
            assert battle is not None
            counted += _vote(client, battle) == 200
    assert counted == 5 == _count(seeded, Vote)
    now[0] += 60  # next minute: three more, then the day's cap of eight
    for _ in range(3):
        client.cookies.clear()
        for _ in range(2):
            battle = _fetch(client)
            assert battle is not None
            counted += _vote(client, battle) == 200
    assert counted == 8 == _count(seeded, Vote)


def test_invited_annotators_are_not_held_to_the_address_limit(
    make_client: AppFactory, seeded: Engine
) -> None:
    from tests.factories import ADMIN_TOKEN

    client = make_client(votes_per_address_per_minute=2, clock=lambda: 5_000_000.0)
    invite = client.post("/api/admin/invites", json={}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert invite.status_code in (200, 201), invite.text
    url = str(invite.json()["url"])
    client.get(url[url.index("/invite/") :], follow_redirects=False)
    codes = []
    for _ in range(4):
        battle = _fetch(client)
        assert battle is not None
        codes.append(_vote(client, battle))
    assert codes == [200] * 4


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("203.0.113.9", "203.0.113.9"),
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::ffff:198.51.100.4", "198.51.100.4"),
        ("testclient", "testclient"),
    ],
)
def test_ipv6_addresses_are_limited_by_their_64(address: str, key: str) -> None:
    assert address_key(address) == key


def test_votes_store_a_salted_address_hash_never_the_address(client: TestClient, seeded: Engine) -> None:
    battle = _fetch(client)
    assert battle is not None and _vote(client, battle) == 200
    with Session(seeded) as s:
        (stored,) = s.exec(select(Vote.address_hash)).all()
    assert stored == Signer("test-secret-key").address_hash("testclient")
    assert stored != Signer("another-secret").address_hash("testclient")
    assert "testclient" not in str(stored)
    signer = Signer("k")
    assert signer.address_hash("2001:db8::1") == signer.address_hash("2001:db8::ffff")
    assert signer.address_hash("2001:db8::1") != signer.address_hash("2001:db8:0:1::1")


def test_review_groups_annotators_by_address(client: TestClient, seeded: Engine) -> None:
    from votes.review.voters import review_annotators

    for _ in range(3):  # one address, three cookies
        client.cookies.clear()
        for _ in range(2):
            battle = _fetch(client)
            assert battle is not None and _vote(client, battle) == 200
    rows = review_annotators(seeded)
    assert len(rows) == 3 and {r.address_group for r in rows} == {3}
