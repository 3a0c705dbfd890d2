"""`arena publish --method composite`: humans and both judges (an imported one and one of `arena judge`)
on one scale, with the per-source terms, the effective human votes and each judge's worth in the
metadata and on the page; `arena recompute` from a file does the same with the file's judge column."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from arena.app import create_app
from arena.cli.main import app
from leaderboard.snapshot.folder import read_snapshot
from tests.arena.publish.test_snapshot_agreement import build_store
from tests.factories import make_settings
from votes.db import make_engine

runner = CliRunner(env={"COLUMNS": "400"})  # error messages unwrapped


def test_publish_composite_records_sources_terms_and_worth(tmp_path: Path) -> None:
    url = build_store(tmp_path, imported_judge=True)
    families = tmp_path / "families.toml"
    families.write_text('[families]\nx = "ex"\nfj = "ex"\n')
    snapshots = tmp_path / "snapshots"
    args = ["publish", "--method", "composite", "--interval", "sandwich", "--snapshot-dir", str(snapshots)]
    result = runner.invoke(app, [*args, "--family", str(families), "--database-url", url])
    assert result.exit_code == 0, result.output
    (folder,) = [p for p in snapshots.iterdir() if not p.name.startswith(".")]
    data = read_snapshot(folder)
    assert data.metadata["method"] == "composite"
    section = data.metadata["composite"]
    assert section["sources"] == {"human": 24, "judge:fj": 24, "llm-x": 24}
    # the board counts (and its votes_sha256 hashes) the votes it fits, the judges' among them
    assert data.metadata["n_votes"] == 72 and data.metadata["filters"]["source_aware"] is True
    assert section["families"] == {"judge:fj": "ex", "llm-x": "ex"}
    assert section["terms"]["human"]["discrimination"] == {"value": 1.0, "fixed": True}
    judge_terms = section["terms"]["judge:fj"]
    assert {"discrimination", "position", "self_preference"} <= set(judge_terms)
    # the judge of `arena judge` always names the first answer: its position term is large and positive
    assert judge_terms["position"]["value"] > 200
    assert judge_terms["position"]["value"] < 2000  # learned from both orders, not driven off to infinity
    # Every human vote here has the better model on the left, each pair only ever in that order: the
    # humans' position cannot be told apart from the ratings, so it is fixed at 0 and named, and the
    # ratings keep the order the votes show (x beats y beats z) on a sensible scale with finite intervals.
    assert set(section["position_fixed"]) == {"human"}
    assert "both orders" in section["position_fixed"]["human"]
    assert section["terms"]["human"]["position"] == {"value": 0.0, "fixed": True}
    board = data.leaderboard
    rating = dict(zip(board.models, board.rating, strict=True))
    assert rating["x"] > rating["y"] > rating["z"]
    assert all(abs(r - 1000) < 600 for r in rating.values())
    assert np.all(np.isfinite(board.ci_low)) and np.all(np.isfinite(board.ci_high))
    assert np.all(board.ci_high - board.ci_low < 1000)
    assert section["n_human_votes"] == 24
    for name in ("judge:fj", "llm-x"):
        worth = section["judges"][name]
        assert worth["verdicts"] == 24 and worth["shared_battles"] == 12
        assert set(worth["human_votes_needed"]) == {"with", "without"}
    # the imported judge names the better model every time: no spread, so no correlation to report
    assert section["judges"]["llm-x"]["correlation_with_humans"] is None
    assert data.metadata["options"]["families"] == {"fj": "ex", "x": "ex"}

    engine = make_engine(url)
    try:
        site = create_app(make_settings(url, snapshot_dir=str(snapshots)), engine=engine, seed=1)
        with TestClient(site, base_url="http://testserver") as client:
            html = client.get(f"/leaderboard/snapshots/{data.metadata['id']}").text
            assert 'id="judge-worth-table"' in html and 'id="agreement-table"' in html
            assert "One verdict is worth" in html and "llm-x" in html
    finally:
        engine.dispose()


def test_recompute_composite_from_a_file_and_bad_families(tmp_path: Path) -> None:
    rows = []
    for i in range(6):
        for a, b in (("x", "y"), ("y", "z"), ("x", "z")):
            for who, w in (("ann1", "model_a"), ("ann2", "model_a" if i % 3 else "model_b")):
                rows.append({"question_id": f"p{i}", "model_a": a, "model_b": b, "winner": w, "judge": who})
            for first, second, w in ((a, b, "model_a"), (b, a, "model_a" if i % 2 else "model_b")):
                rows.append({"question_id": f"p{i}", "model_a": first, "model_b": second, "winner": w,
                             "judge": "llm-y"})  # fmt: skip
    source = tmp_path / "battles.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    base = [
        "recompute",
        "--from",
        str(source),
        "--method",
        "composite",
        "--interval",
        "sandwich",
        "--no-plots",
    ]
    result = runner.invoke(app, [*base, "--out", str(out), "--family", "y=why"])
    assert result.exit_code == 0, result.output
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["composite"]["sources"] == {"human": 36, "llm-y": 36}
    assert meta["composite"]["families"] == {"llm-y": "why"}
    assert "self_preference" in meta["composite"]["terms"]["llm-y"]
    # hostile family input: refused with the file named, before any vote is read
    bad = tmp_path / "bad.toml"
    bad.write_text("x = 3\n")
    for family, message in (
        (str(bad), "must map to a family name"),
        ("noequals", "expected MODEL=FAMILY"),
        ("x=" + "f" * 300, "1 to 200 characters"),
    ):
        result = runner.invoke(app, [*base, "--out", str(tmp_path / "o2"), "--family", family])
        assert result.exit_code == 2 and message in result.output, result.output
    broken = tmp_path / "broken.toml"
    broken.write_text("x = \n")
    result = runner.invoke(app, [*base, "--out", str(tmp_path / "o3"), "--family", str(broken)])
    assert result.exit_code == 2 and "broken.toml" in result.output
    # families only make sense for the composite
    result = runner.invoke(
        app, ["recompute", "--from", str(source), "--out", str(tmp_path / "o4"), "--family", "x=a"]
    )
    assert result.exit_code == 2 and "--method composite" in result.output


def test_recompute_rectify_ppi(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    strength = {"x": 1.0, "y": 0.3, "z": -0.4, "w": -0.9}
    names = list(strength)
    rows = []
    for i in range(120):
        a, b = rng.choice(names, 2, replace=False)
        p = 1 / (1 + np.exp(strength[b] - strength[a]))
        verdict = "model_a" if rng.random() < p else "model_b"
        rows.append({"question_id": f"p{i}", "model_a": a, "model_b": b, "winner": verdict, "judge": "llm-j"})
        if i % 3 == 0:  # humans saw a third of the battles
            human = "model_a" if rng.random() < p else "model_b"
            rows.append({"question_id": f"p{i}", "model_a": a, "model_b": b, "winner": human, "judge": "ann"})
    source = tmp_path / "battles.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    base = ["recompute", "--from", str(source), "--no-plots", "--out", str(out)]
    result = runner.invoke(
        app, [*base, "--method", "composite", "--rectify", "ppi", "--interval", "sandwich"]
    )
    assert result.exit_code == 0, result.output
    meta = json.loads((out / "metadata.json").read_text())
    ppi = meta["composite"]["ppi"]
    assert ppi["n_labelled_battles"] == 40 and ppi["n_unlabelled_battles"] == 80
    assert 0.0 <= ppi["lambda"] <= 1.0
    assert meta["parameters"]["rectify"] == "ppi" and meta["interval"] == "sandwich"
    assert meta["options"]["rectify"] == "ppi"
    sandwich = read_snapshot(out).leaderboard
    # the bootstrap (the default interval) is honoured: battles resampled, same ratings, other intervals
    booted = tmp_path / "booted"
    result = runner.invoke(
        app, [*base[:-1], str(booted), "--method", "composite", "--rectify", "ppi", "--bootstrap", "60"]
    )
    assert result.exit_code == 0, result.output
    meta = json.loads((booted / "metadata.json").read_text())
    assert meta["interval"] == "bootstrap" and meta["parameters"]["n_rounds"] == 60
    board = read_snapshot(booted).leaderboard
    assert board.models == sandwich.models
    np.testing.assert_allclose(board.rating, sandwich.rating)
    assert np.all(board.ci_low <= board.rating) and np.all(board.rating <= board.ci_high)
    assert not np.allclose(board.ci_low, sandwich.ci_low)
    for bad, message in (
        (["--rectify", "ppi"], "--method composite"),
        (["--method", "composite", "--rectify", "x"], "unknown"),
    ):
        result = runner.invoke(app, [*base, *bad])
        assert result.exit_code == 2 and message in result.output, result.output
