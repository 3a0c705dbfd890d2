"""`arena recompute --from-counts`: cells aggregated by DuckDB from a Parquet battles file give the same
leaderboard files as the battles themselves, and a bad cell is named by its row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from arena.cli.main import build_app
from arena.publish.board_fit import TIME_BUCKET_SECONDS
from leaderboard.data import OUTCOME_STRINGS

duckdb = pytest.importorskip("duckdb")

DATA_FILES = ("leaderboard.csv", "leaderboard.json", "leaderboard.parquet", "battle_counts.csv")


def _battles(path: Path, n: int = 4000, n_models: int = 8, seed: int = 3) -> Path:
    rng = np.random.default_rng(seed)
    strength = np.linspace(1.0, -1.0, n_models)
    a = rng.integers(0, n_models, n)
    b = (a + rng.integers(1, n_models, n)) % n_models
    p = 1.0 / (1.0 + np.exp(strength[b] - strength[a]))
    u = rng.random(n)
    winner = np.where(u < 0.1, 2, np.where(u < 0.13, 3, np.where(u < 0.13 + 0.87 * p, 0, 1)))
    labels = np.array([OUTCOME_STRINGS[k] for k in sorted(OUTCOME_STRINGS)], dtype=object)
    names = np.array([f"model-{i}" for i in range(n_models)], dtype=object)
    table = pa.table(
        {
            "model_a": pa.array(names[a], pa.string()),
            "model_b": pa.array(names[b], pa.string()),
            "winner": pa.array(labels[winner], pa.string()),
            "tstamp": pa.array(1.7e9 + np.sort(rng.random(n)) * 90 * 86400),
        }
    )
    pq.write_table(table, path)
    return path


def _recompute(*args: str) -> None:
    result = CliRunner().invoke(
        build_app(), ["recompute", *args, "--bootstrap", "30", "--seed", "5", "--no-plots", "--json"]
    )
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("half_life", [None, "30"])
def test_duckdb_counts_give_the_same_leaderboard_files_as_the_votes(
    tmp_path: Path, half_life: str | None
) -> None:
    battles = _battles(tmp_path / "battles.parquet")
    counts = tmp_path / "counts.parquet"
    bucket = (
        ""
        if half_life is None
        else f", floor(tstamp / {TIME_BUCKET_SECONDS}) * {TIME_BUCKET_SECONDS} AS time"
    )
    duckdb.sql(
        f"COPY (SELECT model_a, model_b, winner{bucket}, count(*) AS count "
        f"FROM read_parquet('{battles}') GROUP BY ALL) TO '{counts}' (FORMAT parquet)"
    )
    extra = [] if half_life is None else ["--half-life", half_life]
    _recompute("--from", str(battles), "--out", str(tmp_path / "votes"), *extra)
    _recompute("--from-counts", str(counts), "--out", str(tmp_path / "cells"), *extra)
    for name in DATA_FILES:
        assert (tmp_path / "votes" / name).read_bytes() == (tmp_path / "cells" / name).read_bytes(), name


def test_a_bad_cell_is_named_by_its_row(tmp_path: Path) -> None:
    path = tmp_path / "counts.csv"
    path.write_text("model_a,model_b,winner,count\na,b,model_a,3\nb,a,tie,0\n")
    result = CliRunner().invoke(
        build_app(), ["recompute", "--from-counts", str(path), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2
    assert f"{path}: row 2: 'count' must be a whole number of votes, at least 1" in result.output


def test_counts_refuse_filters_they_cannot_apply(tmp_path: Path) -> None:
    path = tmp_path / "counts.csv"
    path.write_text("model_a,model_b,winner,count\na,b,model_a,3\n")
    result = CliRunner().invoke(
        build_app(),
        ["recompute", "--from-counts", str(path), "--language", "English", "--out", str(tmp_path / "o")],
    )
    assert result.exit_code == 2
    assert "aggregate only what you want to fit" in result.output
