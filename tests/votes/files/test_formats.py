"""Battle files in other projects' shapes: each mapped to battles with weights and sides, bad rows named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from leaderboard.bt.fit import fit_bt
from leaderboard.data import Outcome
from votes.files.columns import read_battles
from votes.files.formats import STRONG_WEIGHT, detect_source_format
from votes.files.records import InputError
from votes.files.selection import BattleFilter

RATING_TOL = 1e-6


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _decoded(
    read_models: tuple[str, ...], a: np.ndarray, b: np.ndarray, o: np.ndarray
) -> list[tuple[str, str, int]]:
    return [(read_models[i], read_models[j], int(k)) for i, j, k in zip(a, b, o, strict=True)]


def test_mt_bench_pairwise_gives_two_games_the_second_swapped(tmp_path: Path) -> None:
    rows = [
        {
            "question_id": 81,
            "model_1": "alpha",
            "model_2": "beta",
            "g1_winner": "model_1",
            "g2_winner": "model_1",
            "judge": ["gpt-4", "pair-v2"],
            "turn": 1,
        },
        {
            "question_id": 82,
            "model_1": "alpha",
            "model_2": "gamma",
            "g1_winner": "model_2",
            "g2_winner": "tie",
            "judge": ["gpt-4", "pair-v2"],
            "turn": 2,
        },
    ]
    read = read_battles(_write_jsonl(tmp_path / "mt.jsonl", rows))
    assert read.source_format == "mt-bench-pairwise"
    b = read.battles
    assert len(b) == 4
    assert _decoded(b.models, b.model_a, b.model_b, b.outcome) == [
        ("alpha", "beta", Outcome.MODEL_A),
        ("beta", "alpha", Outcome.MODEL_B),  # game 2 shows model_2 first; alpha still won
        ("alpha", "gamma", Outcome.MODEL_B),
        ("gamma", "alpha", Outcome.TIE),
    ]
    assert b.weight is None and b.sided is None
    judged = read_battles(tmp_path / "mt.jsonl", filters=BattleFilter(judge="gpt-4/pair-v2"))
    assert len(judged.battles) == 4
    assert len(read_battles(tmp_path / "mt.jsonl", filters=BattleFilter(judge="other")).battles) == 0


def test_mt_bench_error_verdict_is_refused_by_row(tmp_path: Path) -> None:
    rows = [
        {"model_1": "a", "model_2": "b", "g1_winner": "model_1", "g2_winner": "model_2", "judge": ["j"]},
        {"model_1": "a", "model_2": "b", "g1_winner": "error", "g2_winner": "model_2", "judge": ["j"]},
    ]
    path = _write_jsonl(tmp_path / "mt.jsonl", rows)
    with pytest.raises(InputError, match=r"mt.jsonl: line 2: game 1: 'g1_winner' is 'error'"):
        read_battles(path)
    read = read_battles(path, skip_invalid=True)
    assert [(r.where, r.reason.split(":")[0]) for r in read.refused] == [("line 2", "game 1")]
    assert len(read.battles) == 2


def _hard_rows(strong_as_weight: bool) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    scores = ["A>>B", "A>B", "A=B", "B>A", "B>>A"]
    rows: list[dict[str, Any]] = []
    for k in range(60):
        model = ["m1", "m2", "m3"][k % 3]
        games = [{"score": scores[int(rng.integers(0, 5))]}, {"score": scores[int(rng.integers(0, 5))]}]
        rows.append({"uid": f"q{k}", "model": model, "baseline": "base", "judge": "gpt-4", "games": games})
    if strong_as_weight:
        return rows
    # the same verdicts with every strong game written out three times as a plain one
    out: list[dict[str, Any]] = []
    for row in rows:
        for g, game in enumerate(row["games"]):
            plain = game["score"].replace(">>", ">")
            times = 3 if ">>" in game["score"] else 1
            for _ in range(times):
                left, right = ("base", row["model"]) if g == 0 else (row["model"], "base")
                winner = {"A>B": "model_a", "B>A": "model_b", "A=B": "tie"}[plain]
                out.append({"model_a": left, "model_b": right, "winner": winner})
    return out


def test_arena_hard_strong_verdicts_weigh_three_as_if_written_three_times(tmp_path: Path) -> None:
    weighted = read_battles(_write_jsonl(tmp_path / "judgments.jsonl", _hard_rows(True)))
    written = read_battles(_write_jsonl(tmp_path / "written.jsonl", _hard_rows(False)))
    assert weighted.source_format == "arena-hard" and written.source_format == "clean-battle"
    assert weighted.battles.weight is not None
    assert set(np.unique(weighted.battles.weight)) <= {1.0, STRONG_WEIGHT}
    assert len(weighted.battles) == 120
    fit_w = fit_bt(weighted.battles.counts())
    fit_r = fit_bt(written.battles.counts())
    assert fit_w.models == fit_r.models
    np.testing.assert_allclose(fit_w.rating, fit_r.rating, atol=RATING_TOL)


def test_arena_hard_baseline_against_itself_is_a_named_self_battle(tmp_path: Path) -> None:
    rows = _hard_rows(True)[:5]
    rows.append(
        {"uid": "q9", "model": "base", "baseline": "base", "games": [{"score": "A=B"}, {"score": "A=B"}]}
    )
    path = _write_jsonl(tmp_path / "judgments.jsonl", rows)
    with pytest.raises(InputError, match=r"line 6: model 'base' cannot battle itself"):
        read_battles(path)
    read = read_battles(path, skip_invalid=True)
    assert [r.where for r in read.refused] == ["line 6", "line 6"]
    assert len(read.battles) == 10


def test_arena_hard_without_baseline_column_needs_one(tmp_path: Path) -> None:
    rows = [{"question_id": "q1", "model": "m", "games": [{"score": "A>B"}, {"score": "B>A"}]}]
    path = _write_jsonl(tmp_path / "judgments.jsonl", rows)
    with pytest.raises(InputError, match="--baseline"):
        read_battles(path)
    assert len(read_battles(path, baseline="gpt-4-0314").battles) == 2


def test_alpaca_eval_soft_labels_have_weights_and_no_side(tmp_path: Path) -> None:
    rows = [
        {
            "instruction": "hi",
            "output_1": "x",
            "output_2": "y",
            "generator_1": "g1",
            "generator_2": "g2",
            "preference": p,
            "annotator": "weighted_alpaca_eval_gpt4_turbo",
        }
        for p in (1.0, 2.0, 1.25, 1.5)
    ]
    read = read_battles(_write_jsonl(tmp_path / "annotations.json", rows))
    assert read.source_format == "alpaca-eval"
    b = read.battles
    assert b.weight is not None and b.sided is not None
    assert not b.sided.any()
    assert list(b.weight) == [1.0, 1.0, 0.75, 0.25, 0.5, 0.5]
    assert list(b.outcome) == [
        Outcome.MODEL_A,
        Outcome.MODEL_B,
        Outcome.MODEL_A,
        Outcome.MODEL_B,
        Outcome.MODEL_A,
        Outcome.MODEL_B,
    ]


def test_alpaca_eval_preference_out_of_range_is_named(tmp_path: Path) -> None:
    rows = [{"generator_1": "a", "generator_2": "b", "preference": 2.5}]
    with pytest.raises(InputError, match=r"line 1: 'preference' must be a number in \[1, 2\], got 2.5"):
        read_battles(_write_jsonl(tmp_path / "a.jsonl", rows))


def test_hf_preference_one_hot_and_turns(tmp_path: Path) -> None:
    rows = [
        {
            "id": 1,
            "model_a": "a",
            "model_b": "b",
            "prompt": json.dumps(["q1", "q2"]),
            "response_a": json.dumps(["r1", "r2"]),
            "response_b": json.dumps(["s1", "s2"]),
            "winner_model_a": 0,
            "winner_model_b": 1,
            "winner_tie": 0,
        },
        {
            "id": 2,
            "model_a": "b",
            "model_b": "c",
            "prompt": json.dumps(["q"]),
            "response_a": json.dumps(["r"]),
            "response_b": json.dumps(["s"]),
            "winner_model_a": 0,
            "winner_model_b": 0,
            "winner_tie": 1,
        },
    ]
    path = tmp_path / "train.csv"
    import csv

    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    read = read_battles(path)
    assert read.source_format == "hf-preference"
    b = read.battles
    assert _decoded(b.models, b.model_a, b.model_b, b.outcome) == [
        ("a", "b", Outcome.MODEL_B),
        ("b", "c", Outcome.TIE),
    ]
    bad = dict(rows[0], winner_model_a=1)
    _write_jsonl(tmp_path / "bad.jsonl", [rows[1], bad])
    with pytest.raises(InputError, match="line 2: exactly one of winner_model_a"):
        read_battles(tmp_path / "bad.jsonl")


def test_unknown_shape_says_what_it_looks_like(tmp_path: Path) -> None:
    questions = _write_jsonl(tmp_path / "question.jsonl", [{"uid": "q1", "category": "c", "prompt": "p"}])
    with pytest.raises(InputError, match="arena-hard questions"):
        read_battles(questions)
    other = _write_jsonl(tmp_path / "other.jsonl", [{"foo": 1}])
    with pytest.raises(InputError, match=r"other.jsonl: cannot tell which battle format this is"):
        read_battles(other)
    assert (
        detect_source_format([("line 1", {"model_a": "a", "model_b": "b", "winner": "tie"})])
        == "clean-battle"
    )


def test_missing_columns_and_missing_file_are_named(tmp_path: Path) -> None:
    no_model_a = _write_jsonl(tmp_path / "b.jsonl", [{"model_b": "x", "winner": "tie"}])
    with pytest.raises(InputError, match=r"b.jsonl: .*missing column .model_a."):
        read_battles(no_model_a)
    with pytest.raises(InputError, match="no such file"):
        read_battles(tmp_path / "absent.jsonl")


def test_weight_and_sided_columns_of_a_battles_file(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {"model_a": "a", "model_b": "b", "winner": "model_a", "weight": 2.5},
        {"model_a": "b", "model_b": "a", "winner": "model_a", "sided": False},
        {"model_a": "a", "model_b": "b", "winner": "tie"},
    ]
    for name in ("w.jsonl", "w.json"):
        path = tmp_path / name
        if name.endswith(".json"):
            path.write_text(json.dumps(rows), encoding="utf-8")
        else:
            _write_jsonl(path, rows)
        b = read_battles(path).battles
        assert b.weight is not None and list(b.weight) == [2.5, 1.0, 1.0]
        assert b.sided is not None and list(b.sided) == [True, False, True]
    _write_jsonl(tmp_path / "neg.jsonl", [{"model_a": "a", "model_b": "b", "winner": "tie", "weight": -1}])
    with pytest.raises(InputError, match="line 1: 'weight' must be positive"):
        read_battles(tmp_path / "neg.jsonl")


def test_filters_select_models_judges_times_and_anonymous_votes(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    rows = [
        {"model_a": "a", "model_b": "b", "winner": "tie", "anony": True, "judge": "j1", "tstamp": 100.0},
        {"model_a": "a", "model_b": "c", "winner": "tie", "anony": False, "judge": "j1", "tstamp": 200.0},
        {"model_a": "b", "model_b": "c", "winner": "tie", "anony": True, "judge": "j2", "tstamp": 300.0},
        {"model_a": "c", "model_b": "d", "winner": "tie", "judge": "j2", "tstamp": 400.0},
    ]
    path = _write_jsonl(tmp_path / "b.jsonl", rows)

    def n(f: BattleFilter) -> int:
        return len(read_battles(path, filters=f).battles)

    assert n(BattleFilter()) == 4
    assert n(BattleFilter(anony_only=True)) == 2  # a missing anony is not anonymous
    assert n(BattleFilter(models=("a", "b", "c"))) == 3
    assert n(BattleFilter(exclude_models=("a",))) == 2
    assert n(BattleFilter(judge="j2")) == 2
    t = datetime.fromtimestamp(200.0, tz=UTC)
    assert n(BattleFilter(since=t)) == 3
    assert n(BattleFilter(until=t)) == 1
    assert BattleFilter(anony_only=True, models=("a",)).as_metadata()["models"] == ["a"]
