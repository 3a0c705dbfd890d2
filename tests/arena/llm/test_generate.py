"""`arena generate` against real llama.cpp servers: fills the catalog, survives kill -9, asks only for
what is missing, stores provenance, lists failures, keeps requests in flight."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from arena.cli.main import app
from arena.llm.client import EndpointClient, EndpointConfig
from arena.llm.generation import GenerationReport, GenerationTask, plan_generation, run_generation
from tests.fake_openai import FakeOpenAI, serve_fake_openai
from tests.llm_servers import LlamaServer, LlamaServers
from votes.db import make_engine
from votes.voting.live_battles import LIVE_SOURCE

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()
N_PROMPTS = 120
#: Answers stored before the first run is killed.
KILL_AFTER = 40


def requests_served(server: LlamaServer) -> int:
    return server.log_path.read_text(encoding="utf-8", errors="replace").count("POST /v1/chat/completions")


def settled_requests(servers: list[LlamaServer]) -> int:
    """The servers' request count once it has stopped moving (requests of a killed client finish)."""
    last = -1
    while True:
        now = sum(requests_served(s) for s in servers)
        if now == last:
            return now
        last = now
        time.sleep(0.3)


def scalar(url: str, sql: str) -> int:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(sql)).scalar_one())
    finally:
        engine.dispose()


def arena(*args: str) -> tuple[int, str]:
    """Run the command in this process (only the run to be killed needs a process of its own)."""
    result = runner.invoke(app, list(args))
    out = result.output
    try:
        out += result.stderr
    except ValueError:
        pass
    return result.exit_code, out


def write_prompts(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            row = {"prompt_id": f"p{i}", "prompt": f"Question {i}: why?", "category": "c" + str(i % 2)}
            out.write(json.dumps(row) + "\n")
    return path


def test_kill_minus_9_then_rerun_asks_only_for_the_missing(llm_servers: LlamaServers, tmp_path: Path) -> None:
    servers = [llm_servers.get(seed=1), llm_servers.get(seed=2)]
    url = f"sqlite:///{tmp_path}/arena.db"
    code, out = arena(
        "import", str(write_prompts(tmp_path / "prompts.jsonl", N_PROMPTS)), "--database-url", url
    )
    assert code == 0, out
    for name, server in zip(("tiny-a", "tiny-b"), servers, strict=True):
        code, out = arena(
            "models", "add", name, "--base-url", server.base_url, "--model", server.model_id,
            "--param", "max_tokens=64", "--param", "max_concurrency=2", "--database-url", url,
        )  # fmt: skip
        assert code == 0, out
    total = 2 * N_PROMPTS

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "arena.cli.main", "generate", "--quiet", "--database-url", url],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while scalar(url, "SELECT count(*) FROM output") < KILL_AFTER:
            assert first.poll() is None, "the first run ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    stored = scalar(url, "SELECT count(*) FROM output")
    assert KILL_AFTER <= stored < total
    # Nothing half-written: every output has its provenance and every provenance its output.
    assert scalar(url, "SELECT count(*) FROM generation") == stored
    before = settled_requests(servers)

    code, out = arena("generate", "--quiet", "--database-url", url)
    assert code == 0, out
    assert f"{total - stored} answer(s) missing" in out
    assert settled_requests(servers) - before == total - stored  # only the missing were requested
    assert scalar(url, "SELECT count(*) FROM output") == total
    assert scalar(url, "SELECT count(DISTINCT prompt_id || '-' || model_id) FROM output") == total
    assert scalar(url, "SELECT count(*) FROM generation") == total
    code, out = arena("generate", "--quiet", "--database-url", url)
    assert code == 0 and "0 answer(s) missing" in out


def test_provenance_multi_turn_and_tokens(llm_server: LlamaServer, seeded_prompts: Engine) -> None:
    engine = seeded_prompts
    config = EndpointConfig(
        name="tiny", base_url=llm_server.base_url, model=llm_server.model_id, max_tokens=8, seed=5
    )
    tasks = plan_generation(engine, models=["tiny"])
    assert len(tasks) == 2

    async def go() -> GenerationReport:
        async with EndpointClient(config) as client:
            return await run_generation(engine, tasks, {"tiny": client}, concurrency=2)

    report = asyncio.run(go())
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT p.external_id, o.text, o.conversation, g.endpoint, g.served_model, g.params,"
                " g.prompt_tokens, g.completion_tokens, g.latency_s, g.finish_reason, g.run_id"
                " FROM generation g JOIN output o ON o.id = g.output_id JOIN prompt p ON p.id = o.prompt_id"
                " ORDER BY p.external_id"
            )
        ).all()
    assert [r[0] for r in rows] == ["multi", "single"]
    multi, single = rows
    conversation = multi[2] if isinstance(multi[2], list) else json.loads(multi[2])
    assert [m["role"] for m in conversation] == ["user", "assistant", "user", "assistant"]
    assert conversation[2]["content"] == "And then?"
    assert multi[7] == 16 and single[7] == 8  # two turns of 8 tokens, one turn of 8
    assert single[2] in (None, "null")  # a single-turn answer keeps no conversation
    params = single[5] if isinstance(single[5], dict) else json.loads(single[5])
    assert params == {"max_tokens": 8, "seed": 5}
    assert (single[3], single[4], single[9]) == ("tiny", llm_server.model_id, "length")
    assert single[8] > 0 and single[10] == report.run_id
    assert plan_generation(engine, models=["tiny"]) == []


