"""`arena generate` when things break: the llama.cpp server killed mid-run, a tiny timeout, a wrong port,
and a server answering 429 then 500. Each run ends with its failures listed (naming the endpoint, never
the key), keeps every answer already written, and a rerun asks only for what is missing."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from arena.cli.main import app
from tests.arena.llm.test_generate import scalar, settled_requests, write_prompts
from tests.fake_openai import FakeOpenAI, serve_fake_openai
from tests.llm_servers import (
    LlamaServer,
    LlamaServers,
    require_llama_server,
    start_llama_server,
    write_tiny_llama,
)
from tests.script_modules import load_script

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()
SECRET = "sk-arena-fault-test-5e9b1c3d7a-never-print"
#: The openai client's first backoff (seconds) and its jitter (it takes off up to 25%).
FIRST_BACKOFF_S = 0.5
JITTER = 0.25
SCHEDULING_SLACK_S = 0.5
START_TIMEOUT_S = 120.0  # a loaded machine


def arena(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=env)
    out = result.output
    try:
        out += result.stderr
    except ValueError:
        pass
    return result.exit_code, out


def add_model(url: str, name: str, base_url: str, *params: str, extra: tuple[str, ...] = ()) -> None:
    args = ["models", "add", name, "--base-url", base_url, *extra, "--database-url", url]
    for p in params:
        args += ["--param", p]
    code, out = arena(*args)
    assert code == 0, out


def failure_lines(out: str) -> list[tuple[int, str]]:
    """The grouped failure lines of a run's output, each once: (how many failed so, the line)."""
    lines = dict.fromkeys(out.splitlines())  # the runner's output repeats standard error
    found = [re.match(r"(\d+) of \d+ requests failed: ", line) for line in lines]
    return [(int(m.group(1)), m.string) for m in found if m is not None]


