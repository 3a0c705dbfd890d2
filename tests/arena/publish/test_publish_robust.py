"""`arena publish --robust` and `arena recompute --robust` on both backends: each vote weighs its
annotator's stored honest weight instead of flagged annotators being left out, and the board is the one
:func:`leaderboard.compute_leaderboard` fits on the same votes carrying those weights."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from typer.testing import CliRunner

from arena.app import create_app
from arena.cli.main import build_app
from leaderboard import FitRequest, compute_leaderboard
from leaderboard.battles import Battles
from leaderboard.data import parse_outcome
from tests.arena.cli.commands.test_cli_battle_files import _ratings
from tests.factories import make_settings
from votes.db import make_engine
from votes.imports.files import import_file
from votes.migrate import upgrade_database
from votes.models import Snapshot
from votes.tables import annotator_t

FIT = ["--bootstrap", "0", "--interval", "none", "--no-plots"]
MODELS = ("m1", "m2", "m3", "m4")
# Honest weights as the review would store them: a bot backing m1 almost discounted, a noisy voter halved.
WEIGHTS = {"bot": 0.05, "user1": 0.5}


def _rows() -> list[dict[str, Any]]:
    """Six honest voters on four models of rising strength, and a bot that always votes m1 up."""
    rng = np.random.default_rng(5)
    strength = [0.0, 0.4, 0.8, 1.2]
    rows: list[dict[str, Any]] = []
    for k in range(720):
        i, j = (int(x) for x in rng.choice(4, size=2, replace=False))
        p = 1.0 / (1.0 + math.exp(-(strength[i] - strength[j])))
        u = rng.random()
        winner = "tie" if u < 0.1 else ("model_a" if u < 0.1 + 0.9 * p else "model_b")
        rows.append(
            {
                "question_id": f"q{k}",
                "model_a": MODELS[i],
                "model_b": MODELS[j],
                "winner": winner,
                "judge": f"user{k % 6}",
            }
        )
    for k in range(150):
        j = int(rng.integers(1, 4))
        rows.append(
            {
                "question_id": f"b{k}",
                "model_a": "m1",
                "model_b": MODELS[j],
                "winner": "model_a",
                "judge": "bot",
            }
        )
    return rows


def _store(
    db_url: str, tmp_path: Path, rows: list[dict[str, Any]], weights: dict[str, float], flag: str | None
) -> None:
    path = tmp_path / "battles.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    upgrade_database(db_url)
    engine = make_engine(db_url)
    try:
        import_file(engine, path)
        with engine.begin() as conn:
            for label, weight in weights.items():
                conn.execute(
                    update(annotator_t).where(annotator_t.c.label == label).values(honest_weight=weight)
                )
            if flag is not None:
                conn.execute(update(annotator_t).where(annotator_t.c.label == flag).values(flagged=True))
    finally:
        engine.dispose()


def _expected(
    rows: list[dict[str, Any]], weights: dict[str, float], *, drop: str | None = None
) -> dict[str, float]:
    """The board fitted directly on the votes, each weighing its judge's weight (1 when not listed)."""
    kept = [r for r in rows if r["judge"] != drop]
    index = {m: i for i, m in enumerate(MODELS)}
    battles = Battles(
        models=MODELS,
        model_a=np.array([index[r["model_a"]] for r in kept], dtype=np.int64),
        model_b=np.array([index[r["model_b"]] for r in kept], dtype=np.int64),
        outcome=np.array([parse_outcome(r["winner"]) for r in kept], dtype=np.int8),
        weight=np.array([weights.get(r["judge"], 1.0) for r in kept], dtype=np.float64),
    )
    board = compute_leaderboard(battles.counts(), FitRequest(n_rounds=0, interval="none"))
    return {m: float(r) for m, r in zip(board.models, board.rating, strict=True)}


def _publish(db_url: str, folder: Path, *extra: str) -> tuple[dict[str, float], dict[str, Any]]:
    result = CliRunner().invoke(
        build_app(), ["publish", "--database-url", db_url, *FIT[:4], "--snapshot-dir", str(folder), *extra]
    )
    assert result.exit_code == 0, result.output
    (meta_path,) = folder.glob("*/metadata.json")
    return _ratings(meta_path.parent), json.loads(meta_path.read_text(encoding="utf-8"))


def _page_says_robust(db_url: str, folder: Path) -> None:
    """The snapshot page's method line names the weighting."""
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            (snapshot_id,) = conn.execute(select(Snapshot.id)).scalars().all()  # type: ignore[call-overload]
        app = create_app(make_settings(db_url, snapshot_dir=str(folder)), engine=engine, seed=1)
        with TestClient(app, base_url="http://testserver") as client:
            page = client.get(f"/leaderboard/snapshots/{snapshot_id}")
    finally:
        engine.dispose()
    assert page.status_code == 200
    method = page.text.split("<dt>Method</dt>", 1)[1].split("</dd>", 1)[0]
    assert "robust: each vote weighted by its annotator's honest weight" in method


def _close(ours: dict[str, float], expected: dict[str, float]) -> None:
    assert set(ours) == set(expected)
    for model, rating in expected.items():
        assert ours[model] == pytest.approx(rating, abs=0.05), model  # the CSV rounds ratings


def test_publish_robust_weighs_each_vote_by_its_annotators_honest_weight(db_url: str, tmp_path: Path) -> None:
    rows = _rows()
    _store(db_url, tmp_path, rows, WEIGHTS, flag="bot")
    robust, meta = _publish(db_url, tmp_path / "robust", "--robust")
    _close(robust, _expected(rows, WEIGHTS))
    assert meta["filters"]["robust"] is True
    _page_says_robust(db_url, tmp_path / "robust")
    # The bot's down-weighted votes still lift m1 a little over the fit that leaves the bot out...
    default, default_meta = _publish(db_url, tmp_path / "default")
    assert "robust" not in default_meta["filters"]
    _close(default, _expected(rows, {}, drop="bot"))
    assert robust["m1"] > default["m1"] + 1.0
    # ...and far less than counting the bot in full.
    unweighted = _expected(rows, {})
    assert unweighted["m1"] > robust["m1"] + 20.0


def test_robust_with_every_weight_one_is_the_default_fit(db_url: str, tmp_path: Path) -> None:
    rows = [r for r in _rows() if r["judge"] != "bot"]
    _store(db_url, tmp_path, rows, {}, flag=None)
    robust, _ = _publish(db_url, tmp_path / "robust", "--robust")
    default, _ = _publish(db_url, tmp_path / "default")
    assert robust == default
    _close(robust, _expected(rows, {}))


def test_recompute_robust_from_the_database_and_refused_for_a_file(db_url: str, tmp_path: Path) -> None:
    rows = _rows()
    _store(db_url, tmp_path, rows, WEIGHTS, flag="bot")
    runner = CliRunner()
    out = tmp_path / "out"
    result = runner.invoke(
        build_app(), ["recompute", "--database-url", db_url, *FIT, "--robust", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    _close(_ratings(out), _expected(rows, WEIGHTS))
    meta = json.loads((out / "metadata.json").read_text(encoding="utf-8"))
    assert meta["filters"]["robust"] is True
    refused = runner.invoke(
        build_app(),
        [
            "recompute",
            "--from",
            str(tmp_path / "battles.json"),
            *FIT,
            "--robust",
            "--out",
            str(tmp_path / "f"),
        ],
    )
    assert refused.exit_code == 2
    assert "no stored honest weights" in refused.output
