"""EndpointClient against a real llama.cpp server of a tiny model, and against faults on purpose."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from arena.llm import (
    Completion,
    EndpointClient,
    EndpointConfig,
    EndpointError,
    EndpointResponseError,
    EndpointUnavailable,
    Message,
)
from tests.fake_openai import FakeOpenAI, serve_fake_openai
from tests.llm_servers import (
    LlamaServer,
    LlamaServers,
    require_llama_server,
    start_llama_server,
    write_tiny_llama,
)

PROMPT: list[Message] = [{"role": "user", "content": "Which answer is better?"}]
FAKE_KEY = "sk-arena-test-0123456789abcdef-do-not-leak"
#: The openai client's first backoff (seconds) and its jitter (it takes off up to 25%).
FIRST_BACKOFF_S = 0.5
JITTER = 0.25
SCHEDULING_SLACK_S = 0.5


def config_for(server: LlamaServer, **overrides: Any) -> EndpointConfig:
    fields: dict[str, Any] = {
        "name": "tiny",
        "base_url": server.base_url,
        "model": server.model_id,
        "temperature": 0.0,
        "max_tokens": 12,
        "json_schema_mode": "json_object",
        "max_retries": 0,
        "timeout_s": 30.0,
    }
    return EndpointConfig(**(fields | overrides))


async def collect(stream: AsyncIterator[str | Completion]) -> tuple[list[str], Completion]:
    deltas: list[str] = []
    async for item in stream:
        if isinstance(item, Completion):
            return deltas, item
        deltas.append(item)
    raise AssertionError("the stream ended without a Completion")


async def complete_once(config: EndpointConfig, messages: list[Message] = PROMPT) -> Completion:
    async with EndpointClient(config) as client:
        return await client.complete(messages)


# --- the real server ---------------------------------------------------------------------------------


def test_complete_reports_text_usage_finish_and_served_model(llm_server: LlamaServer) -> None:
    done = asyncio.run(complete_once(config_for(llm_server, max_tokens=12)))
    assert done.text
    assert done.prompt_tokens is not None and done.prompt_tokens > len("Which answer is better?")
    assert done.completion_tokens == 12  # the tiny model never ends its turn (see tests/llm_servers.py)
    assert done.finish_reason == "length"
    assert done.model == llm_server.model_id
    assert done.endpoint == "tiny"
    assert done.latency_s > 0


def test_stream_yields_several_deltas_then_the_whole_completion(llm_server: LlamaServer) -> None:
    async def run() -> tuple[list[str], Completion]:
        async with EndpointClient(config_for(llm_server, max_tokens=20)) as client:
            return await collect(client.stream(PROMPT))

    deltas, done = asyncio.run(run())
    assert len(deltas) >= 5
    assert done.text == "".join(deltas)
    assert done.finish_reason == "length"
    assert done.model == llm_server.model_id
    assert done.first_token_s is not None and 0 < done.first_token_s <= done.latency_s
    # the same request without streaming gives the same greedy text
    assert asyncio.run(complete_once(config_for(llm_server, max_tokens=20))).text == done.text


VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "winner": {"type": "string", "enum": ["model_a", "model_b", "tie"]},
        "confident": {"type": "boolean"},
    },
    "required": ["winner", "confident"],
    "additionalProperties": False,
}


def test_json_schema_constrains_the_answer(llm_server: LlamaServer) -> None:
    async def run() -> list[Completion]:
        async with EndpointClient(config_for(llm_server, max_tokens=200, temperature=1.0)) as client:
            return [await client.complete(PROMPT, json_schema=VERDICT_SCHEMA) for _ in range(3)]

    for done in asyncio.run(run()):
        verdict = done.json()
        assert set(verdict) == {"winner", "confident"}, done.text
        assert verdict["winner"] in ("model_a", "model_b", "tie")
        assert isinstance(verdict["confident"], bool)
        assert done.finish_reason == "stop"  # the grammar, not max_tokens, ended it

    # without the schema the same model writes bytes that are no JSON at all
    free = asyncio.run(complete_once(config_for(llm_server, max_tokens=30, temperature=1.0)))
    with pytest.raises(ValueError):
        free.json()


def test_seeds_give_different_models_and_a_request_seed_reproduces(
    llm_server: LlamaServer, llm_servers: LlamaServers
) -> None:
    other = llm_servers.get(seed=2)
    greedy_1 = asyncio.run(complete_once(config_for(llm_server, max_tokens=16)))
    greedy_2 = asyncio.run(complete_once(config_for(other, max_tokens=16)))
    assert greedy_1.text != greedy_2.text

    def sampled(seed: int) -> str:
        return asyncio.run(
            complete_once(config_for(llm_server, max_tokens=16, temperature=1.0, seed=seed))
        ).text

    assert sampled(7) == sampled(7)
    assert sampled(7) != sampled(8)


def test_a_server_killed_mid_stream_is_an_error_naming_the_endpoint(tmp_path: Path) -> None:
    require_llama_server()
    model = write_tiny_llama(tmp_path / "victim.gguf", seed=3)
    with start_llama_server(model, model_id="victim", log_dir=tmp_path) as server:

        async def run() -> int:
            seen = 0
            async with EndpointClient(config_for(server, name="victim", max_tokens=4000)) as client:
                async for item in client.stream(PROMPT):
                    assert not isinstance(item, Completion), "the stream finished before the kill"
                    seen += 1
                    if seen == 3:
                        server.kill()
            return seen

        with pytest.raises(EndpointResponseError, match="'victim'.*stream") as caught:
            asyncio.run(run())
    # what was already in the socket buffers still arrives; then the stream breaks short of its end
    broke_after = re.search(r"after (\d+) deltas", str(caught.value))
    assert broke_after is not None
    assert 3 <= int(broke_after.group(1)) < 4000


# --- faults --------------------------------------------------------------------------------------------


def test_a_stream_takes_its_usage_from_the_last_chunk() -> None:
    async def run(config: EndpointConfig) -> tuple[list[str], Completion]:
        async with EndpointClient(config) as client:
            return await collect(client.stream(PROMPT))

    with serve_fake_openai(FakeOpenAI(answer="one two three")) as fake:
        deltas, done = asyncio.run(run(EndpointConfig(name="f", base_url=fake.base_url, model="m")))
    assert deltas == ["one ", "two ", "three"]
    assert (done.text, done.finish_reason, done.prompt_tokens, done.completion_tokens) == (
        "one two three",
        "stop",
        3,
        3,
    )
    assert fake.bodies[0]["stream"] is True
    assert fake.bodies[0]["stream_options"] == {"include_usage": True}


def test_a_stream_that_ends_without_a_finish_reason_is_an_error() -> None:
    async def run(config: EndpointConfig) -> list[str | Completion]:
        async with EndpointClient(config) as client:
            return [item async for item in client.stream(PROMPT)]

    with serve_fake_openai(FakeOpenAI(answer="cut short", stream_finishes=False)) as fake:
        config = EndpointConfig(name="cut", base_url=fake.base_url, model="m")
        with pytest.raises(EndpointResponseError, match="'cut'.*without a finish reason after 2 deltas"):
            asyncio.run(run(config))


def test_a_wrong_port_is_unavailable_after_the_retries() -> None:
    closed = FakeOpenAI()
    with serve_fake_openai(closed):
        url = closed.base_url
    config = EndpointConfig(name="nowhere", base_url=url, model="m", max_retries=1)
    with pytest.raises(EndpointUnavailable, match="'nowhere'.*cannot connect"):
        asyncio.run(complete_once(config))


def test_a_tiny_timeout_gives_up_and_says_so() -> None:
    with serve_fake_openai(FakeOpenAI(delay_s=1.0)) as fake:
        config = EndpointConfig(name="slow", base_url=fake.base_url, model="m", timeout_s=0.1, max_retries=1)
        start = time.monotonic()
        with pytest.raises(EndpointUnavailable, match="'slow'.*timed out"):
            asyncio.run(complete_once(config))
        assert time.monotonic() - start < 1.0 + FIRST_BACKOFF_S  # did not wait for the answers
        assert fake.n_requests == 2


def test_429_and_500_are_retried_with_growing_backoff_then_succeed() -> None:
    with serve_fake_openai(FakeOpenAI(failures=[429, 500, 503])) as fake:
        config = EndpointConfig(name="flaky", base_url=fake.base_url, model="m", max_retries=3)
        done = asyncio.run(complete_once(config))
    assert done.text == "fake answer"
    assert fake.n_requests == 4
    gaps = [b - a for a, b in zip(fake.arrivals, fake.arrivals[1:], strict=False)]
    for attempt, gap in enumerate(gaps):
        backoff = FIRST_BACKOFF_S * 2**attempt
        assert backoff * (1 - JITTER) - 0.01 <= gap <= backoff + SCHEDULING_SLACK_S, gaps


def test_a_retry_after_header_sets_the_wait() -> None:
    with serve_fake_openai(FakeOpenAI(failures=[429, 429], retry_after_ms=50)) as fake:
        config = EndpointConfig(name="limited", base_url=fake.base_url, model="m", max_retries=2)
        asyncio.run(complete_once(config))
    assert fake.n_requests == 3
    assert fake.arrivals[-1] - fake.arrivals[0] < 2 * FIRST_BACKOFF_S * (1 - JITTER)


def test_retries_run_out_with_an_error_naming_the_endpoint_and_status() -> None:
    with serve_fake_openai(FakeOpenAI(failures=[500] * 10, retry_after_ms=10)) as fake:
        config = EndpointConfig(name="broken", base_url=fake.base_url, model="m", max_retries=2)
        with pytest.raises(EndpointResponseError, match="'broken'.*HTTP 500"):
            asyncio.run(complete_once(config))
    assert fake.n_requests == 3


def test_a_client_error_is_not_retried() -> None:
    with serve_fake_openai(FakeOpenAI(failures=[400])) as fake:
        config = EndpointConfig(name="picky", base_url=fake.base_url, model="m", max_retries=3)
        with pytest.raises(EndpointResponseError, match="'picky'.*HTTP 400"):
            asyncio.run(complete_once(config))
    assert fake.n_requests == 1


def test_the_request_carries_the_configured_parameters() -> None:
    with serve_fake_openai(FakeOpenAI()) as fake:
        config = EndpointConfig(
            name="params",
            base_url=fake.base_url,
            model="served-id",
            temperature=0.3,
            max_tokens=77,
            seed=5,
            system_prompt="Be brief.",
            extra_params={"top_k": 20},
        )
        done = asyncio.run(complete_once(config))
        asyncio.run(complete_once(config, [{"role": "system", "content": "Own."}, *PROMPT]))
    first, second = fake.bodies
    assert first["model"] == "served-id"
    assert first["messages"] == [{"role": "system", "content": "Be brief."}, *PROMPT]
    assert (first["temperature"], first["max_tokens"], first["seed"], first["top_k"]) == (0.3, 77, 5, 20)
    assert second["messages"][0] == {"role": "system", "content": "Own."}  # a conversation's own wins
    assert (done.prompt_tokens, done.completion_tokens, done.model) == (3, 2, "served-id")
    assert fake.authorizations[0] == "Bearer no-key"


def test_the_api_key_is_sent_but_never_logged_or_put_in_an_error(caplog: pytest.LogCaptureFixture) -> None:
    environ = {"ARENA_TEST_LLM_KEY": FAKE_KEY}
    errors: list[BaseException] = []

    async def attempt(config: EndpointConfig) -> None:
        try:
            async with EndpointClient(config, environ=environ) as client:
                await client.complete(PROMPT)
                async for _ in client.stream(PROMPT):
                    pass
        except EndpointError as exc:
            errors.append(exc)

    caplog.set_level(logging.DEBUG)
    with (
        serve_fake_openai(FakeOpenAI()) as good,
        serve_fake_openai(FakeOpenAI(failures=[500] * 5, retry_after_ms=10)) as bad,
        serve_fake_openai(FakeOpenAI(delay_s=0.5)) as slow,
    ):
        common: dict[str, Any] = {"model": "m", "api_key_env": "ARENA_TEST_LLM_KEY", "max_retries": 1}
        asyncio.run(attempt(EndpointConfig(name="good", base_url=good.base_url, **common)))
        asyncio.run(attempt(EndpointConfig(name="bad", base_url=bad.base_url, **common)))
        asyncio.run(attempt(EndpointConfig(name="slow", base_url=slow.base_url, timeout_s=0.05, **common)))
    asyncio.run(attempt(EndpointConfig(name="gone", base_url=good.base_url, **common)))
    with pytest.raises(EndpointError) as missing:
        EndpointClient(
            EndpointConfig(name="unset", base_url="http://x/v1", model="m", api_key_env="NOT_SET_ANY")
        )

    assert good.authorizations and set(good.authorizations) == {f"Bearer {FAKE_KEY}"}  # it was used
    assert [e.endpoint for e in errors if isinstance(e, EndpointError)] == ["bad", "slow", "gone"]
    texts = [str(missing.value), repr(missing.value)]
    for exc in errors:
        link: BaseException | None = exc
        while link is not None:
            texts += [str(link), repr(link)]
            link = link.__cause__ or link.__context__
    texts += [record.getMessage() for record in caplog.records]
    texts += [repr(record.args) for record in caplog.records]
    assert caplog.records, "no log records were captured: the check would be empty"
    assert not [t for t in texts if FAKE_KEY in t]
    assert "NOT_SET_ANY" in str(missing.value)


def test_requests_in_flight_overlap_up_to_the_bound() -> None:
    delay = 0.5

    async def burst(config: EndpointConfig, n: int) -> float:
        async with EndpointClient(config) as client:
            start = time.monotonic()
            await asyncio.gather(*(client.complete(PROMPT) for _ in range(n)))
            return time.monotonic() - start

    with serve_fake_openai(FakeOpenAI(delay_s=delay)) as fake:
        config = EndpointConfig(name="slow", base_url=fake.base_url, model="m", max_concurrency=8)
        elapsed = asyncio.run(burst(config, 8))
    assert fake.max_in_flight == 8
    assert elapsed < 2 * delay  # about one request's time, not eight

    with serve_fake_openai(FakeOpenAI(delay_s=delay)) as fake:
        config = EndpointConfig(name="slow", base_url=fake.base_url, model="m", max_concurrency=2)
        elapsed = asyncio.run(burst(config, 6))
    assert fake.max_in_flight == 2
    assert elapsed >= 3 * delay
