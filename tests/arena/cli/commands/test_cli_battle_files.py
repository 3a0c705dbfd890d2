"""recompute and evaluate on battle files people have: filters, the graph's parts, refused rows, errors."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from typer.testing import CliRunner

from arena.cli.main import build_app

#: The published method and ours are the same maximum-likelihood problem; they differ by solver tolerance.
PUBLIC_TOL_ELO = 0.5


def _fastchat_rows() -> list[dict[str, Any]]:
    """Two arenas that never met (a-models, z-models), anonymous and named votes, one self-battle."""
    rng = np.random.default_rng(11)
    rows: list[dict[str, Any]] = []
    arenas = {"big": (["a1", "a2", "a3", "a4"], [0.0, 0.5, 1.0, 1.6]), "small": (["z1", "z2"], [0.0, 0.3])}
    for name, n_votes in (("big", 900), ("small", 120)):
        models, strength = arenas[name]
        for k in range(n_votes):
            i, j = rng.choice(len(models), size=2, replace=False)
            p = 1.0 / (1.0 + math.exp(-(strength[i] - strength[j])))
            u = rng.random()
            winner = "tie" if u < 0.1 else ("model_a" if u < 0.1 + 0.9 * p else "model_b")
            anony = bool(k % 4 != 0)
            if not anony and rng.random() < 0.5:
                winner = "model_a"  # named votes lean towards the left: the public boards leave them out
            rows.append(
                {
                    "question_id": f"{name}{k}",
                    "model_a": models[i],
                    "model_b": models[j],
                    "winner": winner,
                    "judge": f"user{k % 7}",
                    "anony": anony,
                    "language": "English",
                    "tstamp": 1.7e9 + k,
                }
            )
    rows.insert(5, {"model_a": "a1", "model_b": "a1", "winner": "tie", "anony": False, "judge": "u"})
    return rows


def _public_mle_elo(frame: pd.DataFrame) -> dict[str, float]:
    """The published Chatbot Arena method, from its formula: logistic regression without intercept or
    penalty on rows +ln 10 at model_a and -ln 10 at model_b; a win weighs 2 for the winner's row, a tie
    1 in each direction; rating 400 * coef + 1000 (centred here, as we report it)."""
    models = sorted(set(frame.model_a) | set(frame.model_b))
    index = {m: i for i, m in enumerate(models)}
    x_rows: list[np.ndarray] = []
    y: list[int] = []
    w: list[float] = []
    for model_a, model_b, winner in zip(frame.model_a, frame.model_b, frame.winner, strict=True):
        x = np.zeros(len(models))
        x[index[model_a]] = math.log(10)
        x[index[model_b]] = -math.log(10)
        a_score = {"model_a": 2.0, "model_b": 0.0}.get(str(winner), 1.0)
        for label, weight in ((1, a_score), (0, 2.0 - a_score)):
            if weight > 0:
                x_rows.append(x)
                y.append(label)
                w.append(weight)
    lr = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-10, max_iter=10_000)
    lr.fit(np.array(x_rows), np.array(y), sample_weight=np.array(w))
    coef = lr.coef_[0] - lr.coef_[0].mean()
    return {m: 400.0 * float(coef[index[m]]) + 1000.0 for m in models}


def _ratings(folder: Path) -> dict[str, float]:
    with (folder / "leaderboard.csv").open(encoding="utf-8") as fh:
        return {r["model"]: float(r["rating"]) for r in csv.DictReader(fh)}


def test_anonymous_largest_arena_matches_the_public_method(tmp_path: Path) -> None:
    rows = _fastchat_rows()
    path = tmp_path / "clean_battle.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    runner = CliRunner()
    base = ["recompute", "--from", str(path), "--bootstrap", "0", "--interval", "none", "--no-plots"]
    refused = runner.invoke(build_app(), [*base, "--out", str(tmp_path / "all")])
    assert refused.exit_code == 2
    assert "item 6: model 'a1' cannot battle itself" in refused.output
    parts = runner.invoke(build_app(), [*base, "--anony-only", "--out", str(tmp_path / "parts")])
    assert parts.exit_code == 1
    assert "2 parts never compared" in parts.output and "--largest-component" in parts.output
    result = runner.invoke(
        build_app(), [*base, "--anony-only", "--largest-component", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    ours = _ratings(tmp_path / "out")
    frame = pd.DataFrame(rows)
    anonymous = frame[(frame.anony == True) & frame.model_a.str.startswith("a")]  # noqa: E712
    public = _public_mle_elo(anonymous)
    assert set(ours) == set(public) == {"a1", "a2", "a3", "a4"}
    for model, rating in public.items():
        assert abs(ours[model] - rating) < PUBLIC_TOL_ELO, model
    # the named votes would have moved the board: the filter is not a no-op
    with_named = _public_mle_elo(frame[frame.model_a.str.startswith("a") & (frame.model_a != frame.model_b)])
    assert max(abs(with_named[m] - public[m]) for m in public) > 5 * PUBLIC_TOL_ELO
    meta = json.loads((tmp_path / "out" / "metadata.json").read_text(encoding="utf-8"))
    assert meta["filters"]["anony_only"] is True
    assert meta["filters"]["largest_component"] is True
    each = runner.invoke(
        build_app(), [*base, "--anony-only", "--each-component", "--out", str(tmp_path / "each")]
    )
    assert each.exit_code == 0, each.output
    assert set(_ratings(tmp_path / "each" / "component-1")) == {"a1", "a2", "a3", "a4"}
    assert set(_ratings(tmp_path / "each" / "component-2")) == {"z1", "z2"}


def test_skip_invalid_fits_the_valid_rows_and_lists_exactly_the_bad_ones(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    lines: list[str] = []
    bad_lines: set[int] = set()
    for k in range(400):
        a, b = rng.choice(["m1", "m2", "m3", "m4"], size=2, replace=False)
        row: dict[str, Any] = {
            "model_a": str(a),
            "model_b": str(b),
            "winner": ["model_a", "model_b", "tie"][k % 3],
        }
        if k % 20 == 7:  # 5% bad rows, each bad in its own way
            kind = (k // 20) % 4
            if kind == 0:
                row["winner"] = "left"
            elif kind == 1:
                row["model_b"] = row["model_a"]
            elif kind == 2:
                del row["model_a"]
            else:
                row["weight"] = -2
            bad_lines.add(k + 1)
        lines.append(json.dumps(row))
    path = tmp_path / "battles.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = tmp_path / "refused.csv"
    runner = CliRunner()
    base = ["recompute", "--from", str(path), "--bootstrap", "0", "--interval", "none", "--no-plots"]
    strict = runner.invoke(build_app(), [*base, "--out", str(tmp_path / "strict")])
    assert strict.exit_code == 2 and "line 8" in strict.output
    result = runner.invoke(
        build_app(), [*base, "--skip-invalid", "--report", str(report), "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    assert f"20 of 400 rows refused, listed in {report}" in result.output
    with report.open(encoding="utf-8") as fh:
        listed = list(csv.DictReader(fh))
    assert {int(r["where"].removeprefix("line ")) for r in listed} == bad_lines
    assert len(listed) == len(bad_lines)
    assert all(r["reason"] for r in listed)
    meta = json.loads((tmp_path / "out" / "metadata.json").read_text(encoding="utf-8"))
    assert meta["n_votes"] == 380


def test_every_command_names_the_file_and_reason_without_a_traceback(tmp_path: Path) -> None:
    no_model_a = tmp_path / "no_model_a.jsonl"
    no_model_a.write_text('{"model_b": "x", "winner": "tie"}\n', encoding="utf-8")
    absent = tmp_path / "absent.jsonl"
    runner = CliRunner()
    for args in (
        ["recompute", "--from", str(no_model_a), "--out", str(tmp_path / "o")],
        ["evaluate", "--from", str(no_model_a)],
        ["evaluate", "--from", str(absent)],
        ["evaluate", "--from", str(absent), "--style"],
    ):
        result = runner.invoke(build_app(), args)
        assert result.exit_code == 2, (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), args
        assert "Traceback" not in result.output
        name = "absent.jsonl" if "absent" in args[2] else "no_model_a.jsonl"
        assert f"{name}:" in result.output, result.output
    assert (
        "missing column 'model_a'"
        in runner.invoke(build_app(), ["evaluate", "--from", str(no_model_a)]).output
    )


def test_evaluate_reads_mt_bench_judgments(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    rows = []
    for k in range(120):
        m1, m2 = rng.choice(["a", "b", "c"], size=2, replace=False)
        g = ["model_1", "model_2", "tie"]
        rows.append(
            {
                "question_id": k,
                "model_1": str(m1),
                "model_2": str(m2),
                "g1_winner": g[k % 3],
                "g2_winner": g[(k + 1) % 3],
                "judge": ["gpt-4", "pair-v2"],
                "turn": 1,
            }
        )
    path = tmp_path / "gpt-4_pair.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = CliRunner().invoke(build_app(), ["evaluate", "--from", str(path), "--json"])
    assert result.exit_code == 0, result.output
    table = json.loads(result.output)
    assert {"bt", "bt-position"} <= {r["method"] for r in table}


def _import(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(build_app(), ["import", *args])
    return result.exit_code, result.output


def test_import_skip_invalid_reports_exactly_the_bad_rows_and_again_adds_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'arena.db'}"
    lines: list[str] = []
    bad: set[str] = set()
    for k in range(200):
        row: dict[str, Any] = {
            "question_id": f"q{k}",
            "model_a": "alpha",
            "model_b": "beta",
            "winner": "tie",
            "anony": k % 2 == 0,
        }
        if k % 20 == 3:  # 5% bad
            row["winner"] = "both"
            bad.add(f"line {k + 1}")
        if k % 20 == 13:
            row["model_b"] = "alpha"
            bad.add(f"line {k + 1}")
        lines.append(json.dumps(row))
    path = tmp_path / "battles.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = tmp_path / "refused.csv"
    code, text = _import(str(path), "--database-url", url)
    assert code == 1 and "line 4: unknown winner 'both'" in text and "nothing was imported" in text
    code, text = _import(str(path), "--database-url", url, "--skip-invalid", "--report", str(report))
    assert code == 0, text
    assert "180 added" in text and f"20 rows refused, listed in {report}" in text
    with report.open(encoding="utf-8") as fh:
        listed = list(csv.DictReader(fh))
    assert {r["where"] for r in listed} == bad and len(listed) == 20
    assert any("cannot battle itself" in r["reason"] for r in listed)
    code, text = _import(str(path), "--database-url", url, "--skip-invalid", "--report", str(report))
    assert code == 0 and "0 added, 180 already present" in text
    anony = tmp_path / "anony.jsonl"
    anony.write_text(
        "".join(
            json.dumps({"model_a": "x", "model_b": "y", "winner": "tie", "anony": a}) + "\n"
            for a in (True, False)
        ),
        encoding="utf-8",
    )
    code, text = _import(str(anony), "--database-url", url, "--anony-only")
    assert code == 0 and "1 added" in text and "1 battles left out by the filters" in text


def test_import_mt_bench_and_arena_hard_files(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'arena.db'}"
    mt = tmp_path / "gpt-4_pair.jsonl"
    mt.write_text(
        json.dumps(
            {
                "question_id": 81,
                "model_1": "a",
                "model_2": "b",
                "g1_winner": "model_1",
                "g2_winner": "tie",
                "judge": ["gpt-4", "pair-v2"],
                "turn": 1,
            }
        )
        + "\n",
        encoding="utf-8",
    )
    code, text = _import(str(mt), "--database-url", url)
    assert code == 0, text
    assert "mt-bench-pairwise" in text and "2 added" in text
    questions = tmp_path / "question.jsonl"
    questions.write_text(
        json.dumps({"uid": "u1", "category": "hard", "prompt": "Why?"}) + "\n", encoding="utf-8"
    )
    answers = tmp_path / "answers.jsonl"
    messages = [{"role": "user", "content": "Why?"}, {"role": "assistant", "content": {"answer": "Because."}}]
    answers.write_text(json.dumps({"uid": "u1", "model": "m", "messages": messages}) + "\n", encoding="utf-8")
    code, text = _import(str(questions), str(answers), "--database-url", url)
    assert code == 0, text
    assert "arena-hard questions" in text and "arena-hard answers" in text and "1 outputs" in text
    judgments = tmp_path / "judgments.jsonl"
    judgments.write_text(
        json.dumps(
            {"uid": "u1", "model": "m", "judge": "gpt-4", "games": [{"score": "A>>B"}, {"score": "B>A"}]}
        )
        + "\n",
        encoding="utf-8",
    )
    code, text = _import(str(judgments), "--database-url", url)
    assert code == 1 and "judgments.jsonl: line 1:" in text and "--baseline" in text
    code, text = _import(str(judgments), "--database-url", url, "--baseline", "base")
    assert code == 0 and "2 added" in text, text  # the strong verdict is stored with weight 3
    from sqlalchemy import select

    from votes.db import make_engine
    from votes.tables import vote_t

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            weights = sorted(
                w for (w,) in conn.execute(select(vote_t.c.weight).where(vote_t.c.weight != 1.0))
            )
    finally:
        engine.dispose()
    assert weights == [3.0]
    code, text = _import(str(judgments), "--database-url", url, "--format", "nonsense")
    assert code != 0 and "neither a file format" in text


def test_convert_keeps_weights_and_sides_through_every_file_format(tmp_path: Path) -> None:
    from votes.files.columns import read_battles

    rows = [
        {
            "generator_1": "g1",
            "generator_2": "g2",
            "preference": p,
            "instruction": "i",
            "output_1": "x",
            "output_2": "y",
        }
        for p in (1.0, 1.25, 1.5, 2.0, 1.9)
    ] + [
        {"generator_1": "g2", "generator_2": "g3", "preference": 1.1},
        {"generator_1": "g3", "generator_2": "g1", "preference": 1.7},
    ]
    source = tmp_path / "annotations.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    original = read_battles(source).battles
    assert original.weight is not None and original.sided is not None
    for fmt in ("jsonl", "json", "csv", "parquet"):
        out = tmp_path / f"converted.{fmt}"
        result = CliRunner().invoke(build_app(), ["convert", str(source), "--out", str(out), "--to", fmt])
        assert result.exit_code == 0, result.output
        assert "alpaca-eval" in result.output
        back = read_battles(out)
        assert back.source_format == "clean-battle"
        assert back.battles.models == original.models
        np.testing.assert_array_equal(back.battles.model_a, original.model_a)
        np.testing.assert_array_equal(back.battles.outcome, original.outcome)
        np.testing.assert_array_equal(back.battles.weight, original.weight)
        np.testing.assert_array_equal(back.battles.sided, original.sided)
    again = tmp_path / "again.jsonl"
    CliRunner().invoke(build_app(), ["convert", str(tmp_path / "converted.jsonl"), "--out", str(again)])
    assert again.read_bytes() == (tmp_path / "converted.jsonl").read_bytes()
