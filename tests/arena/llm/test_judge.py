"""`arena judge` against a real llama.cpp judge: both orders, raw text and template hash stored, votes of
judge:<name> kept out of live standings and default boards, and a board of the judge alone."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from sqlalchemy import text
from typer.testing import CliRunner

from arena.cli.main import app
from arena.llm.judging import BUILTIN_TEMPLATES, parse_verdict
from tests.llm_servers import LlamaServers
from votes.db import make_engine

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    out = result.output
    try:
        out += result.stderr
    except ValueError:
        pass
    return result.exit_code, out


def rows(url: str, sql: str) -> list[tuple[object, ...]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql)).all()]
    finally:
        engine.dispose()


def test_parse_verdict_json_free_text_and_refusals() -> None:
    hard, mt = BUILTIN_TEMPLATES["arena-hard"], BUILTIN_TEMPLATES["mt-bench"]
    assert parse_verdict('{"verdict": "B>>A"}', hard) == "B>>A"
    assert parse_verdict("A is better overall. [[A>B]]", hard) == "A>B"
    assert parse_verdict("Both fine: [[C]]", mt) == "tie"
    assert parse_verdict("[[A]] or maybe [[B]]", mt) is None  # ambiguous: never guessed
    assert parse_verdict("no verdict here", hard) is None
    assert parse_verdict('{"verdict": "A>>B"}', mt) is None  # not a label of this style


def test_judge_both_orders_votes_and_boards(llm_servers: LlamaServers, tmp_path: Path) -> None:
    answerers = [llm_servers.get(seed=1), llm_servers.get(seed=2)]
    judge = llm_servers.get(seed=3)
    url = f"sqlite:///{tmp_path}/arena.db"
    with (tmp_path / "p.jsonl").open("w") as handle:
        for i in range(6):
            handle.write(json.dumps({"prompt_id": f"p{i}", "prompt": f"Tell me about {i}."}) + "\n")
    assert run("import", str(tmp_path / "p.jsonl"), "--database-url", url)[0] == 0
    for name, server in (("a", answerers[0]), ("b", answerers[1]), ("c", answerers[0])):
        code, out = run(
            "models", "add", name, "--base-url", server.base_url, "--model", server.model_id,
            "--param", "max_tokens=12", "--param", f"seed={ord(name)}", "--param", "temperature=1.0",
            "--database-url", url,
        )  # fmt: skip
        assert code == 0, out
    code, out = run("generate", "--quiet", "--database-url", url)
    assert code == 0, out
    # Registered as the docs' quick start does: nothing said of the server's JSON mode.
    code, out = run(
        "models", "add", "J", "--base-url", judge.base_url, "--model", judge.model_id, "--role", "judge",
        "--param", "max_tokens=40", "--database-url", url,
    )  # fmt: skip
    assert code == 0, out

    code, out = run("judge", "--judge", "J", "--baseline", "a", "--quiet", "--database-url", url)
    assert code == 0, out
    assert "24 ordered pair(s)" in out  # 6 prompts x (b, c vs a) x 2 orders
    # llama-cpp-python's server refuses OpenAI's json_schema form (an HTTP 500): said once, in one line,
    # the run judged in the form it takes, and the endpoint remembers it.
    said = [line for line in out.splitlines() if "the server refused" in line]
    assert len(said) == 1 and "json_schema (HTTP 500" in said[0] and "judged with json_object" in said[0], out
    assert "Traceback" not in out and 'File "' not in out, out
    assert rows(url, "SELECT params FROM modelendpoint WHERE name = 'J'")[0][0] == (
        '{"max_tokens": 40, "json_schema_mode": "json_object"}'
    )
    assert "position consistency" in out and "position term (bt-position)" in out
    judged = rows(
        url, "SELECT output_a_id, output_b_id, verdict, raw_text, template_sha256, n_votes FROM judgment"
    )
    assert len(judged) == 24
    pairs = {(a, b) for a, b, *_ in judged}
    assert all((b, a) in pairs for a, b in pairs)  # both orders of every pair
    sha = BUILTIN_TEMPLATES["arena-hard"].sha256
    assert all(r[4] == sha and r[3] for r in judged)
    # The JSON grammar makes every verdict parseable; each parsed verdict is one vote (weight 1).
    assert all(r[2] in BUILTIN_TEMPLATES["arena-hard"].verdicts for r in judged)
    n_votes = sum(int(str(r[5])) for r in judged)
    assert rows(url, "SELECT count(*) FROM vote")[0][0] == n_votes == 24
    assert rows(
        url, "SELECT DISTINCT a.label, a.kind FROM vote v JOIN annotator a ON a.id = v.annotator_id"
    ) == [("judge:J", "judge")]
    assert rows(url, "SELECT count(*) FROM liverating") == [(0,)]  # live standings stay human-only

    code, out = run("judge", "--judge", "J", "--quiet", "--database-url", url)  # all pairs: only b-c is new
    assert code == 0 and "12 ordered pair(s)" in out, out
    assert "the server refused" not in out  # the stored mode is asked first now

    board = tmp_path / "judge-board"
    code, out = run(
        "recompute", "--out", str(board), "--annotators", "judge:J", "--bootstrap", "10", "--no-plots",
        "--database-url", url,
    )  # fmt: skip
    assert code == 0, out
    ranked = json.loads((board / "leaderboard.json").read_text())
    assert ranked
    code, out = run("recompute", "--out", str(tmp_path / "humans"), "--bootstrap", "10", "--no-plots",
                    "--database-url", url)  # fmt: skip
    assert code != 0  # no human votes: the judge's votes do not silently fill a human board


def test_a_dead_judge_endpoint_fails_at_once_in_one_line(tmp_path: Path) -> None:
    """Nothing listens on the judge's port: the first request fails, the run stops there with one line
    naming the endpoint, and no pair is judged or counted as failed one by one."""
    url = f"sqlite:///{tmp_path}/arena.db"
    catalog = tmp_path / "c.jsonl"
    catalog.write_text(
        "".join(
            json.dumps({"prompt_id": f"p{i}", "prompt": f"Q{i}", "model": m, "output": f"{m} says {i}"})
            + "\n"
            for i in range(5)
            for m in ("a", "b")
        )
    )
    assert run("import", str(catalog), "--database-url", url)[0] == 0
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, out = run(
        "models", "add", "J", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "j", "--role", "judge",
        "--param", "max_retries=0", "--database-url", url,
    )  # fmt: skip
    assert code == 0, out
    started = time.monotonic()
    code, out = run("judge", "--judge", "J", "--quiet", "--database-url", url)
    assert code == 1, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(set(errors)) == 1 and "'J'" in errors[0] and "cannot connect" in errors[0], out
    assert "failed:" not in out and "Traceback" not in out, out
    assert time.monotonic() - started < 30
    assert rows(url, "SELECT count(*) FROM judgment") == [(0,)]
