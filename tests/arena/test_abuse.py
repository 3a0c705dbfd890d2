"""Abuse limits and defences: daily vote cap, trusted proxies, identity-leak filtering, annotator flags."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
import typer
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from starlette.types import Message, Receive, Scope, Send
from typer.testing import CliRunner

from arena.app import create_app
from arena.cli.commands.admin import register
from arena.web.middleware import TrustedProxyMiddleware
from leaderboard.data import parse_outcome
from leaderboard.online.elo import EloConfig
from leaderboard.quality.annotators import outcome_probabilities
from tests.factories import ADMIN_TOKEN, make_settings, vote_once
from votes.migrate import upgrade_database
from votes.models import Annotator, Model, Output, utcnow
from votes.voting.annotators import create_annotator
from votes.voting.battles import VoteRequest, issue_battle
from votes.voting.ratings import replay_live_ratings
from votes.voting.recording import record_votes
from votes.voting.views import live_standings, load_pairing_catalog

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def test_daily_vote_cap(make_client: Any) -> None:
    now = [1_700_006_400.0]  # a UTC midnight
    client = make_client(clock=lambda: now[0], daily_vote_cap=3, battle_token_ttl_seconds=10**6)
    codes = []
    for _ in range(5):
        codes.append(vote_once(client))
        now[0] += 61  # stay clear of the per-minute limit
    assert codes == [200, 200, 200, 429, 429]
    now[0] += 86_400  # the next day
    assert vote_once(client) == 200


@pytest.mark.parametrize(
    ("peer", "header", "trusted", "expected"),
    [
        ("203.0.113.7", "1.2.3.4", [], "203.0.113.7"),  # no proxies configured: the header is ignored
        ("203.0.113.7", "1.2.3.4", ["10.0.0.0/8"], "203.0.113.7"),  # peer is not our proxy: ignored
        ("10.0.0.2", "1.2.3.4", ["10.0.0.0/8"], "1.2.3.4"),  # our proxy: believed
        ("10.0.0.2", "1.2.3.4, 10.0.0.9", ["10.0.0.0/8"], "1.2.3.4"),  # two of our proxies in a row
        ("10.0.0.2", "6.6.6.6, 1.2.3.4", ["10.0.0.0/8"], "1.2.3.4"),  # a client-forged hop is not believed
        ("10.0.0.2", "garbage", ["10.0.0.0/8"], "10.0.0.2"),
    ],
)
def test_forwarded_for_trusted_only_from_proxies(
    peer: str, header: str, trusted: list[str], expected: str
) -> None:
    assert client_behind_proxies(peer, header, trusted) == expected


def client_behind_proxies(peer: str, header: str, trusted: list[str]) -> str:
    """The client address an app behind :class:`TrustedProxyMiddleware` sees for this connection."""
    seen: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["client"][0])

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def send(message: Message) -> None:
        pass

    scope: Scope = {
        "type": "http",
        "client": (peer, 50_000),
        "headers": [(b"x-forwarded-for", header.encode())],
    }
    asyncio.run(TrustedProxyMiddleware(app, trusted=trusted)(scope, receive, send))
    assert len(seen) == 1
    return seen[0]


def test_the_app_counts_each_client_behind_a_trusted_proxy(seeded: Engine, db_url: str) -> None:
    now = [1_300_000.0]
    settings = make_settings(db_url, rate_limit_per_address_per_minute=3, trusted_proxies=["10.0.0.0/8"])
    app = create_app(settings, engine=seeded, seed=1, clock=lambda: now[0])
    with TestClient(app, client=("10.0.0.2", 50_000)) as proxied:
        # Behind our proxy each forwarded client has its own budget; the same one runs out.
        distinct = [
            proxied.get("/api/battles/next", headers={"X-Forwarded-For": f"198.51.100.{i}"}).status_code
            for i in range(5)
        ]
        same = [
            proxied.get("/api/battles/next", headers={"X-Forwarded-For": "198.51.100.99"}).status_code
            for _ in range(5)
        ]
    assert distinct == [200] * 5
    assert same == [200, 200, 200, 429, 429]


def test_spoofed_forwarded_for_does_not_escape_the_address_limit(make_client: Any) -> None:
    now = [1_300_000.0]
    client: TestClient = make_client(clock=lambda: now[0], rate_limit_per_address_per_minute=3)
    # The TestClient's peer is not a configured proxy, so a fresh X-Forwarded-For each time changes nothing.
    codes = [
        client.get("/api/battles/next", headers={"X-Forwarded-For": f"198.51.100.{i}"}).status_code
        for i in range(5)
    ]
    assert codes == [200, 200, 200, 429, 429]


def test_leaking_answers_never_reach_a_battle(make_client: Any, seeded: Engine) -> None:
    with Session(seeded) as s:
        model = s.exec(select(Model).where(Model.name == "alpha-7b")).one()
        leaking = s.exec(select(Output).where(Output.model_id == model.id)).all()
        leaking_ids = {o.id for o in leaking}
        for o in leaking:
            o.text = "As an AI language model developed by org-alpha, I am Alpha-7B."
            s.add(o)
        s.commit()
    client: TestClient = make_client()
    seen_texts: set[str] = set()
    for _ in range(12):
        r = client.get("/api/battles/next")
        if r.status_code != 200:
            break
        seen_texts.update((r.json()["a"]["text"], r.json()["b"]["text"]))
        vote_once(client)
    assert seen_texts and not any("Alpha-7B" in t for t in seen_texts)
    admin = client.get("/api/admin/leaks", headers=ADMIN)
    assert admin.status_code == 200
    assert {row["output_id"] for row in admin.json()} == leaking_ids
    assert all(row["self_reference"] and row["model"] == "alpha-7b" for row in admin.json())
    assert client.get("/api/admin/leaks").status_code == 401


def cast_votes(engine: Engine, rng: np.random.Generator, *, honest: int, votes_each: int) -> int:
    """Honest annotators vote from a BT model; one annotator always picks the left answer. Returns its id."""
    config = EloConfig(k=4.0)
    with Session(engine) as s:
        catalog = load_pairing_catalog(session=s)
        by_prompt: dict[int, list[Any]] = {}
        for row in catalog:
            by_prompt.setdefault(row.prompt_id, []).append(row)
        strength = {row.model_id: 1000.0 + 100.0 * (row.model_id % 4) for row in catalog}
        people = [create_annotator(session=s).id for _ in range(honest + 1)]
        s.commit()
        requests = []
        start = utcnow() - timedelta(days=1)
        for i, who in enumerate(people):
            # One judgement per prompt and pair per annotator: a random order of all of them.
            combos = [(p, x, y) for p in by_prompt for x in range(len(by_prompt[p])) for y in range(x)]
            assert votes_each <= len(combos), "the catalog has fewer prompt and pair battles than asked"
            for j, c in enumerate(rng.permutation(len(combos))[:votes_each]):
                prompt, x, y = combos[int(c)]
                a, b = (x, y) if rng.random() < 0.5 else (y, x)
                left, right = by_prompt[prompt][a], by_prompt[prompt][b]
                battle = issue_battle(
                    token_id=f"t{i}-{j}",
                    annotator_id=who,  # type: ignore[arg-type]
                    prompt_id=prompt,
                    output_a=left,
                    output_b=right,
                    pair_probability=None,
                    issued_at=start,
                )
                probs = outcome_probabilities(
                    [0], [1], [strength[left.model_id], strength[right.model_id]], tie_rate=0.1
                )[0]
                winner = ["model_a", "model_b", "tie"][int(rng.choice(3, p=probs))]
                if who == people[-1]:
                    winner = "model_a"
                requests.append(
                    VoteRequest(
                        battle=battle,
                        winner=parse_outcome(winner),
                        voted_at=start + timedelta(seconds=10 + j),
                    )
                )
        record_votes(session=s, requests=requests, config=config)
        s.commit()
    return int(people[-1])  # type: ignore[arg-type]


def test_review_flags_a_one_sided_voter_and_its_votes_stop_counting(make_client: Any, seeded: Engine) -> None:
    bot = cast_votes(seeded, np.random.default_rng(0), honest=12, votes_each=36)
    client: TestClient = make_client()
    listed = client.get("/api/admin/annotators", headers=ADMIN).json()
    assert [row["annotator_id"] for row in listed if row["suspicious"]] == [bot]
    assert not any(row["flagged"] for row in listed)  # a dry run changes nothing

    applied = client.get("/api/admin/annotators", params={"apply": "true"}, headers=ADMIN).json()
    flagged = [row for row in applied if row["flagged"]]
    assert [row["annotator_id"] for row in flagged] == [bot]
    assert flagged[0]["flag_reason"].startswith("auto: ") and "side" in flagged[0]["flag_reason"]
    with Session(seeded) as s:
        annotator = s.get(Annotator, bot)
        assert annotator is not None and annotator.flagged
        live = {x.model: (round(x.rating, 9), x.games) for x in live_standings(session=s) if x.games}
        replay = replay_live_ratings(session=s, config=EloConfig(k=4.0))
    assert live == {m: (round(r, 9), g) for m, (r, g) in replay.items()}
    assert sum(g for _, g in replay.values()) == 2 * 12 * 36  # only the honest votes count
    assert client.get("/api/admin/annotators", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_cli_annotators_and_leaks(seeded: Engine, db_url: str) -> None:
    bot = cast_votes(seeded, np.random.default_rng(1), honest=10, votes_each=30)
    upgrade_database(db_url)  # as `arena db upgrade` leaves a store the commands open
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    result = runner.invoke(app, ["annotators", "--database-url", db_url, "--json"])
    assert result.exit_code == 0, result.output
    *rows, _overall = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    assert [r["annotator_id"] for r in rows] == [bot]
    result = runner.invoke(app, ["annotators", "--database-url", db_url, "--apply"])
    assert result.exit_code == 0, result.output
    assert "1 annotator(s) flagged" in result.output
    leaks = runner.invoke(app, ["leaks", "--database-url", db_url, "--json"])
    assert leaks.exit_code == 0 and leaks.output.strip() == ""  # the seeded answers name nobody
