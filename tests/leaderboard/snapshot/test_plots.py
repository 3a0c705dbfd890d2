"""Plots: sorted, labelled, legible at 100 models, and byte-stable in SVG and PNG."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from leaderboard.bt.matrices import pairwise_matrices
from leaderboard.snapshot.layout import contrast_ratio, label_colour, label_step
from leaderboard.snapshot.plots import (
    plot_average_win_rates,
    plot_battle_counts,
    plot_bootstrap,
    plot_calibration,
    plot_intervals,
    plot_win_rates,
)
from leaderboard.snapshot.render import render_figure, save_figure
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
        # Too many rows for a name each on the grid: every k-th row is named, in order from the best.
        step = int(ax.get_yticks()[1] - ax.get_yticks()[0])
        assert 1 < step < 100
        assert [t.get_text() for t in ticks] == [names[k] for k in range(0, 100, step)]
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
    rendered = render_figure(plot_intervals(board))  # the same bytes, in memory
    assert rendered == {"svg": first[0].read_bytes(), "png": first[1].read_bytes()}
    assert list(render_figure(plot_intervals(board), formats=("png",))) == ["png"]
    with pytest.raises(ValueError, match="unsupported figure format"):
        render_figure(plot_intervals(board), formats=("pdf",))


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


LONG_NAME_CHARS = 48
N_LONG = 60
#: Pixels two text boxes may share before they count as overlapping (anti-aliasing rounding).
OVERLAP_PIXELS = 0.5


def _long_names(n: int) -> list[str]:
    """Model names as real boards have them, up to 48 characters, two of them with TeX-like markup."""
    stems = [
        "meta-llama/Llama-3.1-405B-Instruct-Turbo-FP8-v",
        "mistralai/Mixtral-8x22B-Instruct-v0.1-q",
        "qwen2",
    ]
    names = [f"{stems[k % 3]}{k:03d}"[-LONG_NAME_CHARS:] for k in range(n - 2)]
    return [*names, r"$\badcmd$", r"gpt$\mathbf{5}$"]


def _drawn_texts(fig: Figure) -> list[Text]:
    """Every non-empty text the figure draws: tick labels only of ticks inside the view (matplotlib keeps,
    but does not draw, the others)."""
    hidden: set[int] = set()
    for axes in fig.axes:
        for axis in (axes.xaxis, axes.yaxis):
            low, high = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not low - 1e-9 <= tick.get_loc() <= high + 1e-9:
                    hidden.update({id(tick.label1), id(tick.label2)})
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text() and id(t) not in hidden]


def _overlaps(boxes: list[Bbox], axis: str) -> int:
    key = (lambda b: b.y0) if axis == "y" else (lambda b: b.x0)
    ordered = sorted(boxes, key=key)
    if axis == "y":
        return sum(1 for lo, hi in zip(ordered, ordered[1:], strict=False) if hi.y0 < lo.y1 - OVERLAP_PIXELS)
    return sum(1 for lo, hi in zip(ordered, ordered[1:], strict=False) if hi.x0 < lo.x1 - OVERLAP_PIXELS)


def test_sixty_long_names_fit_without_clipping_or_overlap(tmp_path: Path) -> None:
    counts = simulated_counts(n_models=N_LONG, n_votes=20_000)
    names = _long_names(N_LONG)
    assert max(len(n) for n in names) == LONG_NAME_CHARS
    counts = replace(counts, models=tuple(names))
    board = replace(
        handmade_leaderboard(counts), rounds=np.random.default_rng(0).normal(1000, 30, (50, N_LONG))
    )
    order = [board.models[i] for i in board.order()]
    # The heatmaps name the first row and column whatever the step: the names with markup go there.
    markup = names[-2:]
    order = [*markup, *(name for name in order if name not in markup)]
    m = pairwise_matrices(counts, board).reorder(order)
    checked: set[str] = set()
    figures = {
        "ratings": plot_intervals(board),
        "observed": plot_win_rates(m.observed, order, title="Observed win rate"),
        "battles": plot_battle_counts(m.n_battles, order),
        "average": plot_average_win_rates(m.observed, order),
        "bootstrap": plot_bootstrap(board),
    }
    for label, fig in figures.items():
        canvas = fig.canvas
        assert isinstance(canvas, FigureCanvasAgg)
        canvas.draw()  # type: ignore[no-untyped-call]
        renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]
        frame = fig.bbox
        texts = _drawn_texts(fig)
        for text in texts:
            box = text.get_window_extent(renderer)
            inside = box.x0 >= frame.x0 - 1 and box.x1 <= frame.x1 + 1 and box.y0 >= frame.y0 - 1
            assert inside and box.y1 <= frame.y1 + 1, (label, text.get_text(), box.bounds, frame.bounds)
        ax = fig.axes[0]
        y_boxes = [t.get_window_extent(renderer) for t in ax.get_yticklabels() if t.get_text()]
        assert 1 < len(y_boxes) < N_LONG, label  # every k-th of 60 rows is named
        assert _overlaps(y_boxes, "y") == 0, label
        x_names = [t for t in ax.get_xticklabels() if t.get_text() in names]
        assert _overlaps([t.get_window_extent(renderer) for t in x_names], "x") == 0, label
        assert all(not t.get_parse_math() for t in texts), label  # names are drawn literally
        svg = save_figure(fig, tmp_path / label, formats=("svg",))[0].read_text()
        # mathtext off: the markup is in the file as text, not as typeset glyphs
        for name in markup:
            if name in {t.get_text() for t in texts}:
                assert name in svg, label
                checked.add(name)
    assert checked == set(markup)


def test_small_heatmaps_only_number_cells_where_numbers_fit() -> None:
    counts = simulated_counts(n_models=40, n_votes=20_000)
    board = handmade_leaderboard(counts)
    matrices = pairwise_matrices(counts, board)
    assert not plot_win_rates(matrices.observed, list(counts.models), title="x").axes[0].texts
    small = simulated_counts(n_models=6)
    small_m = pairwise_matrices(small, handmade_leaderboard(small))
    assert len(plot_win_rates(small_m.observed, list(small.models), title="x").axes[0].texts) == 30


def test_battle_counts_carry_numbers_only_in_cells_wide_enough_to_read() -> None:
    big = simulated_counts(n_models=100, n_votes=40_000)
    big_m = pairwise_matrices(big, handmade_leaderboard(big))
    # two-digit counts would fit a 100-model grid's cells at 6 points, but the cells are too small to read
    assert np.nanmax(big_m.n_battles) < 100
    assert not plot_battle_counts(big_m.n_battles, list(big.models)).axes[0].texts
    small = simulated_counts(n_models=30, n_votes=20_000)
    small_m = pairwise_matrices(small, handmade_leaderboard(small))
    texts = plot_battle_counts(small_m.n_battles, list(small.models)).axes[0].texts
    assert len(texts) == int(np.count_nonzero(small_m.n_battles > 0))


def test_interval_plot_marks_the_anchor() -> None:
    counts = simulated_counts(n_models=6)
    board = handmade_leaderboard(counts)
    anchored = replace(board, parameters={**board.parameters, "anchor": [board.models[2], 1000.0]})
    legend = plot_intervals(anchored).axes[0].get_legend()
    assert legend is not None and board.models[2] in legend.get_texts()[0].get_text()
    assert plot_intervals(board).axes[0].get_legend() is None


def test_label_step_is_the_fewest_rows_a_name_fits_in() -> None:
    name = 1.45 * 7.0 / 72.0  # a 7-point name's row: ROW_LINES label heights
    assert label_step(name, 7.0) == 1
    assert label_step(2.0 * name, 7.0) == 1
    assert label_step(name / 2.0, 7.0) == 2
    assert label_step(0.99 * name / 2.0, 7.0) == 3
    with pytest.raises(ValueError, match="positive"):
        label_step(0.0, 7.0)


def _named_rows(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_yticklabels()]


def test_every_model_is_named_up_to_the_grid_and_every_kth_beyond() -> None:
    for n_models in (34, 35, 100):
        counts = simulated_counts(n_models=n_models, n_votes=20_000)
        board = handmade_leaderboard(counts)
        names = [board.models[i] for i in board.order()]
        m = pairwise_matrices(counts, board).reorder(names)
        for fig in (
            plot_intervals(board),
            plot_win_rates(m.observed, names, title="observed"),
            plot_average_win_rates(m.observed, names),
            plot_bootstrap(board),
        ):
            FigureCanvasAgg(fig).draw()  # type: ignore[no-untyped-call]
            ax = fig.axes[0]
            shown = _named_rows(fig)
            if n_models <= 34:
                assert len(shown) == n_models
                continue
            positions = ax.get_yticks()
            step = int(positions[1] - positions[0])
            assert positions.tolist() == list(range(0, n_models, step))
            # every k-th row of the figure's own order (the average win-rate bars sort themselves)
            assert len(set(shown)) == len(shown) < n_models and set(shown) <= set(names)
            # Named rows are far enough apart, as drawn, for a name each (ROW_LINES label heights).
            span = abs(ax.transData.transform((0, positions[1]))[1] - ax.transData.transform((0, 0))[1])
            height = 1.45 * float(ax.get_yticklabels()[0].get_fontsize()) / 72.0 * fig.dpi
            assert span >= height * (1 - 1e-6)
