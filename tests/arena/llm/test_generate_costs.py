"""`arena generate --prompt-file` imports a catalog of prompts and answers only those; token costs are
printed after generate and judge, stored with every answer and judgment, and summed by `arena costs`
per model, per judge, per run and in total."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from arena.cli.main import app
from tests.fake_openai import FakeOpenAI, serve_fake_openai

runner = CliRunner()
#: What the fake server reports for every answer (tests/fake_openai.py).
PROMPT_TOKENS, COMPLETION_TOKENS = 3, 2


def run(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args))
    out = result.output
    try:
        out += result.stderr
    except ValueError:
        pass
    assert result.exit_code == code, out
    return out


def prompt_file(path: Path, keys: list[str], category: str = "c") -> Path:
    path.write_text(
        "".join(json.dumps({"prompt_id": k, "prompt": f"Say {k}", "category": category}) + "\n" for k in keys)
    )
    return path


def test_prompt_file_answers_only_its_prompts_and_costs_add_up(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/arena.db"
    run("import", str(prompt_file(tmp_path / "old.jsonl", ["old0", "old1", "old2"])), "--database-url", url)
    with serve_fake_openai(FakeOpenAI()) as fake:
        run("models", "add", "m1", "--base-url", fake.base_url, "--database-url", url)
        run("models", "add", "m2", "--base-url", fake.base_url, "--database-url", url)
        new = prompt_file(tmp_path / "new.csv.jsonl", ["n0", "n1", "n2", "n3"], category="fresh")
        out = run("generate", "--prompt-file", str(new), "--quiet", "--database-url", url)
        assert "4 prompt(s), 4 new in the catalog" in out and "8 answer(s) missing" in out
        assert fake.n_requests == 8  # the three older prompts are not asked
        assert "tokens this run: m1: 4 answers, 12 prompt + 8 completion" in out
        assert "tokens this run, total: 24 prompt + 16 completion" in out
        again = run("generate", "--prompt-file", str(new), "--quiet", "--database-url", url)
        assert "0 new in the catalog" in again and "0 answer(s) missing" in again and fake.n_requests == 8

        # The rest of the catalog in a second run, one model only, one category.
        out = run("generate", "--models", "m1", "--category", "c", "--quiet", "--database-url", url)
        assert "3 answer(s) missing" in out and fake.n_requests == 11
        assert "tokens all runs: m1: 7 answers, 21 prompt + 14 completion" in out

    with serve_fake_openai(FakeOpenAI(answer='{"verdict": "A>B"}')) as judge:
        run("models", "add", "j", "--base-url", judge.base_url, "--role", "judge", "--database-url", url)
        out = run("judge", "--judge", "j", "--quiet", "--database-url", url)
        # 4 prompts with two answers: 4 pairs in both orders.
        assert judge.n_requests == 8
        assert "tokens this run: j: 8 judging, 24 prompt + 16 completion" in out

    report = json.loads(run("costs", "--json", "--database-url", url))
    rows = {(r["kind"], r["name"]): r for r in report["rows"]}
    assert {k: (r["n"], r["prompt_tokens"], r["completion_tokens"]) for k, r in rows.items()} == {
        ("answers", "m1"): (7, 21, 14),
        ("answers", "m2"): (4, 12, 8),
        ("judging", "j"): (8, 24, 16),
    }
    assert report["totals"] == {
        "answers": {"n": 11, "prompt_tokens": 33, "completion_tokens": 22},
        "judging": {"n": 8, "prompt_tokens": 24, "completion_tokens": 16},
    }
    by_run = json.loads(run("costs", "--json", "--by-run", "--kind", "answers", "--database-url", url))
    m1_runs = [(r["n"], r["prompt_tokens"]) for r in by_run["rows"] if r["name"] == "m1"]
    assert m1_runs == [(4, 12), (3, 9)]  # oldest run first
    text = run("costs", "--names", "m2", "--database-url", url)
    assert "m2" in text and "m1" not in text
    assert "total answers: 4 rows, 12 prompt + 8 completion tokens" in text
    run("costs", "--kind", "nothing", "--database-url", url, code=2)


def test_a_bad_prompt_file_names_file_and_line_and_imports_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/arena.db"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt_id": "a", "prompt": "fine"}) + "\n{not json\n")
    with serve_fake_openai(FakeOpenAI()) as fake:
        run("models", "add", "m", "--base-url", fake.base_url, "--database-url", url)
        out = run("generate", "--prompt-file", str(bad), "--quiet", "--database-url", url, code=2)
        assert "bad.jsonl: line 2: invalid JSON" in out
        assert fake.n_requests == 0
    assert "0 answer(s) missing" in run("generate", "--quiet", "--database-url", url)  # "a" was not kept
    assert run("generate", "--prompt-file", str(tmp_path / "absent.jsonl"), "--database-url", url, code=2)
