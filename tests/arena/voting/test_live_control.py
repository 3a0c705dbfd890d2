"""Live battles that do not go to plan, against scripted OpenAI-style servers (tests/fake_openai.py):
a model that stalls is replaced by a free one or ends the battle in seconds, Stop cancels both requests
upstream and still counts them, the page says at once when no models can answer, the prompt is rendered
in the stream as on the reveal, and both panes advance at one pace.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.engine import Engine

from arena.app import create_app
from arena.voting.live import NO_MODELS
from arena.web.markdown import render_markdown
from tests.arena.voting.live_support import NAMES, field_value, open_battle_page, register, stream_turn
from tests.e2e.conftest import serve
from tests.factories import make_settings
from tests.fake_openai import FakeOpenAI, serve_fake_openai
from votes.tables import battle_t, liveusage_t, model_t

SPARE = "Pangolux-5"  # a third model, free to take a side over


@pytest.fixture
def fakes() -> Iterator[list[FakeOpenAI]]:
    words = " ".join(f"word{i}" for i in range(20))
    with serve_fake_openai(FakeOpenAI(answer=words)) as a, serve_fake_openai(FakeOpenAI(answer=words)) as b:
        with serve_fake_openai(FakeOpenAI(answer=words)) as spare:
            yield [a, b, spare]


def _register(engine: Engine, fakes: list[FakeOpenAI], names: tuple[str, ...] = NAMES) -> None:
    register(engine, [(n, f.base_url, "served") for n, f in zip(names, fakes, strict=False)], max_retries=0)


def _usage(engine: Engine) -> dict[str, tuple[int, int, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                model_t.c.name, liveusage_t.c.generations, liveusage_t.c.failures, liveusage_t.c.tokens
            ).join(model_t, model_t.c.id == liveusage_t.c.model_id)
        ).all()
    return {str(name): (int(g), int(f), int(t)) for name, g, f, t in rows}


def test_the_page_says_at_once_when_no_two_models_can_answer(
    make_client: Any, seeded: Engine, fakes: list[FakeOpenAI]
) -> None:
    client: TestClient = make_client()
    for registered in (0, 1):
        _register(seeded, fakes[:registered])
        page = client.get("/battle")
        assert page.status_code == 200 and NO_MODELS in page.text
        assert 'id="live-form"' not in page.text and 'data-state="unavailable"' in page.text
    _register(seeded, fakes[:2])
    page = client.get("/battle")
    assert NO_MODELS not in page.text and 'id="live-form"' in page.text


def test_the_prompt_is_rendered_in_the_stream_as_on_the_reveal(
    make_client: Any, seeded: Engine, fakes: list[FakeOpenAI]
) -> None:
    _register(seeded, fakes[:2])
    client: TestClient = make_client()
    csrf = open_battle_page(client)
    message = "Why is the sky blue? Rayleigh: $\\lambda^{-4}$, **briefly**."
    turn = stream_turn(client, message, csrf)
    name, start = turn.events[0]
    assert name == "start" and start["html"] == render_markdown(message)
    assert "<math" in start["html"] and "<strong>briefly</strong>" in start["html"]
    assert turn.token
    vote = client.post("/vote", data={"token": turn.token, "winner": "tie", "csrf_token": csrf})
    assert vote.status_code == 200  # the reveal, after the redirect
    assert start["html"] in vote.text
    assert 'id="new-live-battle" class="button primary" href="/battle"' in vote.text
    assert 'id="next-battle"' not in vote.text  # N on a live battle's reveal starts a live battle


def test_both_panes_advance_at_one_pace_however_fast_each_model_writes(
    make_client: Any, seeded: Engine, fakes: list[FakeOpenAI]
) -> None:
    fakes[1].word_delay_s = 0.03  # 20 words: 0.6 s against nearly nothing
    _register(seeded, fakes[:2])
    client: TestClient = make_client()
    csrf = open_battle_page(client)
    turn = stream_turn(client, "Count for me.", csrf)
    shown: dict[str, list[int]] = {"a": [], "b": []}
    for name, data in turn.events:
        if name == "update":
            shown[data["side"]].append(data["tokens"])
    assert shown["a"] == shown["b"] and len(shown["a"]) >= 2, shown  # one count on both panes, always
    names = [name for name, _ in turn.events]
    first_done = names.index("done")
    assert names[first_done : first_done + 2] == ["done", "done"]  # in one frame: neither finished first
    assert turn.token


def test_a_stalled_model_is_replaced_by_a_free_one(
    make_client: Any, seeded: Engine, fakes: list[FakeOpenAI]
) -> None:
    stalled, steady, spare = fakes
    stalled.delay_s = 3.0
    _register(seeded, [stalled, steady])
    client: TestClient = make_client(live_stall_seconds=0.5)
    csrf = open_battle_page(client)

    def on_start(name: str, _data: dict[str, Any]) -> None:
        if name == "start":  # the spare arrives once the pair is drawn, so the stalled model is in it
            _register(seeded, [spare], (SPARE,))

    began = time.monotonic()
    turn = stream_turn(client, "Hello", csrf, on_event=on_start)
    assert time.monotonic() - began < 2.5  # not the stalled model's 3 s, nor the 120 s total limit
    (reset,) = [data for name, data in turn.events if name == "reset"]
    assert "took too long" in reset["notice"]
    assert turn.ended("a") == turn.ended("b") == "done" and turn.token
    answer = client.post(
        "/api/votes", json={"token": turn.token, "winner": "tie"}, headers={"X-CSRF-Token": csrf}
    )
    assert answer.status_code == 200, answer.text
    assert {answer.json()["model_a"], answer.json()["model_b"]} == {NAMES[1], SPARE}
    with seeded.connect() as conn:
        probability = conn.execute(select(battle_t.c.pair_probability)).scalar_one()
    assert probability is None  # the pair was not the pairing policy's draw
    usage = _usage(seeded)
    assert usage[NAMES[0]][:2] == (1, 1) and usage[NAMES[1]][:2] == usage[SPARE][:2] == (1, 0)


def test_a_stalled_model_without_a_replacement_ends_the_battle_in_seconds(
    make_client: Any, seeded: Engine, fakes: list[FakeOpenAI]
) -> None:
    stalled, steady, _spare = fakes
    stalled.delay_s = 3.0
    _register(seeded, [stalled, steady])
    client: TestClient = make_client(live_stall_seconds=0.5)
    csrf = open_battle_page(client)
    began = time.monotonic()
    turn = stream_turn(client, "Hello", csrf)
    assert time.monotonic() - began < 2.5
    failed = [data for name, data in turn.events if name == "failed"]
    assert len(failed) == 1 and failed[0]["message"] == "This model took too long to answer."
    assert turn.token is None and "without a vote" in turn.end["notice"]
    assert _usage(seeded)[NAMES[0]][:2] == (1, 1)


@pytest.fixture
def site(seeded: Engine, db_url: str, fakes: list[FakeOpenAI]) -> Iterator[str]:
    _register(seeded, fakes[:2])
    with serve(create_app(make_settings(db_url), engine=seeded, seed=2)) as base:
        yield base


def test_stop_cancels_both_requests_upstream_counts_them_and_ends_the_battle(
    site: str, seeded: Engine, fakes: list[FakeOpenAI]
) -> None:
    with httpx.Client(base_url=site, timeout=30) as client:
        csrf = open_battle_page(client)
        first = stream_turn(client, "Hello", csrf)
        assert first.token
        for fake in fakes[:2]:
            fake.word_delay_s = 0.2  # 20 words: 4 s each
        before = _usage(seeded)
        began = time.monotonic()
        stopped = stream_turn(
            client, "Go on", csrf, token=first.token, on_event=lambda name, _d: name == "update"
        )
        assert stopped.events[-1][0] == "update"
        deadline = time.monotonic() + 3
        while sum(f.cut_short for f in fakes[:2]) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [f.cut_short for f in fakes[:2]] == [1, 1]  # both requests cancelled upstream
        assert time.monotonic() - began < 3.5  # long before their 4 s
        vote = client.post(
            "/api/votes", json={"token": first.token, "winner": "tie"}, headers={"X-CSRF-Token": csrf}
        )
        assert vote.status_code == 409  # the stopped battle takes no vote, not even on its first turn
        page = client.get("/battle")
        assert field_value(page.text, "csrf_token")
    with seeded.connect() as conn:
        assert conn.execute(select(battle_t.c.extra)).scalar_one() == {"ended": "stopped"}
    after = _usage(seeded)
    for name in NAMES:
        generations, failures, tokens = after[name]
        assert (generations, failures) == (before[name][0] + 1, 0)
        assert tokens > before[name][2]  # what was streamed before the stop counts against the budget


def test_a_wait_for_the_endpoint_s_own_slot_is_not_a_stall(
    seeded: Engine, db_url: str, fakes: list[FakeOpenAI]
) -> None:
    """Two battles at once on endpoints that take one request at a time: the second waits longer than the
    stall limit for its slots, and still gets both answers (the model did not stall; the site queued it)."""
    for fake in fakes[:2]:
        fake.word_delay_s = 0.07  # 20 words: 1.3 s a battle, no gap near the stall limit
    register(seeded, [(n, f.base_url, "s") for n, f in zip(NAMES, fakes, strict=False)], max_concurrency=1)
    app = create_app(make_settings(db_url, live_stall_seconds=0.8), engine=seeded, seed=2)

    def battle(base: str) -> str | None:
        with httpx.Client(base_url=base, timeout=30) as client:
            turn = stream_turn(client, "Hello", open_battle_page(client))
            notice: str | None = turn.end["notice"]
            return notice

    with serve(app) as base, ThreadPoolExecutor(2) as pool:  # threads: a browser test's loop may be running
        assert list(pool.map(battle, [base, base])) == [None, None]  # both votable
    assert max(f.max_in_flight for f in fakes[:2]) == 1
    assert all(failures == 0 for _g, failures, _t in _usage(seeded).values())
