"""`arena publish` and `arena recompute` from the database with ``--cluster``, on both backends: a store
where a few annotators cast most votes gives wider intervals when whole annotators are resampled, and
the snapshot says how its votes were clustered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from arena.cli.main import build_app
from leaderboard import simulate_battles
from votes.db import make_engine
from votes.imports.files import import_file
from votes.migrate import upgrade_database

FIT = ["--method", "davidson-position", "--bootstrap", "100", "--seed", "3"]
WINNER = np.array(["model_a", "model_b", "tie", "tie (bothbad)"])


def _rows(n_votes: int, n_judges: int, first: int, seed: int) -> list[dict[str, str]]:
    sim = simulate_battles(
        np.linspace(900, 1100, 5),
        n_votes,
        random_state=seed,
        position=40,
        nu=0.4,
        n_annotators=n_judges,
        annotator_sd=80,
        annotator_position_sd=150,
    )
    assert sim.annotator is not None
    return [
        {"model_a": sim.models[a], "model_b": sim.models[b], "winner": str(w), "judge": f"j{first + j}"}
        for a, b, w, j in zip(sim.model_a, sim.model_b, WINNER[sim.outcome], sim.annotator, strict=True)
    ]


def _store(db_url: str, tmp_path: Path) -> None:
    """4 annotators with 2,400 votes between them, 36 more with 600: 40 annotators, a few cast most."""
    rows = _rows(2400, 4, 0, seed=5) + _rows(600, 36, 4, seed=6)
    path = tmp_path / "battles.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    upgrade_database(db_url)
    engine = make_engine(db_url)
    try:
        import_file(engine, path)
    finally:
        engine.dispose()


def _publish(db_url: str, folder: Path, *extra: str) -> tuple[dict[str, Any], Path]:
    """Publish into ``folder`` (plots off, for time); its metadata and snapshot folder."""
    args = ["publish", "--database-url", db_url, *FIT, "--snapshot-dir", str(folder), *extra]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output
    (meta_file,) = folder.glob("*/metadata.json")
    meta: dict[str, Any] = json.loads(meta_file.read_text(encoding="utf-8"))
    # one line says what the intervals are over (with auto: whether it clustered)
    assert f"over {meta['intervals']['unit']}; marginal" in " ".join(result.output.split())
    return meta, meta_file.parent


def _widths(meta: dict[str, Any], folder: Path) -> tuple[float, float]:
    """Mean rating interval width and the position term's interval width."""
    fitted = meta["parameters_fitted"]["position_advantage_elo"]
    board = pd.read_csv(folder / "leaderboard.csv")
    return float((board["ci_high"] - board["ci_low"]).mean()), float(fitted["ci_high"] - fitted["ci_low"])


def test_publish_cluster_annotator_widens_intervals_and_is_recorded(db_url: str, tmp_path: Path) -> None:
    _store(db_url, tmp_path)
    plain, plain_folder = _publish(db_url, tmp_path / "plain", "--cluster", "none")
    clustered, folder = _publish(db_url, tmp_path / "clustered", "--cluster", "annotator")
    assert "cluster" not in plain["parameters"] and "cluster" not in plain["options"]
    assert "clustering" not in plain  # votes asked to be independent: nothing to explain
    assert clustered["parameters"]["cluster"] == "annotator"
    assert clustered["parameters"]["cluster_counts"] == [40]
    assert clustered["options"]["cluster"] == "annotator"
    rating_plain, position_plain = _widths(plain, plain_folder)
    rating_clustered, position_clustered = _widths(clustered, folder)
    assert rating_clustered > 1.5 * rating_plain
    assert position_clustered > 2 * position_plain
    # recompute from the same database with the same options writes the same data files
    out = tmp_path / "recomputed"
    args = ["recompute", "--database-url", db_url, *FIT, "--out", str(out), "--cluster", "annotator"]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output
    assert (out / "leaderboard.csv").read_bytes() == (folder / "leaderboard.csv").read_bytes()
    # the default is auto: 40 annotators are enough to cluster by, and the metadata says so
    auto, auto_folder = _publish(db_url, tmp_path / "auto")
    assert auto["parameters"]["cluster"] == "annotator"
    assert auto["clustering"]["asked"] == "auto" and auto["clustering"]["used"] == "annotator"
    assert auto["clustering"]["annotators"] == 40
    assert auto["intervals"]["unit"] == "annotator clusters (40 annotators)"
    assert plain["intervals"]["unit"] == "votes, as independent"
    assert auto["voters"] == {"llm_judge_verdicts": 0, "human_votes": 3000, "llm_judges": []}
    assert (auto_folder / "leaderboard.csv").read_bytes() == (folder / "leaderboard.csv").read_bytes()


def test_publish_refuses_an_unknown_clustering_before_reading(db_url: str, tmp_path: Path) -> None:
    _store(db_url, tmp_path)
    for command in ("publish", "recompute"):
        where = "--snapshot-dir" if command == "publish" else "--out"
        args = [command, "--database-url", db_url, where, str(tmp_path / command), "--cluster", "judge"]
        result = CliRunner().invoke(build_app(), args)
        assert result.exit_code == 2 and "--cluster" in result.output, result.output
    assert not (tmp_path / "publish").exists() and not (tmp_path / "recompute").exists()
