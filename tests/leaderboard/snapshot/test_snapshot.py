"""Snapshot folders: columns, round trip, byte-identical data files, a stable zip, a checked manifest."""

from __future__ import annotations

import json
import stat
import zipfile
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from leaderboard.data import aggregate_battles
from leaderboard.snapshot.figures import (
    draw_plots,
    plot_files,
    plot_stems,
    point_plot_stems,
    render_plots,
    same_point_plots,
)
from leaderboard.snapshot.files import (
    COLUMNS,
    DATA_FILES,
    METADATA_FILE,
    ZIP_FILE,
    counts_sha256,
    freeze_snapshot,
)
from leaderboard.snapshot.folder import diff_snapshots, read_snapshot, slice_label, write_snapshot
from tests.factories import handmade_leaderboard, simulated_counts

RATING_TOL = 1e-6


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    counts = simulated_counts()
    board = handmade_leaderboard(counts)
    first = tmp_path_factory.mktemp("a")
    second = tmp_path_factory.mktemp("b")
    write_snapshot(first, board, counts, created_at=datetime(2026, 1, 1, tzinfo=UTC), category="coding")
    write_snapshot(second, board, counts, created_at=datetime(2026, 2, 1, tzinfo=UTC), category="coding")
    return first, second


def test_files_and_columns(written: tuple[Path, Path]) -> None:
    folder, _ = written
    for name in (*DATA_FILES, *plot_files(), METADATA_FILE, ZIP_FILE):
        assert (folder / name).stat().st_size > 0, name
    table = pd.read_csv(folder / "leaderboard.csv")
    assert tuple(table.columns) == COLUMNS
    assert list(table["rating"]) == sorted(table["rating"], reverse=True)
    assert list(table["rank"]) == sorted(table["rank"])
    parquet = pd.read_parquet(folder / "leaderboard.parquet")
    pd.testing.assert_frame_equal(parquet, table, check_dtype=False)
    payload = json.loads((folder / "leaderboard.json").read_text())
    assert [row["model"] for row in payload["models"]] == list(table["model"])
    assert payload["parameters_fitted"]["position_advantage"]["value"] == 12.5


def test_metadata(written: tuple[Path, Path]) -> None:
    folder, _ = written
    meta = json.loads((folder / METADATA_FILE).read_text())
    for key in (
        "id",
        "created_at",
        "n_votes",
        "votes_sha256",
        "method",
        "parameters",
        "seed",
        "package_version",
        "parameters_fitted",
        "files",
    ):
        assert key in meta, key
    assert meta["created_at"].startswith("2026-01-01")
    assert meta["slice"] == "category=coding" == slice_label(category="coding")
    assert meta["seed"] == 1
    assert meta["n_votes"] == 3000
    assert set(meta["files"]) == set(DATA_FILES) | set(plot_files())


def test_same_input_gives_identical_bytes(written: tuple[Path, Path]) -> None:
    first, second = written
    for name in (*DATA_FILES, *plot_files()):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    meta_a = json.loads((first / METADATA_FILE).read_text())
    meta_b = json.loads((second / METADATA_FILE).read_text())
    assert meta_a["id"] != meta_b["id"]
    assert {k: v for k, v in meta_a.items() if k not in ("id", "created_at")} == {
        k: v for k, v in meta_b.items() if k not in ("id", "created_at")
    }


def test_id_covers_the_metadata_not_only_the_numbers(tmp_path: Path) -> None:
    """Two boards with the same numbers, made in one second but with other settings, get two ids; the
    same board made twice at the same instant gets the same id (ids are reproducible)."""
    counts = simulated_counts(seed=8)
    board = handmade_leaderboard(counts)
    moment = datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC)

    def made(name: str, *, at: datetime = moment, **extra: object) -> dict[str, object]:
        write_snapshot(tmp_path / name, board, counts, created_at=at, plots=False, extra_metadata=extra)
        return dict(json.loads((tmp_path / name / METADATA_FILE).read_text()))

    plain = made("plain", options={"robust": False})
    again = made("again", options={"robust": False})
    robust = made("robust", options={"robust": True})
    later = made("later", at=moment.replace(microsecond=750_000), options={"robust": False})
    assert plain["data_sha256"] == robust["data_sha256"] == later["data_sha256"]
    assert plain["id"] == again["id"]
    assert len({plain["id"], robust["id"], later["id"]}) == 3
    assert {str(m["id"])[:16] for m in (plain, robust, later)} == {"20260301T120000Z"}


def test_different_input_changes_bytes(tmp_path: Path) -> None:
    counts = simulated_counts(seed=8)
    write_snapshot(tmp_path, handmade_leaderboard(counts), counts, plots=False)
    other = simulated_counts(seed=7)
    assert counts_sha256(counts) != counts_sha256(other)


