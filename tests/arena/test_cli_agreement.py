"""`arena agreement` on the real LLM-judge verdicts of ../shared/data (skipped where the folder is absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena.cli import app
from arena.commands.agreement import family_of, is_judge

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
runner = CliRunner()


def test_judge_labels_and_families() -> None:
    assert is_judge("judge:tiny") and is_judge("llm-gpt4") and not is_judge("anonymous")
    assert family_of("llm-gpt4") == family_of("gpt35") != family_of("claude")
    assert family_of("judge:claude-3") == family_of("claude") and family_of("tiny-llama-9") is not None


@pytest.mark.skipif(not (DATA / "vicuna80-llm-judge-battles.jsonl.gz").exists(), reason="no shared data")
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
