"""Plots: sorted, labelled, legible at 100 models, and byte-stable in SVG and PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg

from leaderboard.matrices import pairwise_matrices
from leaderboard.plots import (
    contrast_ratio,
    label_colour,
    plot_battle_counts,
    plot_calibration,
    plot_intervals,
    plot_win_rates,
    save_figure,
)
from tests.factories import handmade_leaderboard, simulated_counts

MIN_LABEL_POINTS = 7.0
MIN_TEXT_CONTRAST = 4.5  # WCAG 2.2 AA, 1.4.3, for text below 18 points
RATIO_TOLERANCE = 0.01


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


def test_contrast_ratio_matches_wcag_examples() -> None:
    black, white = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    assert abs(contrast_ratio(black, white) - 21.0) < RATIO_TOLERANCE
    assert abs(contrast_ratio(white, white) - 1.0) < RATIO_TOLERANCE
    grey = (0x76 / 255, 0x76 / 255, 0x76 / 255)  # #767676: the lightest grey that passes on white
    assert abs(contrast_ratio(grey, white) - 4.54) < RATIO_TOLERANCE
    assert label_colour(white) == "black" and label_colour(black) == "white"


def test_heatmap_labels_contrast_with_their_cells() -> None:
    counts = simulated_counts(n_models=8)
    board = handmade_leaderboard(counts)
    matrices = pairwise_matrices(counts, board)
    figures = [
        plot_win_rates(matrices.observed, list(counts.models), title="observed"),
        plot_win_rates(matrices.predicted, list(counts.models), title="predicted"),
        plot_battle_counts(matrices.n_battles, list(counts.models)),
    ]
    for fig in figures:
        ax = fig.axes[0]
        image = ax.get_images()[0]
        data = image.get_array()
        assert data is not None
        texts = ax.texts
        assert texts, "small heatmaps carry their numbers"
        for text in texts:
            col, row = (round(v) for v in text.get_position())
            cell = image.cmap(image.norm(data[row, col]))
            label = (1.0, 1.0, 1.0) if text.get_color() == "white" else (0.0, 0.0, 0.0)
            assert contrast_ratio(cell, label) >= MIN_TEXT_CONTRAST, (text.get_text(), cell)


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
