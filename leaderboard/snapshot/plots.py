"""Pictures of a leaderboard: interval whiskers, win-rate heatmaps, battle counts, average win rates,
bootstrap distributions and calibration (matplotlib figures).

Everything here draws on a fresh :class:`~matplotlib.figure.Figure` (no pyplot state, no global
backend switch), sized and labelled by :mod:`leaderboard.snapshot.layout`; :mod:`leaderboard.snapshot.render`
turns a figure into byte-stable SVG and PNG, and the snapshot's table of figures
(:mod:`leaderboard.snapshot.figures`) says which of these a snapshot carries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib
import numpy as np
import numpy.typing as npt
from matplotlib import cbook
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.colors import Colormap
from matplotlib.figure import Figure

from leaderboard.result import Leaderboard
from leaderboard.snapshot.layout import (
    AXIS_LABEL_INCHES,
    BOX_HEIGHT,
    CELL_MAX_INCHES,
    CELL_NUMBER_MIN_INCHES,
    CELL_TEXT_MIN_POINTS,
    CELL_TEXT_POINTS,
    CHAR_EMS,
    COLORBAR_INCHES,
    GRID_INCHES,
    PLOT_INCHES,
    THINNED_SPARE_INCHES,
    TITLE_INCHES,
    draw_literally,
    finish_model_rows,
    label_size,
    label_step,
    longest_name,
    model_rows_figure,
    name_rows,
    new_figure,
    row_inches,
    set_title,
    text_inches,
)

__all__ = [
    "plot_average_win_rates",
    "plot_battle_counts",
    "plot_bootstrap",
    "plot_calibration",
    "plot_intervals",
    "plot_win_rates",
]


def plot_intervals(leaderboard: Leaderboard, *, title: str | None = None) -> Figure:
    """Ratings with their interval whiskers, one row per model, best at the top; the anchor marked.

    Parameters
    ----------
    leaderboard : Leaderboard
        The fitted leaderboard; rows are sorted by rating (ties by name).
    title : str, optional
        Figure title; by default a sentence naming the method and interval level.

    Returns
    -------
    matplotlib.figure.Figure
    """
    order = leaderboard.order()
    n = len(order)
    names = [leaderboard.models[i] for i in order]
    rating = leaderboard.rating[order]
    low = leaderboard.ci_low[order]
    high = leaderboard.ci_high[order]
    rows = model_rows_figure(names)
    fig, ax = rows.fig, rows.ax
    y = np.arange(n)
    err = np.vstack([np.maximum(rating - low, 0.0), np.maximum(high - rating, 0.0)])
    ax.errorbar(rating, y, xerr=err, fmt="o", color="#1f4e79", ecolor="#6f9fd8", capsize=2.5, markersize=4)
    anchor = leaderboard.parameters.get("anchor")
    if isinstance(anchor, list | tuple) and anchor and anchor[0] in names:
        k = names.index(str(anchor[0]))
        ax.plot([rating[k]], [k], "D", color="#b35806", markersize=7, label=f"anchor: {anchor[0]}")
        ax.legend(loc="lower right", fontsize=8)
    finish_model_rows(rows)
    ax.set_xlabel("rating (Elo scale)")
    ax.set_ylabel("model (sorted by rating)")
    level = leaderboard.parameters.get("level")
    level_text = f"{float(level):.0%} " if isinstance(level, int | float) else ""
    set_title(
        ax,
        title
        or f"Ratings of {n} models with {level_text}intervals ({leaderboard.method}, {leaderboard.interval})",
        PLOT_INCHES,
    )
    draw_literally(fig)
    return fig


def plot_win_rates(
    matrix: npt.NDArray[np.float64],
    models: Sequence[str],
    *,
    title: str,
    colorbar_label: str = "win rate of row model against column model",
) -> Figure:
    """A win-rate heatmap (row model vs. column model); NaN cells (no battles) are left blank.

    Parameters
    ----------
    matrix : float array, shape (n_models, n_models)
        Win rates in [0, 1], already in display order (best model first).
    models : sequence of str
        Names in the same order as the matrix rows and columns.
    title : str
        Figure title.
    colorbar_label : str
        Label of the colour scale.

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _heatmap(
        matrix,
        models,
        title=title,
        cmap=matplotlib.colormaps["RdBu"],
        vmin=0.0,
        vmax=1.0,
        colorbar_label=colorbar_label,
        fmt="{:.2f}",
    )


