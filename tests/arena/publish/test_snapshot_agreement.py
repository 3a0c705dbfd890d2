"""A published snapshot carries the agreement report of humans and LLM judges (metadata section,
agreement.csv and agreement.json, a table on its page), the same figures `arena agreement` prints, while
the board itself counts only the votes it was published for, and says when those include a judge's."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from arena.app import create_app
from arena.cli.main import app
from leaderboard.snapshot.folder import read_snapshot
from tests.factories import make_settings
from tests.fake_openai import FakeOpenAI, serve_fake_openai
from votes.db import make_engine

runner = CliRunner()
MODELS = ("x", "y", "z")
N_PROMPTS = 4
#: The comparisons on which the second human disagrees with the first.
SPLIT = {(0, "x", "z"), (1, "x", "y")}


def run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def build_store(tmp_path: Path, *, imported_judge: bool) -> str:
    """Humans prefer x > y > z but split (a tie) on two comparisons; an imported judge (llm-x) prefers
    x > y > z in both orders; the judge of `arena judge` (judge:fj) always picks the first answer."""
    url = f"sqlite:///{tmp_path}/arena.db"
    catalog = tmp_path / "catalog.jsonl"
    catalog.write_text(
        "".join(
            json.dumps({"prompt_id": f"p{i}", "prompt": f"Q{i}", "model": m, "output": f"{m} says {i}"})
            + "\n"
            for i in range(N_PROMPTS)
            for m in MODELS
        )
    )
    rows = []
    for i in range(N_PROMPTS):
        for a, b in (("x", "y"), ("y", "z"), ("x", "z")):
            for human in ("ann1", "ann2"):
                split = human == "ann2" and (i, a, b) in SPLIT
                rows.append({"question_id": f"p{i}", "model_a": a, "model_b": b,
                             "winner": "model_b" if split else "model_a", "judge": human})  # fmt: skip
            if imported_judge:
                for first, second, w in ((a, b, "model_a"), (b, a, "model_b")):
                    rows.append({"question_id": f"p{i}", "model_a": first, "model_b": second, "winner": w,
                                 "judge": "llm-x"})  # fmt: skip
    battles = tmp_path / "battles.jsonl"
    battles.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run("import", str(catalog), "--database-url", url)
    run("import", str(battles), "--database-url", url)
    with serve_fake_openai(FakeOpenAI(answer='{"verdict": "A>B"}')) as fake:
        run("models", "add", "fj", "--base-url", fake.base_url, "--role", "judge", "--database-url", url)
        run("judge", "--judge", "fj", "--quiet", "--database-url", url)
    return url


def test_publish_writes_the_agreement_report_and_the_page_shows_it(tmp_path: Path) -> None:
    url = build_store(tmp_path, imported_judge=False)
    snapshots = tmp_path / "snapshots"
    run("publish", "--bootstrap", "10", "--snapshot-dir", str(snapshots), "--database-url", url)
    (folder,) = [p for p in snapshots.iterdir() if not p.name.startswith(".")]
    data = read_snapshot(folder)
    n_human = N_PROMPTS * 3 * 2
    assert data.metadata["n_votes"] == n_human  # the judge's 24 votes stay off the human board
    section = data.metadata["agreement"]
    assert section["judges_in_board"] == []
    # The same figures as `arena agreement --json`: one implementation. The command adds the store's
    # self-agreement on repeat battles, which are no board's votes (none here).
    printed_json = json.loads(run("agreement", "--json", "--database-url", url))
    assert printed_json.pop("self_agreement")["n_repeat"] == 0
    assert section == {**printed_json, "judges_in_board": []}
    printed = run("agreement", "--database-url", url)  # the table a person reads
    assert "Agreement on shared comparisons" in printed and "judge:fj" in printed and "0.167" in printed
    (pair,) = section["agreement"]
    # The judge contradicts itself after every swap: a tie on all 12 comparisons, as the humans on 2.
    assert (pair["first"], pair["second"], pair["n_with_ties"]) == ("humans", "judge:fj", 12)
    assert pair["agreement_with_ties"] == round(2 / 12, 6) and pair["n_without_ties"] == 0
    (judge,) = section["judges"]
    assert judge["position_consistency"] == 0.0 and judge["first_win_rate"] == 1.0
    assert judge["n_votes"] == 24 and judge["n_swapped"] == 12
    assert json.loads((folder / "agreement.json").read_text()) == section
    table = list(csv.DictReader(io.StringIO((folder / "agreement.csv").read_text())))
    assert [(r["first"], r["second"], r["n_with_ties"]) for r in table] == [("humans", "judge:fj", "12")]
    assert {"agreement.csv", "agreement.json"} <= set(data.metadata["files"])

    engine = make_engine(url)
    try:
        site = create_app(make_settings(url, snapshot_dir=str(snapshots)), engine=engine, seed=1)
        with TestClient(site, base_url="http://testserver") as client:
            page = client.get(f"/leaderboard/snapshots/{data.metadata['id']}")
            assert page.status_code == 200
            html = page.text
            assert 'id="agreement-table"' in html and "judge:fj" in html
            assert "counts no LLM judge" in html
            download = client.get(f"/leaderboard/snapshots/{data.metadata['id']}/files/agreement.csv")
            assert download.status_code == 200 and download.content == (folder / "agreement.csv").read_bytes()
    finally:
        engine.dispose()


def test_imported_judges_counted_by_the_board_are_named(tmp_path: Path) -> None:
    url = build_store(tmp_path, imported_judge=True)
    out = tmp_path / "board"
    run("recompute", "--out", str(out), "--bootstrap", "0", "--no-plots", "--database-url", url)
    metadata = json.loads((out / "metadata.json").read_text())
    section = metadata["agreement"]
    # A battles file's judge is an annotator like any other for the board, and the snapshot says so.
    assert section["judges_in_board"] == ["llm-x"]
    pairs = {(p["first"], p["second"]): p for p in section["agreement"]}
    assert set(pairs) == {("humans", "judge:fj"), ("humans", "llm-x"), ("judge:fj", "llm-x")}
    assert pairs[("humans", "llm-x")]["agreement_with_ties"] == round(10 / 12, 6)
    assert pairs[("humans", "llm-x")]["agreement_without_ties"] == 1.0
    assert {j["judge"]: j["position_consistency"] for j in section["judges"]} == {
        "judge:fj": 0.0,
        "llm-x": 1.0,
    }
    only_judge = tmp_path / "judge-board"
    run("recompute", "--out", str(only_judge), "--bootstrap", "0", "--no-plots", "--annotators", "judge:fj",
        "--database-url", url)  # fmt: skip
    judged = json.loads((only_judge / "metadata.json").read_text())
    assert judged["n_votes"] == 24 and judged["agreement"]["judges_in_board"] == ["judge:fj"]


def test_no_judge_no_agreement_section(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/arena.db"
    battles = tmp_path / "battles.jsonl"
    battles.write_text(
        "".join(
            json.dumps(
                {"question_id": f"p{i}", "model_a": a, "model_b": b, "winner": "model_a", "judge": "ann"}
            )
            + "\n"
            for i in range(3)
            for a, b in (("x", "y"), ("y", "z"), ("z", "x"))
        )
    )
    run("import", str(battles), "--database-url", url)
    out = tmp_path / "board"
    run("recompute", "--out", str(out), "--bootstrap", "0", "--no-plots", "--database-url", url)
    assert "agreement" not in json.loads((out / "metadata.json").read_text())
    assert not (out / "agreement.csv").exists()
