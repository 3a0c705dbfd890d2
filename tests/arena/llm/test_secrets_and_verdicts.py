"""The API key is used but never stored, printed, logged or exported; unparseable verdicts are retried,
then recorded as such without a vote; human and judge votes on the same pairs give an agreement table."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from arena.cli.main import app
from tests.fake_openai import FakeOpenAI, serve_fake_openai
from votes.db import make_engine

runner = CliRunner()
SECRET = "sk-test-7d1f0c9e5b3a4f21"


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=env)
    out = result.output
    try:
        out += result.stderr
    except ValueError:
        pass
    return result.exit_code, out


def prompts(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"prompt_id": f"p{i}", "prompt": f"Q{i}"}) + "\n" for i in range(n)))
    return path


def test_the_key_never_leaves_the_request(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"sqlite:///{tmp_path}/arena.db"
    env = {"ARENA_TEST_KEY": SECRET}
    texts = [run("import", str(prompts(tmp_path / "p.jsonl", 3)), "--database-url", url)[1]]
    with serve_fake_openai(FakeOpenAI(failures=[401])) as fake:
        for name, base in (("good", fake.base_url), ("gone", "http://127.0.0.1:9/v1")):
            code, out = run(
                "models", "add", name, "--base-url", base, "--api-key-env", "ARENA_TEST_KEY",
                "--param", "max_retries=0", "--database-url", url, env=env,
            )  # fmt: skip
            assert code == 0, out
            texts.append(out)
        texts.append(run("generate", "--quiet", "--database-url", url, env=env)[1])  # 401 once, refused x3
        texts.append(run("generate", "--quiet", "--database-url", url, env=env)[1])
        texts += [
            run("models", c, *a, "--database-url", url)[1] for c, a in (("list", []), ("show", ["good"]))
        ]
        assert fake.authorizations and all(a == f"Bearer {SECRET}" for a in fake.authorizations)
    assert "401" in texts[3] and "cannot connect" in texts[3]  # the failures are listed with reasons
    for what in ("catalog", "votes"):
        out_file = tmp_path / f"{what}.jsonl"
        assert run("export", what, "--out", str(out_file), "--database-url", url)[0] == 0
        texts.append(out_file.read_text())
    texts += [r.getMessage() for r in caplog.records] + [repr(r.args) for r in caplog.records]
    engine = make_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM generation")).scalar_one() == 3
    engine.dispose()
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("arena.db*"))
    assert b"ARENA_TEST_KEY" in stored  # the variable's name is stored, so the search is not empty
    assert SECRET.encode() not in stored
    assert all(SECRET not in t for t in texts)


def test_unparseable_verdicts_are_retried_then_recorded_without_a_vote(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/arena.db"
    catalog = tmp_path / "c.jsonl"
    catalog.write_text(
        "".join(
            json.dumps({"prompt_id": "p", "prompt": "Q", "model": m, "output": f"answer {m}"}) + "\n"
            for m in "xy"
        )
    )
    assert run("import", str(catalog), "--database-url", url)[0] == 0
    with serve_fake_openai(FakeOpenAI(answer="I cannot decide.")) as fake:
        assert (
            run("models", "add", "J", "--base-url", fake.base_url, "--role", "judge", "--database-url", url)[
                0
            ]
            == 0
        )
        code, out = run("judge", "--judge", "J", "--parse-retries", "2", "--quiet", "--database-url", url)
        assert code == 0, out
        assert fake.n_requests == 2 * 3  # two orders, three attempts each
        assert fake.bodies[0]["response_format"]["type"] == "json_schema"  # structured output asked for
    assert "0 verdicts (0 votes), 2 unparseable" in out
    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT verdict, n_attempts, raw_text, n_votes FROM judgment")).all()
        assert conn.execute(text("SELECT count(*) FROM vote")).scalar_one() == 0
    engine.dispose()
    assert [tuple(r) for r in rows] == [(None, 3, "I cannot decide.", 0)] * 2


def test_agreement_of_humans_and_a_judge(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/arena.db"
    catalog = tmp_path / "c.jsonl"
    catalog.write_text(
        "".join(
            json.dumps({"prompt_id": f"p{i}", "prompt": f"Q{i}", "model": m, "output": f"{m}{i}"}) + "\n"
            for i in range(4)
            for m in ("x", "y", "z")
        )
    )
    battles = tmp_path / "b.jsonl"
    rows = []
    for i in range(4):
        for a, b in (("x", "y"), ("y", "z"), ("x", "z")):
            rows.append(
                {"question_id": f"p{i}", "model_a": a, "model_b": b, "winner": "model_a", "judge": "ann"}
            )
            for first, second, w in ((a, b, "model_a"), (b, a, "model_a" if i % 2 else "model_b")):
                rows.append({"question_id": f"p{i}", "model_a": first, "model_b": second, "winner": w,
                             "judge": "llm-x"})  # fmt: skip
    battles.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for f in (catalog, battles):
        assert run("import", str(f), "--database-url", url)[0] == 0
    code, out = run("agreement", "--json", "--database-url", url)
    assert code == 0, out
    report = json.loads(out)
    (pair,) = report["agreement"]
    assert (pair["first"], pair["second"], pair["n_with_ties"]) == ("humans", "llm-x", 12)
    # The judge is consistent on even prompts (agrees with the humans) and flips with the order on odd
    # ones (a tie after the swap): 6 of 12 agree with ties, 6 of 6 without.
    assert pair["agreement_with_ties"] == 0.5 and pair["agreement_without_ties"] == 1.0
    (judge,) = report["judges"]
    assert judge["position_consistency"] == 0.5 and judge["self_reference"] == "humans"
