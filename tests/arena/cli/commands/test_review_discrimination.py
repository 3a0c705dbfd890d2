"""`arena annotators` (and the review behind it) shows each annotator's discrimination from the
rater-ability model: a coin-flipping annotator reads near 0, a sharp one above 1, on both backends."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from arena.cli.main import build_app
from leaderboard import simulate_battles
from votes.db import make_engine
from votes.migrate import upgrade_database
from votes.review.voters import review_annotators

WINNER = np.array(["model_a", "model_b", "tie", "tie (bothbad)"])
#: annotators h0 .. h3: nearly random, two ordinary, a sharp one
DISCRIMINATION = np.array([0.1, 1.0, 1.0, 3.0])


def _store(db_url: str, tmp_path: Path) -> None:
    sim = simulate_battles(
        np.linspace(800, 1200, 5),
        4000,
        random_state=7,
        nu=0.3,
        n_annotators=4,
        annotator_discrimination=DISCRIMINATION,
    )
    assert sim.annotator is not None
    path = tmp_path / "battles.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {"model_a": sim.models[a], "model_b": sim.models[b], "winner": str(w), "judge": f"h{j}"}
            )
            + "\n"
            for a, b, w, j in zip(sim.model_a, sim.model_b, WINNER[sim.outcome], sim.annotator, strict=True)
        ),
        encoding="utf-8",
    )
    upgrade_database(db_url)
    result = CliRunner().invoke(build_app(), ["import", str(path), "--database-url", db_url])
    assert result.exit_code == 0, result.output


def test_review_reports_each_annotators_discrimination(db_url: str, tmp_path: Path) -> None:
    _store(db_url, tmp_path)
    engine = make_engine(db_url)
    try:
        rows = {r.label: r for r in review_annotators(engine)}
    finally:
        engine.dispose()
    assert set(rows) == {"h0", "h1", "h2", "h3"}
    found = {label: r.discrimination for label, r in rows.items()}
    assert found["h0"] < 0.3 < 0.6 < found["h1"] < 1.6 and 0.6 < found["h2"] < 1.6
    assert found["h3"] > 2.0
    result = CliRunner().invoke(build_app(), ["annotators", "--all", "--json", "--database-url", db_url])
    assert result.exit_code == 0, result.output
    *lines, overall = map(json.loads, result.output.splitlines())
    printed = {row["label"]: row for row in lines}
    assert overall["overall"]["self_agreement"]["n_repeat"] == 0  # no repeat battles here
    assert printed["h3"]["discrimination"] == found["h3"]
    wide = {"COLUMNS": "200"}
    table = CliRunner().invoke(build_app(), ["annotators", "--all", "--database-url", db_url], env=wide)
    assert "discrim." in table.output and f"{found['h3']:.2f}" in table.output