@pytest.fixture
def seeded_prompts(tmp_path: Path) -> Engine:
    from sqlmodel import SQLModel

    engine = make_engine(f"sqlite:///{tmp_path}/g.db")
    SQLModel.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO model (name, active, created_at) VALUES ('tiny', 1, '2026-01-01')"))
        conn.execute(
            text(
                "INSERT INTO prompt (external_id, text, conversation, created_at) VALUES"
                " ('single', 'Hello?', NULL, '2026-01-01'),"
                " ('multi', 'Hi\n\nAnd then?', :conv, '2026-01-01')"
            ),
            {
                "conv": json.dumps(
                    [{"role": "user", "content": "Hi"}, {"role": "user", "content": "And then?"}]
                )
            },
        )
    return engine


def test_failures_are_listed_and_requests_overlap(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/arena.db"
    write_prompts(tmp_path / "p.jsonl", 16)
    assert runner.invoke(app, ["import", str(tmp_path / "p.jsonl"), "--database-url", url]).exit_code == 0
    with serve_fake_openai(FakeOpenAI(delay_s=0.5)) as slow:
        code = runner.invoke(
            app, ["models", "add", "slow", "--base-url", slow.base_url, "--param", "max_concurrency=8",
                  "--database-url", url],
        ).exit_code  # fmt: skip
        assert code == 0
        code = runner.invoke(
            app, ["models", "add", "dead", "--base-url", "http://127.0.0.1:9/v1", "--param", "max_retries=0",
                  "--database-url", url],
        ).exit_code  # fmt: skip
        assert code == 0
        result = runner.invoke(app, ["generate", "--quiet", "--concurrency", "8", "--database-url", url])
        # Overlap is shown by the server's own count of requests in flight, not by wall time (the machine
        # is shared; scripts/bench_generate.py measures throughput).
        assert slow.max_in_flight == 8
    assert result.exit_code == 1
    assert "16 stored" in result.output and "16 failed" in result.output
    # One line for the sixteen: the dead endpoint was given up after its first refusal.
    assert "16 of 32 requests failed: endpoint 'dead'" in result.stderr
    assert "(dead on p0, dead on p1, dead on p2 and 13 more)" in result.stderr
    assert scalar(url, "SELECT count(*) FROM output") == 16


def test_samples_are_asked_with_their_own_seeds_and_rerun_asks_only_the_missing(
    llm_server: LlamaServer, seeded_prompts: Engine
) -> None:
    engine = seeded_prompts
    config = EndpointConfig(
        name="tiny",
        base_url=llm_server.base_url,
        model=llm_server.model_id,
        max_tokens=8,
        seed=5,
        temperature=1.0,
    )
    tasks = plan_generation(engine, models=["tiny"], prompt_keys={"single"}, samples=3)
    assert sorted(t.sample for t in tasks) == [0, 1, 2]
    with pytest.raises(ValueError, match="samples"):
        plan_generation(engine, models=["tiny"], samples=17)

    async def go(todo: list[GenerationTask]) -> GenerationReport:
        async with EndpointClient(config) as client:
            return await run_generation(engine, todo, {"tiny": client}, concurrency=2)

    assert asyncio.run(go(tasks[:2])).n_stored == 2
    rest = plan_generation(engine, models=["tiny"], prompt_keys={"single"}, samples=3)
    assert [t.sample for t in rest] == [sorted(t.sample for t in tasks)[2]]
    assert asyncio.run(go(rest)).n_stored == 1
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT o.sample, g.params FROM output o JOIN generation g ON g.output_id = o.id"
                " JOIN prompt p ON p.id = o.prompt_id WHERE p.external_id = 'single' ORDER BY o.sample"
            )
        ).all()
    seeds = [(r[1] if isinstance(r[1], dict) else json.loads(r[1]))["seed"] for r in rows]
    assert [r[0] for r in rows] == [0, 1, 2] and seeds == [5, 6, 7]
    assert plan_generation(engine, models=["tiny"], prompt_keys={"single"}, samples=3) == []


def test_a_live_battle_s_prompt_is_not_planned_for_other_models(seeded_prompts: Engine) -> None:
    """An annotator's own prompt of a live battle was answered there by its two models; `arena generate`
    asks the catalog's prompts only."""
    with seeded_prompts.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO prompt (external_id, text, source, created_at)"
                " VALUES ('typed-in-a-live-battle', 'What is 2+2?', :live, '2026-01-01')"
            ),
            {"live": LIVE_SOURCE},
        )
    planned = {task.prompt_key for task in plan_generation(seeded_prompts, models=["tiny"])}
    assert planned == {"single", "multi"}
