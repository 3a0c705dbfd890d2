"""Every shape of battle file, malformed, on every command that reads one: one line naming the file, the
line and the reason (and, for a bad row, the option that skips such rows), exit code non-zero, nothing
written, no traceback; a missing file likewise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from arena.cli.main import build_app
from votes.db import make_engine
from votes.migrate import upgrade_database
from votes.tables import vote_t

MODELS = ("m1", "m2", "m3", "m4")


def _valid(shape: str, k: int) -> dict[str, Any]:
    a, b = MODELS[k % 4], MODELS[(k + 1 + k // 4 % 3) % 4]
    if shape == "clean-battle":
        return {"model_a": a, "model_b": b, "winner": ["model_a", "model_b", "tie"][k % 3]}
    if shape == "hf-preference":
        hot = [int(k % 3 == i) for i in range(3)]
        return {
            "model_a": a,
            "model_b": b,
            "prompt": json.dumps([f"q{k}"]),
            "response_a": json.dumps(["r"]),
            "response_b": json.dumps(["s"]),
            "winner_model_a": hot[0],
            "winner_model_b": hot[1],
            "winner_tie": hot[2],
        }
    if shape == "mt-bench-pairwise":
        verdicts = ["model_1", "model_2", "tie"]
        return {
            "question_id": k,
            "model_1": a,
            "model_2": b,
            "g1_winner": verdicts[k % 3],
            "g2_winner": verdicts[(k + 1) % 3],
            "judge": ["gpt-4", "pair-v2"],
            "turn": 1,
        }
    if shape == "arena-hard":
        scores = ["A>B", "B>>A", "A=B", "B>A"]
        return {
            "uid": f"u{k}",
            "model": MODELS[1 + k % 3],
            "baseline": "m1",
            "judge": "gpt-4",
            "games": [{"score": scores[k % 4]}, {"score": scores[(k + 1) % 4]}],
        }
    return {
        "instruction": f"i{k}",
        "output_1": "x",
        "output_2": "y",
        "generator_1": a,
        "generator_2": b,
        "preference": [1.0, 2.0, 1.5, 1.25][k % 4],
    }


#: One malformed row per shape and what the error says about it.
BAD: dict[str, tuple[dict[str, Any], str]] = {
    "clean-battle": ({"winner": "left"}, "unknown winner 'left'"),
    "hf-preference": ({"winner_model_a": 1, "winner_model_b": 1, "winner_tie": 0}, "exactly one of"),
    "mt-bench-pairwise": ({"g1_winner": "bogus"}, "bogus"),
    "arena-hard": ({"games": [{"score": "A>>>B"}, {"score": "A>B"}]}, "A>>>B"),
    "alpaca-eval": ({"preference": 3.0}, "preference"),
}


def _file(tmp_path: Path, shape: str) -> Path:
    rows = [_valid(shape, k) for k in range(40)]
    rows[17] = {**rows[17], **BAD[shape][0]}
    path = tmp_path / f"{shape}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _check(result: Any, name: str, needle: str) -> None:
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    line = next((ln for ln in result.output.splitlines() if f"{name}:" in ln), "")
    assert needle in line, result.output


@pytest.mark.parametrize("shape", sorted(BAD))
def test_a_malformed_row_of_each_shape_is_named_by_every_command(shape: str, tmp_path: Path) -> None:
    path = _file(tmp_path, shape)
    url = f"sqlite:///{tmp_path}/arena.db"
    upgrade_database(url)
    runner = CliRunner()
    for args in (
        ["import", str(path), "--database-url", url],
        ["recompute", "--from", str(path), "--out", str(tmp_path / "o"), "--bootstrap", "0", "--no-plots"],
        ["evaluate", "--from", str(path), "--rounds", "20"],
        ["convert", str(path), "--out", str(tmp_path / "c.jsonl")],
    ):
        result = runner.invoke(build_app(), args)
        _check(result, path.name, "line 18:")
        assert BAD[shape][1] in result.output, (args, result.output)
        _check(result, path.name, "use --skip-invalid to skip such rows")  # what to do, on the same line
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(vote_t.select()).first() is None  # all or nothing
    finally:
        engine.dispose()
    assert not (tmp_path / "o").exists()
    # and with --skip-invalid the other rows are fitted, the bad one reported
    ok = runner.invoke(
        build_app(),
        [
            "recompute",
            "--from",
            str(path),
            "--skip-invalid",
            "--out",
            str(tmp_path / "o"),
            "--bootstrap",
            "0",
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert "1 of 40 rows refused" in ok.output


def test_a_missing_file_is_one_clear_line_on_every_command(tmp_path: Path) -> None:
    absent = tmp_path / "absent.jsonl"
    url = f"sqlite:///{tmp_path}/arena.db"
    upgrade_database(url)
    runner = CliRunner()
    for args in (
        ["import", str(absent), "--database-url", url],
        ["recompute", "--from", str(absent), "--out", str(tmp_path / "o")],
        ["evaluate", "--from", str(absent)],
        ["convert", str(absent), "--out", str(tmp_path / "c.jsonl")],
    ):
        result = runner.invoke(build_app(), args)
        assert result.exit_code != 0, (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), args
        assert "Traceback" not in result.output
        assert "absent.jsonl" in result.output and (
            "no such file" in result.output or "does not exist" in result.output
        ), (args, result.output)


def test_only_a_bad_row_is_answered_with_skip_invalid(tmp_path: Path) -> None:
    """A file no option can read (invalid JSON), a catalog's bad row (catalogs are all or nothing) and a
    command without the option (agreement) name the file, line and reason, and do not offer it."""
    broken = tmp_path / "broken.jsonl"
    broken.write_text(
        '{"model_a": "m1", "model_b": "m2", "winner": "model_a"}\n{"model_a": \n', encoding="utf-8"
    )
    catalog = tmp_path / "catalog.jsonl"
    catalog.write_text('{"prompt_id": "p1", "prompt": "Hi", "model": "m1"}\n', encoding="utf-8")
    bad_row = _file(tmp_path, "clean-battle")
    url = f"sqlite:///{tmp_path}/arena.db"
    upgrade_database(url)
    runner = CliRunner()
    for args, name, where in (
        (["import", str(broken), "--database-url", url], broken.name, "line 2: invalid JSON"),
        (
            ["recompute", "--from", str(broken), "--out", str(tmp_path / "o")],
            broken.name,
            "line 2: invalid JSON",
        ),
        (["import", str(catalog), "--database-url", url], catalog.name, "line 1:"),
        (["agreement", "--from", str(bad_row)], bad_row.name, "line 18: unknown winner 'left'"),
    ):
        result = runner.invoke(build_app(), args)
        _check(result, name, where)
        assert "--skip-invalid" not in result.output, (args, result.output)


def test_an_empty_file_says_it_is_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    for args in (
        ["recompute", "--from", str(empty), "--out", str(tmp_path / "o")],
        ["evaluate", "--from", str(empty)],
    ):
        result = CliRunner().invoke(build_app(), args)
        _check(result, empty.name, "it holds no rows")