def test_the_server_killed_mid_run_then_a_rerun_does_only_the_missing(tmp_path: Path) -> None:
    require_llama_server()
    n_prompts = 40
    url = f"sqlite:///{tmp_path}/arena.db"
    assert arena("import", str(write_prompts(tmp_path / "p.jsonl", n_prompts)), "--database-url", url)[0] == 0
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=11)
    log = tmp_path / "first-run.log"
    with start_llama_server(
        model, model_id="tiny-11", log_dir=tmp_path, start_timeout_s=START_TIMEOUT_S
    ) as s:
        add_model(url, "tiny", s.base_url, "max_tokens=48", "max_concurrency=2", "max_retries=0",
                  extra=("--model", s.model_id))  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with log.open("wb") as sink:
            run = subprocess.Popen(  # noqa: S603
                [sys.executable, "-m", "arena.cli.main", "generate", "--quiet", "--database-url", url],
                env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while scalar(url, "SELECT count(*) FROM output") < 5:
                assert run.poll() is None, log.read_text()
                assert time.monotonic() < deadline
                time.sleep(0.02)
            s.kill()  # the endpoint dies under the run
            code = run.wait(timeout=120)
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
    text = log.read_text()
    stored = scalar(url, "SELECT count(*) FROM output")
    assert code == 1, text
    assert 5 <= stored < n_prompts
    assert f"{stored} stored" in text and f"{n_prompts - stored} failed" in text
    # One line per distinct reason, each counting its failed answers; the endpoint given up is asked
    # nothing more, its other answers failing with the same reason.
    failures = failure_lines(text)
    assert sum(n for n, _ in failures) == n_prompts - stored, text
    assert all(f"endpoint 'tiny': {s.base_url}" in line for _, line in failures), failures
    assert scalar(url, "SELECT count(*) FROM generation") == stored  # nothing half-written

    with start_llama_server(
        model, model_id="tiny-11", log_dir=tmp_path, start_timeout_s=START_TIMEOUT_S
    ) as again:
        add_model(url, "tiny", again.base_url, "max_tokens=48", "max_concurrency=2",
                  extra=("--model", again.model_id, "--replace"))  # fmt: skip
        code, out = arena("generate", "--quiet", "--database-url", url)
        assert code == 0, out
        assert f"{n_prompts - stored} answer(s) missing" in out
        assert settled_requests([again]) == n_prompts - stored  # only the missing ones were asked
    assert scalar(url, "SELECT count(*) FROM output") == n_prompts
    assert scalar(url, "SELECT count(DISTINCT prompt_id) FROM output") == n_prompts
    assert scalar(url, "SELECT count(*) FROM generation") == n_prompts


def test_a_tiny_timeout_names_the_endpoint_not_the_key(llm_server: LlamaServer, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/arena.db"
    assert arena("import", str(write_prompts(tmp_path / "p.jsonl", 2)), "--database-url", url)[0] == 0
    add_model(url, "hasty", llm_server.base_url, "max_tokens=512", "timeout_s=0.05", "max_retries=0",
              extra=("--model", llm_server.model_id, "--api-key-env", "ARENA_FAULT_KEY"))  # fmt: skip
    start = time.monotonic()
    code, out = arena("generate", "--quiet", "--database-url", url, env={"ARENA_FAULT_KEY": SECRET})
    assert code == 1, out
    assert time.monotonic() - start < 10  # gave up, did not wait for 512 tokens twice
    assert "2 failed" in out and "timed out" in out
    assert [n for n, line in failure_lines(out) if "endpoint 'hasty'" in line and "hasty on p0" in line] == [
        2
    ]
    assert SECRET not in out
    assert scalar(url, "SELECT count(*) FROM output") == 0


def test_a_wrong_port_fails_its_answers_and_spares_the_others(
    llm_servers: LlamaServers, tmp_path: Path
) -> None:
    server = llm_servers.get(seed=1)
    url = f"sqlite:///{tmp_path}/arena.db"
    assert arena("import", str(write_prompts(tmp_path / "p.jsonl", 3)), "--database-url", url)[0] == 0
    add_model(url, "good", server.base_url, "max_tokens=8", extra=("--model", server.model_id))
    port = load_script("_bench_common").free_port()  # nothing listens there
    add_model(url, "lost", f"http://127.0.0.1:{port}/v1", "max_retries=1",
              extra=("--model", server.model_id, "--api-key-env", "ARENA_FAULT_KEY"))  # fmt: skip
    code, out = arena("generate", "--quiet", "--database-url", url, env={"ARENA_FAULT_KEY": SECRET})
    assert code == 1, out
    assert "3 stored" in out and "3 failed" in out
    (lost,) = failure_lines(out)
    assert lost[0] == 3 and f"endpoint 'lost': http://127.0.0.1:{port}/v1" in lost[1], out
    assert "cannot connect after 1" in lost[1] and "(lost on p0, lost on p1, lost on p2)" in lost[1]
    assert SECRET not in out
    assert (
        scalar(url, "SELECT count(*) FROM output o JOIN model m ON m.id = o.model_id WHERE m.name = 'good'")
        == 3
    )
    assert "3 answer(s) missing from 2 model(s)" in arena("generate", "--quiet", "--database-url", url)[1]


def test_429_then_500_are_retried_with_backoff_then_the_last_error_is_listed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/arena.db"
    assert arena("import", str(write_prompts(tmp_path / "p.jsonl", 1)), "--database-url", url)[0] == 0
    with serve_fake_openai(FakeOpenAI(failures=[429, 500])) as flaky:
        add_model(url, "flaky", flaky.base_url, "max_retries=2")
        code, out = arena("generate", "--quiet", "--database-url", url)
        assert code == 0, out
        assert flaky.n_requests == 3 and "1 stored" in out
        gaps = [b - a for a, b in zip(flaky.arrivals, flaky.arrivals[1:], strict=False)]
        for attempt, gap in enumerate(gaps):  # 0.5 s, then 1 s, each less up to a quarter of jitter
            backoff = FIRST_BACKOFF_S * 2**attempt
            assert backoff * (1 - JITTER) - 0.01 <= gap <= backoff + SCHEDULING_SLACK_S, gaps
    with serve_fake_openai(FakeOpenAI(failures=[429, 500, 500, 500])) as broken:
        add_model(url, "broken", broken.base_url, "max_retries=2")
        code, out = arena("generate", "--quiet", "--database-url", url)
        assert code == 1, out
        assert broken.n_requests == 3  # the first try and two retries, then it gives up
        (broken_line,) = failure_lines(out)
        assert "endpoint 'broken'" in broken_line[1] and "HTTP 500" in broken_line[1], out
        assert broken_line[1].endswith("(broken on p0)")
    assert scalar(url, "SELECT count(*) FROM output") == 1  # the flaky one's answer only
