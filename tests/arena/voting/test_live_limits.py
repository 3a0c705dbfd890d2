"""Live battles under abuse and failure: limits that trip and recover, refusals before any endpoint
request (counted at the servers), the daily budget, the leak filter, and a server killed mid-stream."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.engine import Engine

from arena.app import create_app
from tests.arena.voting.live_support import NAMES, open_battle_page, register, stream_turn
from tests.e2e.conftest import serve
from tests.factories import make_settings
from tests.fake_openai import FakeOpenAI, serve_fake_openai
from tests.llm_servers import require_llama_server, start_llama_server, write_tiny_llama
from votes.tables import battle_t, liveusage_t, model_t, vote_t


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fakes() -> Iterator[list[FakeOpenAI]]:
    with serve_fake_openai(FakeOpenAI(answer="one two three four five six")) as a:
        with serve_fake_openai(FakeOpenAI(answer="seven eight nine ten eleven twelve")) as b:
            yield [a, b]


@pytest.fixture
def fake_site(seeded: Engine, fakes: list[FakeOpenAI]) -> Engine:
    register(
        seeded, [(name, f.base_url, "served") for name, f in zip(NAMES, fakes, strict=True)], max_retries=0
    )
    return seeded


def _requests(fakes: list[FakeOpenAI]) -> int:
    return sum(f.n_requests for f in fakes)


def _turn(client: TestClient, csrf: str, message: str = "Hello there", **extra: str) -> Any:
    return client.post("/battle/stream", data={"message": message, "csrf_token": csrf, **extra})


def test_prompt_cap_and_moderation_refuse_before_any_endpoint_request(
    make_client: Any, fake_site: Engine, fakes: list[FakeOpenAI]
) -> None:
    client: TestClient = make_client(live_max_prompt_chars=50, live_moderation_patterns=[r"\bforbidden\b"])
    csrf = open_battle_page(client)
    too_long = _turn(client, csrf, "x" * 51)
    assert too_long.status_code == 413 and "at most 50 characters" in too_long.json()["detail"]
    no_js = client.post("/battle", data={"message": "y" * 51, "csrf_token": csrf})
    assert no_js.status_code == 413 and "at most 50 characters" in no_js.text
    moderated = _turn(client, csrf, "Tell me the Forbidden thing")
    assert moderated.status_code == 422
    assert _turn(client, csrf, "").status_code == 422
    assert _turn(client, "not-the-token").status_code == 403
    assert _requests(fakes) == 0  # nothing reached an endpoint
    ok = _turn(client, csrf, "x" * 50)
    assert ok.status_code == 200 and "event: end" in ok.text
    assert _requests(fakes) == 2


def test_per_annotator_and_per_address_limits_trip_and_recover(
    make_client: Any, fake_site: Engine, fakes: list[FakeOpenAI]
) -> None:
    clock = Clock()
    # Per annotator: two turns a minute.
    client: TestClient = make_client(clock=clock, live_generations_per_minute=2)
    csrf = open_battle_page(client)
    assert [_turn(client, csrf).status_code for _ in range(3)] == [200, 200, 429]
    assert _requests(fakes) == 4  # the refused turn asked nobody
    clock.now += 61
    assert _turn(client, csrf).status_code == 200
    # Per address: three turns a minute, whoever asks; a second annotator at the same address trips it.
    first: TestClient = make_client(clock=clock, live_generations_per_address_per_minute=3)
    second = TestClient(first.app, base_url="http://testserver")
    csrf_first = open_battle_page(first)
    csrf_second = open_battle_page(second)
    assert [_turn(first, csrf_first).status_code for _ in range(2)] == [200, 200]
    assert _turn(second, csrf_second).status_code == 200
    refused = _turn(second, csrf_second)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    clock.now += 61
    assert _turn(second, csrf_second).status_code == 200


def test_daily_token_budget_stops_live_battles(
    make_client: Any, fake_site: Engine, fakes: list[FakeOpenAI]
) -> None:
    client: TestClient = make_client(live_daily_tokens=10)  # one turn spends 3 + 6 tokens per model
    csrf = open_battle_page(client)
    assert _turn(client, csrf).status_code == 200
    assert _turn(client, csrf).status_code == 200  # 9 < 10: still allowed
    refused = _turn(client, csrf)
    assert refused.status_code == 429 and "budget" in refused.json()["detail"]
    assert _requests(fakes) == 4
    with fake_site.connect() as conn:
        assert sorted(conn.execute(select(liveusage_t.c.tokens)).scalars()) == [18, 18]


def test_a_leaking_answer_is_shown_but_cannot_be_voted_on(
    make_client: Any, fake_site: Engine, fakes: list[FakeOpenAI]
) -> None:
    for fake, name in zip(fakes, NAMES, strict=True):
        fake.answer = f"Hello! I am {name}, at your service."
    client: TestClient = make_client()
    csrf = open_battle_page(client)
    turn = stream_turn(client, "Who are you?", csrf)
    assert turn.token is None and "not be blind" in turn.end["notice"]
    assert "at your service" in turn.final_html("a")  # the battle is shown
    with fake_site.connect() as conn:
        (ended,) = conn.execute(select(battle_t.c.extra, battle_t.c.source)).all()
        assert ended == ({"ended": "leak"}, "live")
        assert conn.execute(select(vote_t.c.id)).first() is None


def test_a_failed_second_turn_spends_the_first_turns_token(
    make_client: Any, fake_site: Engine, fakes: list[FakeOpenAI]
) -> None:
    client: TestClient = make_client()
    csrf = open_battle_page(client)
    first = stream_turn(client, "Hello", csrf)
    assert first.token
    fakes[1].stream_finishes = False  # its next stream breaks off without a finish reason
    second = stream_turn(client, "And then?", csrf, token=first.token)
    assert second.token is None and "without a vote" in second.end["notice"]
    assert sorted(second.ended(side) for side in ("a", "b")) == ["done", "failed"]
    vote = client.post(
        "/api/votes", json={"token": first.token, "winner": "tie"}, headers={"X-CSRF-Token": csrf}
    )
    assert vote.status_code == 409
    assert _turn(client, csrf, "Once more", token=first.token).status_code == 409
    with fake_site.connect() as conn:
        assert conn.execute(select(vote_t.c.id)).first() is None
        assert sorted(conn.execute(select(liveusage_t.c.failures)).scalars()) == [0, 1]


@pytest.fixture
def doomed_site(seeded: Engine, db_url: str, tmp_path: Path) -> Iterator[tuple[str, Any, Any]]:
    """Two private llama.cpp servers (one of them is killed by the test) behind a uvicorn site."""
    require_llama_server()
    models = [write_tiny_llama(tmp_path / f"m{seed}.gguf", seed=seed) for seed in (11, 12)]
    with (
        start_llama_server(models[0], model_id="tiny-a", log_dir=tmp_path) as steady,
        start_llama_server(models[1], model_id="tiny-b", log_dir=tmp_path) as victim,
    ):
        register(seeded, [(NAMES[0], steady.base_url, "tiny-a")], max_tokens=16, max_retries=0)
        register(seeded, [(NAMES[1], victim.base_url, "tiny-b")], max_tokens=3000, max_retries=0)
        app = create_app(make_settings(db_url), engine=seeded, seed=3)
        with serve(app) as base:
            yield base, steady, victim


def test_killing_a_server_mid_stream_ends_the_battle_without_a_vote(
    doomed_site: tuple[str, Any, Any], seeded: Engine
) -> None:
    base, _steady, victim = doomed_site
    with httpx.Client(base_url=base, timeout=120) as client:
        csrf = open_battle_page(client)
        sides: dict[str, str] = {}

        def watch(name: str, data: dict[str, Any]) -> None:
            # The victim is the side still streaming after the steady model (16 tokens) has finished.
            if name == "done":
                sides["steady"] = data["side"]
            if (
                name == "update"
                and "steady" in sides
                and data["side"] != sides["steady"]
                and "killed" not in sides
            ):
                sides["killed"] = data["side"]
                victim.kill()

        turn = stream_turn(client, "Tell me a very long story.", csrf, on_event=watch)
        board = client.get("/leaderboard/live").text
    assert "killed" in sides, turn.events
    assert turn.ended(sides["killed"]) == "failed" and turn.ended(sides["steady"]) == "done"
    assert turn.final_html(sides["steady"]).strip()  # the other pane's text is kept
    assert turn.final_html(sides["killed"]).strip()  # and so is what the victim had sent
    assert turn.token is None and "without a vote" in turn.end["notice"]
    assert 'id="vote-form"' not in turn.end["controls"]
    with seeded.connect() as conn:
        usage = dict(
            conn.execute(
                select(model_t.c.name, liveusage_t.c.failures).join(
                    model_t, model_t.c.id == liveusage_t.c.model_id
                )
            ).all()
        )
        assert usage == {NAMES[0]: 0, NAMES[1]: 1}
        assert conn.execute(select(vote_t.c.id)).first() is None
    # The board shows it: asked once, failed once, 0 % available; the steady model 100 %.
    table = board[board.index('id="live-availability"') :]
    rows = re.findall(
        r'<td class="model">([^<]+)</td><td class="num">(\d+)</td><td class="num">(\d+)</td>'
        r'<td class="num">([\d.]+) %</td>',
        table,
    )
    assert rows == [(NAMES[1], "1", "1", "0.0"), (NAMES[0], "1", "0", "100.0")]


def test_a_moderation_pattern_that_does_not_compile_is_refused_at_start_up() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="pattern 2 is not a regular expression"):
        make_settings("sqlite://", live_moderation_patterns=["fine", "(unclosed"])