def plot_battle_counts(
    matrix: npt.NDArray[np.float64],
    models: Sequence[str],
    *,
    title: str = "Battles between each pair of models",
) -> Figure:
    """A heatmap of the number of battles between each pair (both sides together).

    Parameters
    ----------
    matrix : float array, shape (n_models, n_models)
        Symmetric battle counts in display order.
    models : sequence of str
        Names in matrix order.
    title : str
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    shown = np.where(matrix > 0, matrix, np.nan)
    top = float(np.nanmax(shown)) if np.any(matrix > 0) else 1.0
    return _heatmap(
        shown,
        models,
        title=title,
        cmap=matplotlib.colormaps["viridis"],
        vmin=0.0,
        vmax=top,
        colorbar_label="battles",
        fmt="{:.0f}",
    )


def _cell_text_points(text: str, cell_inches: float) -> float | None:
    """The font size at which ``text`` fits in a cell, or None when it would be too small to read."""
    by_width = 0.85 * cell_inches * 72.0 / (max(len(text), 1) * CHAR_EMS)
    by_height = 0.6 * cell_inches * 72.0
    points = min(CELL_TEXT_POINTS, by_width, by_height)
    return points if points >= CELL_TEXT_MIN_POINTS else None


def _heatmap(
    matrix: npt.NDArray[np.float64],
    models: Sequence[str],
    *,
    title: str,
    cmap: Colormap,
    vmin: float,
    vmax: float,
    colorbar_label: str,
    fmt: str,
) -> Figure:
    n = len(models)
    if matrix.shape != (n, n):
        raise ValueError(f"matrix has shape {matrix.shape}, expected ({n}, {n})")
    size = label_size(n)
    cell = min(CELL_MAX_INCHES, GRID_INCHES / max(n, 1))
    names = text_inches(longest_name(models), size) + AXIS_LABEL_INCHES
    grid = cell * n
    # Constrained layout keeps the image square inside a box it sizes without the aspect; with small
    # names on the fixed grid (thinned labels) the box came out a few pixels wider than the figure.
    spare = 0.3 if label_step(cell, size) == 1 else THINNED_SPARE_INCHES
    fig = new_figure(names + grid + COLORBAR_INCHES + spare, names + grid + TITLE_INCHES)
    ax = fig.add_subplot()
    cmap = cmap.with_extremes(bad="#f2f2f2")
    image = ax.imshow(
        np.where(np.isfinite(matrix), matrix, np.nan),
        cmap=cmap,
        vmin=vmin,
        vmax=vmax,
        interpolation="nearest",
    )
    name_rows(ax, list(models), cell, size, columns=True)
    ax.set_xlabel("opponent (column model)")
    ax.set_ylabel("model (row)")
    set_title(ax, title, grid + 0.5 * COLORBAR_INCHES)
    _cell_numbers(ax, matrix, fmt, cell, cmap(image.norm(matrix)))
    bar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    bar.set_label(colorbar_label)
    draw_literally(fig)
    return fig


def _cell_numbers(
    ax: Axes, matrix: npt.NDArray[np.float64], fmt: str, cell: float, colours: npt.ArrayLike
) -> None:
    """Write each finite cell's number where it fits (none in cells under ``CELL_NUMBER_MIN_INCHES``),
    black or white for contrast with ``colours`` (the cells' RGBA). The numbers sit inside their cells, so
    they are kept out of the layout and tight-box measurements (thousands of texts at 100 models would
    otherwise be measured on every pass)."""
    if cell < CELL_NUMBER_MIN_INCHES:
        return
    rgb = np.asarray(colours, dtype=np.float64)[..., :3]
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    luminance = linear @ np.array([0.2126, 0.7152, 0.0722])
    # label_colour's rule, for every cell at once: black when it contrasts at least as much as white.
    black = (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05)
    rows, cols = np.nonzero(np.isfinite(matrix))
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        text = fmt.format(matrix[i, j])
        points = _cell_text_points(text, cell)
        if points is not None:
            colour = "black" if black[i, j] else "white"
            label = ax.text(j, i, text, ha="center", va="center", fontsize=points, color=colour)
            label.set_in_layout(False)


def plot_average_win_rates(
    matrix: npt.NDArray[np.float64], models: Sequence[str], *, title: str | None = None
) -> Figure:
    """Each model's average win rate against all the others it met (ties count half), as sorted bars.

    The average is the plain mean of the row's win rates over the opponents with battles, so every
    opponent counts once whatever the number of battles (the public notebooks' "average win rate
    against all other models").

    Parameters
    ----------
    matrix : float array, shape (n_models, n_models)
        Observed win rates (row against column), NaN where two models never met.
    models : sequence of str
        Names in matrix order.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    n = len(models)
    if matrix.shape != (n, n):
        raise ValueError(f"matrix has shape {matrix.shape}, expected ({n}, {n})")
    met = np.isfinite(matrix) & ~np.eye(n, dtype=bool)
    sums = np.where(met, matrix, 0.0).sum(axis=1)
    average = np.divide(sums, met.sum(axis=1), out=np.full(n, np.nan), where=met.sum(axis=1) > 0)
    order = np.lexsort((np.asarray(models, dtype=object), -np.nan_to_num(average, nan=-1.0)))
    names = [models[i] for i in order]
    rows = model_rows_figure(names)
    fig, ax = rows.fig, rows.ax
    y = np.arange(n)
    values = np.nan_to_num(average[order], nan=0.0)
    ax.barh(y, values, color="#6f9fd8", height=0.7)
    if rows.pitch >= row_inches(CELL_TEXT_MIN_POINTS):
        for k, v in enumerate(average[order]):
            if np.isfinite(v):
                ax.text(v + 0.01, k, f"{v:.2f}", va="center", fontsize=min(rows.size, CELL_TEXT_POINTS))
    finish_model_rows(rows)
    ax.set_xlim(0.0, 1.1)
    ax.set_xlabel("average win rate against the other models (ties count half)")
    ax.set_ylabel("model (sorted by average win rate)")
    set_title(
        ax, title or f"Average win rate of each of {n} models against all the others it met", PLOT_INCHES
    )
    draw_literally(fig)
    return fig


def plot_bootstrap(leaderboard: Leaderboard, *, title: str | None = None) -> Figure:
    """The bootstrap distribution of each model's rating (box and whiskers over the rounds), best first.

    Without bootstrap rounds (sandwich or no intervals) the point ratings are drawn alone and the title
    says so.

    Parameters
    ----------
    leaderboard : Leaderboard
        With ``rounds`` (n_rounds x n_models) when it was bootstrapped.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    order = leaderboard.order()
    n = len(order)
    names = [leaderboard.models[i] for i in order]
    rows = model_rows_figure(names)
    fig, ax = rows.fig, rows.ax
    y = np.arange(n)
    rounds = leaderboard.rounds
    if rounds is not None and len(rounds):
        samples = np.asarray(rounds, dtype=np.float64)[:, order]
        _boxes(ax, samples, y)
        described = f"over {samples.shape[0]} bootstrap rounds (whiskers: 2.5th to 97.5th percentile)"
    else:
        ax.plot(leaderboard.rating[order], y, "o", color="#1f4e79", markersize=4)
        described = "(no bootstrap rounds: point ratings only)"
    finish_model_rows(rows)
    ax.set_xlabel("rating (Elo scale)")
    ax.set_ylabel("model (sorted by rating)")
    set_title(ax, title or f"Distribution of each model's rating {described}", PLOT_INCHES)
    draw_literally(fig)
    return fig


def _boxes(ax: Axes, samples: npt.NDArray[np.float64], y: npt.NDArray[np.int64]) -> None:
    """Horizontal box-and-whisker marks of each column of ``samples`` at ``y``: matplotlib's own box
    statistics (quartiles, whiskers at the last rounds inside the 2.5th and 97.5th percentiles), drawn as
    four line collections instead of six lines per model (at 100 models, 600 artists each laid out and
    drawn on their own took two thirds of the figure's time)."""
    stats = cbook.boxplot_stats(samples, whis=(2.5, 97.5))
    q1 = np.array([s["q1"] for s in stats])
    q3 = np.array([s["q3"] for s in stats])
    median = np.array([s["med"] for s in stats])
    low = np.array([s["whislo"] for s in stats])
    high = np.array([s["whishi"] for s in stats])
    half, cap = BOX_HEIGHT / 2.0, BOX_HEIGHT / 4.0
    top, bottom = y - half, y + half

    def segments(*points: tuple[npt.ArrayLike, npt.ArrayLike]) -> list[npt.NDArray[np.float64]]:
        """One polyline per model through ``points`` (each a pair of x and y arrays)."""
        lines = np.stack([np.column_stack(point) for point in points], axis=1).astype(np.float64)
        return list(lines)

    marks = (
        (segments((q1, y), (low, y)) + segments((q3, y), (high, y)), "black"),  # whiskers
        (segments((low, y - cap), (low, y + cap)) + segments((high, y - cap), (high, y + cap)), "black"),
        (segments((q1, bottom), (q3, bottom), (q3, top), (q1, top), (q1, bottom)), "black"),  # boxes
        (segments((median, bottom), (median, top)), "#1f4e79"),
    )
    for lines, colour in marks:
        ax.add_collection(LineCollection(lines, colors=colour, linewidths=1.0), autolim=True)
    ax.autoscale_view()


def plot_calibration(
    tables: Mapping[str, Sequence[Mapping[str, float]]], *, title: str = "Calibration on the test votes"
) -> Figure:
    """Expected against observed score of the left model, by bin of rating difference, one line per
    system (the tables of :func:`leaderboard.evaluation.calibration.calibration_table`).

    The left panel plots each bin's observed score against the score the system expected (the diagonal
    is perfect calibration; marker area follows the votes in the bin); the right panel plots both against
    the bin's mean rating difference.

    Parameters
    ----------
    tables : mapping of system name to calibration table
    title : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = Figure(figsize=(11.0, 4.8))
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    left.plot([0, 1], [0, 1], color="#999999", linewidth=0.8, linestyle="--")
    for k, (name, table) in enumerate(tables.items()):
        if not table:
            continue
        color = f"C{k % 10}"
        expected = [row["expected"] for row in table]
        observed = [row["observed"] for row in table]
        diff = [row["difference"] for row in table]
        sizes = [8.0 + 60.0 * row["n"] / max(r["n"] for r in table) for row in table]
        left.plot(expected, observed, color=color, linewidth=0.8, label=name)
        left.scatter(expected, observed, s=sizes, color=color)
        right.plot(diff, observed, "o", color=color, markersize=4)
        right.plot(diff, expected, color=color, linewidth=0.8)
    left.set_xlabel("expected score of the left model")
    left.set_ylabel("observed score (win 1, tie 1/2)")
    left.set_xlim(0, 1)
    left.set_ylim(0, 1)
    left.legend(fontsize=7, loc="upper left")
    right.set_xlabel("rating difference, left minus right (Elo points implied by the forecast)")
    right.set_ylabel("score: observed (dots), expected (lines)")
    for ax in (left, right):
        ax.grid(color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
