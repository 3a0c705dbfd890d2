"""Plots: sorted, labelled, legible at 100 models, and byte-stable in SVG and PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg

from leaderboard.matrices import pairwise_matrices
from leaderboard.plots import (
    plot_battle_counts,
    plot_calibration,
    plot_intervals,
    plot_win_rates,
    save_figure,
)
from tests.factories import handmade_leaderboard, simulated_counts

MIN_LABEL_POINTS = 7.0


def test_interval_chart_is_sorted_and_labelled() -> None:
    counts = simulated_counts(n_models=8)
    board = handmade_leaderboard(counts)
    fig = plot_intervals(board)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    expected = [board.models[i] for i in board.order()]
    assert labels == expected
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()


def test_hundred_models_stay_legible() -> None:
    counts = simulated_counts(n_models=100, n_votes=40_000)
    board = handmade_leaderboard(counts)
    names = [board.models[i] for i in board.order()]
    m = pairwise_matrices(counts, board).reorder(names)
    for fig in (
        plot_intervals(board),
        plot_win_rates(m.observed, names, title="observed"),
        plot_battle_counts(m.n_battles, names),
    ):
        canvas = fig.canvas
        assert isinstance(canvas, FigureCanvasAgg)
        canvas.draw()  # type: ignore[no-untyped-call]
        ax = fig.axes[0]
        ticks = ax.get_yticklabels()
        assert len(ticks) == 100
        assert min(float(t.get_fontsize()) for t in ticks) >= MIN_LABEL_POINTS
        # Neighbouring labels must not overlap: their boxes are separated vertically.
        boxes = sorted((t.get_window_extent() for t in ticks), key=lambda b: b.y0)
        overlaps = sum(1 for lo, hi in zip(boxes, boxes[1:], strict=False) if hi.y0 < lo.y1 - 0.5)
        assert overlaps == 0


def test_files_are_byte_stable(tmp_path: Path) -> None:
    counts = simulated_counts(n_models=5)
    board = handmade_leaderboard(counts)
    first = save_figure(plot_intervals(board), tmp_path / "a")
    second = save_figure(plot_intervals(board), tmp_path / "b")
    assert [p.suffix for p in first] == [".svg", ".png"]
    for x, y in zip(first, second, strict=True):
        assert x.read_bytes() == y.read_bytes()
    svg = first[0].read_text()
    assert "<dc:date>" not in svg
    assert first[1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_heatmap_rejects_wrong_shape() -> None:
    import pytest

    with pytest.raises(ValueError, match="shape"):
        plot_win_rates(np.zeros((2, 3)), ["a", "b"], title="x")


def test_calibration_plot_has_a_line_per_system_and_the_diagonal() -> None:
    table = [
        {"low": -100.0, "high": 0.0, "n": 10.0, "difference": -40.0, "expected": 0.4, "observed": 0.35},
        {"low": 0.0, "high": 100.0, "n": 30.0, "difference": 45.0, "expected": 0.6, "observed": 0.7},
    ]
    fig = plot_calibration({"bt": table, "elo": table[:1], "empty": []}, title="held out")
    left, right = fig.axes
    assert [line.get_label() for line in left.get_lines()][1:] == ["bt", "elo"]
    assert np.asarray(left.get_lines()[0].get_xydata()).tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert len(right.get_lines()) == 4 and fig.texts[0].get_text() == "held out"