def test_zip_holds_everything_and_is_stable(written: tuple[Path, Path]) -> None:
    folder, _ = written
    with zipfile.ZipFile(folder / ZIP_FILE) as archive:
        names = set(archive.namelist())
        assert names == {*DATA_FILES, *plot_files(), METADATA_FILE}
        assert archive.read("leaderboard.csv") == (folder / "leaderboard.csv").read_bytes()
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_round_trip(written: tuple[Path, Path]) -> None:
    folder, _ = written
    counts = simulated_counts()
    board = handmade_leaderboard(counts)
    data = read_snapshot(folder)
    order = board.order()
    assert data.leaderboard.models == tuple(board.models[i] for i in order)
    np.testing.assert_allclose(data.leaderboard.rating, board.rating[order], atol=RATING_TOL)
    np.testing.assert_allclose(data.leaderboard.ci_low, board.ci_low[order], atol=RATING_TOL)
    np.testing.assert_array_equal(data.leaderboard.rank_ub, board.rank_ub[order])
    assert data.leaderboard.parameters_fitted == board.parameters_fitted
    assert data.matrices.models == data.leaderboard.models
    np.testing.assert_array_equal(data.matrices.n_battles, data.matrices.n_battles.T)


def test_manifest_detects_tampering(tmp_path: Path) -> None:
    counts = simulated_counts()
    write_snapshot(tmp_path, handmade_leaderboard(counts), counts, plots=False)
    with open(tmp_path / "leaderboard.csv", "a", encoding="utf-8") as handle:
        handle.write("x\n")
    with pytest.raises(ValueError, match="does not match"):
        read_snapshot(tmp_path)


def test_freeze_makes_files_read_only(tmp_path: Path) -> None:
    counts = simulated_counts()
    folder = tmp_path / "snap"
    write_snapshot(folder, handmade_leaderboard(counts), counts, plots=False)
    freeze_snapshot(folder)
    for path in folder.iterdir():
        assert not path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), path
    assert not folder.stat().st_mode & stat.S_IWUSR


def test_diff_reports_changes(tmp_path: Path) -> None:
    old_counts = simulated_counts(n_models=5, seed=1)
    new_counts = aggregate_battles(
        ["model-000", "model-009", "model-009"], ["model-009", "model-001", "model-002"], ["tie"] * 3
    )
    write_snapshot(tmp_path / "a", handmade_leaderboard(old_counts), old_counts, plots=False)
    write_snapshot(tmp_path / "b", handmade_leaderboard(new_counts), new_counts, plots=False)
    diff = diff_snapshots(read_snapshot(tmp_path / "a"), read_snapshot(tmp_path / "b"))
    assert diff.added == ("model-009",)
    assert diff.dropped == ("model-003", "model-004")
    assert diff.votes_changed and not diff.method_changed
    row = diff.table.set_index("model").loc["model-000"]
    assert row["rating_change"] == pytest.approx(row["rating_b"] - row["rating_a"], abs=RATING_TOL)
    same = diff_snapshots(read_snapshot(tmp_path / "a"), read_snapshot(tmp_path / "a"))
    assert not same.votes_changed and not same.added and not same.dropped
    assert (same.table["rating_change"] == 0).all()


def test_figures_drawn_in_parts_are_the_figures_drawn_whole(tmp_path: Path) -> None:
    """The figures of the point ratings and the others, drawn apart (as a child forked before the fit
    does: arena.publish.drawing), are the bytes of all six drawn at once; a board with the same
    ratings and other intervals draws the same point figures, another order does not."""
    counts = simulated_counts()
    board = handmade_leaderboard(counts)
    draw_plots(tmp_path / "whole", board, counts)
    narrower = handmade_leaderboard(counts, spread=5.0)
    assert same_point_plots(narrower, board)
    ahead = dict(render_plots(narrower, counts, stems=point_plot_stems()))
    assert sorted(ahead) == sorted(f"{stem}.{ext}" for stem in point_plot_stems() for ext in ("svg", "png"))
    rest = [stem for stem in plot_stems() if stem not in point_plot_stems()]
    draw_plots(tmp_path / "parts", board, counts, stems=rest)
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == sorted(
        f"{stem}.{ext}" for stem in rest for ext in ("svg", "png")
    )
    for name in plot_files():
        whole = (tmp_path / "whole" / name).read_bytes()
        assert whole == (ahead[name] if name in ahead else (tmp_path / "parts" / name).read_bytes()), name
    assert not same_point_plots(replace(board, rating=board.rating[::-1].copy()), board)
    with pytest.raises(ValueError, match="no such figure: heatmap"):
        draw_plots(tmp_path / "bad", board, counts, stems=("heatmap",))
    assert not (tmp_path / "bad").exists()
