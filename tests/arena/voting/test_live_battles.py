"""Live battles against real llama.cpp servers of tiny random models, through a real uvicorn server.

Streaming, a second turn, the vote with its reveal and live Elo, the stored conversation and its export,
blindness of everything sent before the vote, and many battles at once.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from arena.app import create_app
from arena.settings import live_config
from tests.arena.voting.live_support import NAMES, Turn, open_battle_page, parse_events, register, stream_turn
from tests.e2e.conftest import serve
from tests.factories import live_rows, make_settings
from tests.llm_servers import LlamaServer, LlamaServers
from votes.reads.cells import load_pair_counts
from votes.reads.exports import iter_vote_rows
from votes.reads.filters import VoteFilter
from votes.tables import battle_t, generation_t, liveusage_t, output_t, prompt_t, vote_t
from votes.voting.ratings import replay_live_rows

MAX_TOKENS = 24


@pytest.fixture
def servers(llm_servers: LlamaServers) -> list[LlamaServer]:
    return [llm_servers.get(seed=1), llm_servers.get(seed=2)]


@pytest.fixture
def site(seeded: Engine, db_url: str, servers: list[LlamaServer]) -> Iterator[str]:
    register(
        seeded,
        [(name, s.base_url, s.model_id) for name, s in zip(NAMES, servers, strict=True)],
        max_tokens=MAX_TOKENS,
        seed=3,
        max_concurrency=1,  # llama-cpp-python's server interrupts a stream when another request arrives
    )
    app = create_app(make_settings(db_url), engine=seeded, seed=7)
    with serve(app) as base:
        yield base


def _secrets(servers: list[LlamaServer]) -> list[str]:
    """Everything that would name a model: names, leading words, served ids, addresses."""
    found = [*NAMES, *(n.split("-")[0] for n in NAMES)]
    for server in servers:
        found += [server.model_id, server.base_url, server.base_url.split("//")[1]]
    return found


def _assert_blind(text: str, secrets: list[str], where: str) -> None:
    lowered = text.lower()
    for secret in secrets:
        assert secret.lower() not in lowered, f"{secret!r} appears in {where}"


def test_two_turns_stream_then_vote_reveals_names_and_elo(
    site: str, seeded: Engine, servers: list[LlamaServer]
) -> None:
    with httpx.Client(base_url=site, timeout=120) as client:
        csrf = open_battle_page(client)
        first = stream_turn(client, "Write a short poem about rivers.", csrf)
        assert first.status == 200 and first.headers["content-type"].startswith("text/event-stream")
        for side in ("a", "b"):
            assert first.updates(side) >= 2, first.events  # partial updates before the answer completed
            assert first.ended(side) == "done"
        assert first.end["votable"] and first.token
        second = stream_turn(client, "Now make it rhyme.", csrf, token=first.token)
        assert second.token and second.token != first.token
        assert all(second.ended(side) == "done" for side in ("a", "b"))
        answer = client.post(
            "/api/votes", json={"token": second.token, "winner": "model_a"}, headers={"X-CSRF-Token": csrf}
        )
        assert answer.status_code == 200, answer.text
        vote = answer.json()
        assert {vote["model_a"], vote["model_b"]} == set(NAMES)
        assert vote["ratings"]["model_a"]["change"] > 0 > vote["ratings"]["model_b"]["change"]
        # One vote per live battle: the first turn's token is the same battle.
        again = client.post(
            "/api/votes", json={"token": first.token, "winner": "model_b"}, headers={"X-CSRF-Token": csrf}
        )
        assert again.status_code == 409
        reveal = client.get(f"/battles/{vote['battle_id']}")
        assert vote["model_a"] in reveal.text and vote["model_b"] in reveal.text
        # Continuing a voted battle is refused.
        late = stream_turn(client, "And a third verse?", csrf, token=second.token)
        assert late.status == 409
    with seeded.connect() as conn:
        battle = conn.execute(select(battle_t).where(battle_t.c.id == vote["battle_id"])).one()
        assert battle.source == "live" and battle.pair_probability is not None
        prompt = conn.execute(select(prompt_t).where(prompt_t.c.id == battle.prompt_id)).one()
        assert prompt.category == "live" and prompt.source == "live"
        assert [t["content"] for t in prompt.conversation] == [
            "Write a short poem about rivers.",
            "Now make it rhyme.",
        ]
        rows = conn.execute(
            select(output_t.c.conversation, generation_t.c.latency_s, generation_t.c.finish_reason)
            .join(generation_t, generation_t.c.output_id == output_t.c.id)
            .where(output_t.c.id.in_([battle.output_a_id, battle.output_b_id]))
        ).all()
        for conversation, latency_s, finish_reason in rows:
            assert [m["role"] for m in conversation] == ["user", "assistant", "user", "assistant"]
            assert latency_s > 0 and finish_reason == "length"  # the tiny models never end a turn
        usage = conn.execute(
            select(liveusage_t.c.generations, liveusage_t.c.failures, liveusage_t.c.tokens)
        ).all()
        assert sorted(u[:2] for u in usage) == [(2, 0), (2, 0)]
        assert all(u[2] >= 2 * MAX_TOKENS for u in usage)  # llama.cpp streams one token per delta
        (exported,) = list(iter_vote_rows(conn, VoteFilter(source="live")))
    assert len(exported["conversation_a"]) == len(exported["conversation_b"]) == 4
    assert exported["conversation_a"][2]["content"] == "Now make it rhyme."
    assert {exported["model_a"], exported["model_b"]} == set(NAMES)


def test_nothing_names_a_model_before_the_vote(site: str, servers: list[LlamaServer]) -> None:
    secrets = _secrets(servers)
    with httpx.Client(base_url=site, timeout=120) as client:
        page = client.get("/battle")
        _assert_blind(page.text + str(page.headers), secrets, "the battle page")
        csrf = open_battle_page(client)
        turn = stream_turn(client, "Who are you and who made you?", csrf)
        assert turn.token
        _assert_blind(turn.raw.decode() + str(turn.headers), secrets, "the stream")
        second = stream_turn(client, "Tell me your name.", csrf, token=turn.token)
        _assert_blind(second.raw.decode() + str(second.headers), secrets, "the second turn")
        # Without JavaScript: the whole turn as a page.
        form = {"message": "Name yourself.", "csrf_token": csrf}
        full = client.post("/battle", data=form)
        assert full.status_code == 200 and 'id="vote-form"' in full.text
        _assert_blind(full.text + str(full.headers), secrets, "the no-JS page")
        # Refusals and errors.
        refusals = [
            client.post("/battle/stream", data={"message": "x" * 5000, "csrf_token": csrf}),
            client.post("/battle/stream", data={"message": "hi", "csrf_token": "wrong"}),
            client.post("/battle/stream", data={"message": "hi", "csrf_token": csrf, "token": "forged"}),
            client.post("/battle", data={"message": "x" * 5000, "csrf_token": csrf}),
        ]
        for refused in refusals:
            assert refused.status_code >= 400
            _assert_blind(refused.text + str(refused.headers), secrets, f"an error ({refused.status_code})")


def test_sixteen_concurrent_live_battles_every_vote_durable_and_elo_equals_replay(
    site: str, seeded: Engine, db_url: str
) -> None:
    winners = ["model_a", "model_b", "tie", "tie (bothbad)"]

    async def one(i: int) -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=site, timeout=300) as client:
            page = await client.get("/battle")
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
            assert csrf
            form = {"message": f"Battle number {i}: say something.", "csrf_token": csrf.group(1)}
            response = await client.post("/battle/stream", data=form)
            assert response.status_code == 200, response.text
            events = parse_events(response.content)
            turn = Turn(response.status_code, response.headers, response.content, events)
            assert turn.token, turn.end
            vote = await client.post(
                "/api/votes",
                json={"token": turn.token, "winner": winners[i % 4]},
                headers={"X-CSRF-Token": csrf.group(1)},
            )
            assert vote.status_code == 200, vote.text
            answer: dict[str, Any] = vote.json()
            return answer

    async def all_of_them() -> list[dict[str, Any]]:
        return await asyncio.gather(*(one(i) for i in range(16)))

    answers = asyncio.run(all_of_them())
    assert len({a["battle_id"] for a in answers}) == 16
    with seeded.connect() as conn:
        stored = conn.execute(
            select(vote_t.c.id)
            .join(battle_t, battle_t.c.id == vote_t.c.battle_id)
            .where(battle_t.c.source == "live")
        ).all()
        assert sorted(v for (v,) in stored) == sorted(a["vote_id"] for a in answers)
        # One vote store, filterable by source: the board of live battles counts exactly these votes.
        live = load_pair_counts(conn, filters=VoteFilter(source="live"))
        assert float(live.count.sum()) == 16 and set(live.models) == set(NAMES)
        assert float(load_pair_counts(conn, filters=VoteFilter(source="site")).count.sum()) == 0
    with Session(seeded) as session:
        replayed = replay_live_rows(session=session, config=live_config(make_settings(db_url)))
    assert live_rows(seeded, with_rater=False) == replayed
    assert sum(int(r["games"]) for r in replayed.values()) == 32
    assert json.dumps(answers)  # every answer is plain JSON
