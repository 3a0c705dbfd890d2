"""`arena agreement` on the real LLM-judge verdicts of tests/data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena.cli.main import app
from tests.real_data import DATA, VICUNA_JUDGES
from votes.reads.annotated import family_of, is_judge

runner = CliRunner()


def test_judge_labels_and_families() -> None:
    assert is_judge("judge:tiny") and is_judge("llm-gpt4") and not is_judge("anonymous")
    assert family_of("llm-gpt4") == family_of("gpt35") != family_of("claude")
    assert family_of("judge:claude-3") == family_of("claude") and family_of("tiny-llama-9") is not None


def test_agreement_on_the_real_judge_verdicts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a.db"
    for name in ("vicuna80-catalog.jsonl.gz", "vicuna80-llm-judge-battles.jsonl.gz"):
        assert runner.invoke(app, ["import", str(DATA / name), "--database-url", url]).exit_code == 0
    result = runner.invoke(app, ["agreement", "--json", "--database-url", url])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert len(report["agreement"]) == 6  # four judges, every two
    assert all(p["n_with_ties"] == 800 for p in report["agreement"])  # 80 prompts x 10 pairs
    judges = {r["judge"]: r for r in report["judges"]}
    assert set(judges) == {"llm-gpt4", "llm-gpt35", "llm-claude", "llm-bard"}
    assert sum(r["n_votes"] for r in judges.values()) == 6560
    # The known leanings of this data: Bard favours the first answer strongly, Claude the second.
    assert judges["llm-bard"]["first_win_rate"] > 0.7 and judges["llm-bard"]["position_elo"] > 200
    assert judges["llm-claude"]["position_elo"] < 0
    assert judges["llm-gpt4"]["own_family"] == ["gpt35", "gpt4"]
    # The store adds what the battles file lacks: categories from the catalog, answer lengths
    stats = report["statistics"]
    groups = {g["group"]: g for g in stats["groups"]}
    assert {"all", "category:coding", "category:math", "language:en"} <= set(groups)
    assert sum(g["n_votes"] for name, g in groups.items() if name.startswith("category:")) == 6560
    assert groups["all"]["fleiss_kappa"]["value"] == pytest.approx(0.314, abs=1e-3)  # as from the file
    longer = {a["annotator"]: a["prefer_longer"] for a in stats["annotators"]}
    assert all(0 < v["value"] < 1 and v["low"] < v["value"] < v["high"] for v in longer.values())


def test_agreement_from_the_battles_file_pins_the_judge_table() -> None:
    result = runner.invoke(app, ["agreement", "--json", "--from", str(VICUNA_JUDGES)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    pairs = {(p["first"], p["second"]): p for p in report["agreement"]}
    # judge vs judge on 800 shared comparisons: (agreement w/ ties, kappa w/ ties, n w/o, agreement w/o)
    expected = {
        ("llm-bard", "llm-claude"): (0.4825, 0.227, 232, 0.905),
        ("llm-bard", "llm-gpt35"): (0.4525, 0.254, 281, 0.940),
        ("llm-bard", "llm-gpt4"): (0.4925, 0.290, 278, 0.939),
        ("llm-claude", "llm-gpt35"): (0.595, 0.385, 467, 0.904),
        ("llm-claude", "llm-gpt4"): (0.6225, 0.428, 457, 0.910),
        ("llm-gpt35", "llm-gpt4"): (0.7075, 0.534, 555, 0.924),
    }
    for key, (agree, kappa, n_wo, agree_wo) in expected.items():
        p = pairs[key]
        assert p["agreement_with_ties"] == pytest.approx(agree, abs=1e-3)
        assert p["kappa_with_ties"] == pytest.approx(kappa, abs=1e-3)
        assert p["kappa_with_ties_low"] < p["kappa_with_ties"] < p["kappa_with_ties_high"]
        assert p["n_without_ties"] == n_wo and p["agreement_without_ties"] == pytest.approx(
            agree_wo, abs=1e-3
        )
    stats = report["statistics"]
    first = {a["annotator"]: a["prefer_first"]["value"] for a in stats["annotators"]}
    assert first == pytest.approx(
        {"llm-bard": 0.812, "llm-claude": 0.362, "llm-gpt35": 0.494, "llm-gpt4": 0.624}, abs=1e-3
    )
    everyone = stats["groups"][0]
    assert everyone["group"] == "all" and everyone["n_votes"] == 6560
    assert everyone["fleiss_kappa"]["value"] == pytest.approx(0.314, abs=1e-3)
    assert everyone["krippendorff_alpha_nominal"]["value"] == pytest.approx(0.320, abs=1e-3)
    assert everyone["krippendorff_alpha_interval"]["value"] == pytest.approx(0.388, abs=1e-3)
    assert everyone["gwet_ac1"]["value"] == pytest.approx(0.424, abs=1e-3)


def test_agreement_from_a_bad_file_names_file_and_row(tmp_path: Path) -> None:
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"question_id": "1", "model_a": "x", "model_b": "y", "winner": "model_a"}\n'
                   '{"question_id": "1", "model_a": "x", "model_b": "y", "winner": "banana"}\n')  # fmt: skip
    result = runner.invoke(app, ["agreement", "--from", str(bad)])
    assert result.exit_code == 2 and "b.jsonl" in result.output and "2" in result.output


def test_agreement_from_file_slices_anonymous_votes_and_both_readers(tmp_path: Path) -> None:
    rows = []
    for q in range(30):  # two named humans agree; anonymous rows (no judge) each count as one annotator
        for judge in ("ann", "bob", None):
            winner = "model_a" if (q % 3 or judge is None) else "tie"
            rows.append({"question_id": q, "model_a": "x", "model_b": "y", "winner": winner, "judge": judge,
                         "language": "en" if q < 20 else "fr"})  # fmt: skip
    fast = tmp_path / "fast.jsonl"
    fast.write_text("".join(json.dumps(r) + "\n" for r in rows))
    careful = tmp_path / "careful.jsonl"  # a conversation forces the row-by-row reader
    careful.write_text(
        "".join(
            json.dumps({**r, "conversation_a": [{"role": "user", "content": f"q{r['question_id']}"},
                                                {"role": "assistant", "content": "long answer"}],
                        "conversation_b": [{"role": "user", "content": f"q{r['question_id']}"},
                                           {"role": "assistant", "content": "short"}]}) + "\n"
            for r in rows
        )
    )  # fmt: skip
    out = []
    for path in (fast, careful):
        result = runner.invoke(app, ["agreement", "--json", "--from", str(path)])
        assert result.exit_code == 0, result.output
        out.append(json.loads(result.output)["statistics"])
    for stats in out:
        groups = {g["group"]: g for g in stats["groups"]}
        assert set(groups) == {"all", "language:en", "language:fr"}
        assert groups["all"]["n_annotators"] == 2 + 30 and groups["language:fr"]["n_votes"] == 30
        # fr: questions 20-29, ties on 21, 24, 27 for both humans -> per item 1 of 3 pairs agree
        assert groups["language:fr"]["agreement_exact"]["value"] == pytest.approx((7 + 3 / 3) / 10)

    # the same figures from both readers (only the careful one has texts for prefer-longer)
    def strip(groups: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{k: v for k, v in g.items() if k != "prefer_longer"} for g in groups]

    assert strip(out[0]["groups"]) == strip(out[1]["groups"])
    longer = {a["annotator"]: a["prefer_longer"] for a in out[1]["annotators"]}
    assert longer["ann"]["value"] == 1.0 and out[0]["annotators"][0]["prefer_longer"]["value"] is None


def test_a_count_of_zero_says_why_and_what_to_do(tmp_path: Path) -> None:
    """Humans and a judge who never judged the same comparison: the pair's n 0 is explained, with the
    command that would give them shared comparisons; so are the judge's empty figures."""
    rows = [
        {"question_id": f"h{q}", "model_a": "x", "model_b": "y", "winner": "model_a", "judge": judge}
        for q in range(10)
        for judge in ("ann", "bob")
    ] + [
        {"question_id": f"j{q}", "model_a": "x", "model_b": "y", "winner": "model_b", "judge": "llm-gpt4"}
        for q in range(10)
    ]
    path = tmp_path / "apart.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = runner.invoke(app, ["agreement", "--from", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "Why some figures are 0 or missing (-):" in lines
    pair = next(line for line in lines if line.startswith("humans and llm-gpt4: n 0"))
    assert "no comparison judged by both" in pair and "arena judge" in pair
    assert any(
        line.startswith("llm-gpt4: consistency -, no comparison judged in both orders") for line in lines
    )
    assert any(line.startswith("vs majority -: llm-gpt4 judged no comparison") for line in lines)


def test_no_annotated_votes_says_what_to_do(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/empty.db"
    assert runner.invoke(app, ["db", "upgrade", "--database-url", url]).exit_code == 0
    result = runner.invoke(app, ["agreement", "--database-url", url])
    assert result.exit_code == 1
    assert "no votes with an annotator and a prompt" in result.stderr and "import battles" in result.stderr
