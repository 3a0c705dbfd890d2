"""Pictures of a leaderboard: interval whiskers, win-rate heatmaps, battle counts, calibration (matplotlib).

Everything here draws on a fresh :class:`~matplotlib.figure.Figure` (no pyplot state, no global
backend switch), sizes the figure by the number of models so that 100 model names stay legible, and
saves byte-stable files: no dates or software versions in the metadata and a fixed SVG hash salt, so
the same leaderboard always gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import numpy as np
import numpy.typing as npt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Colormap
from matplotlib.figure import Figure

from leaderboard.result import Leaderboard

__all__ = [
    "FIGURE_FORMATS",
    "contrast_ratio",
    "label_colour",
    "plot_battle_counts",
    "plot_calibration",
    "plot_intervals",
    "plot_win_rates",
    "relative_luminance",
    "save_figure",
]

FIGURE_FORMATS: tuple[str, ...] = ("svg", "png")
PNG_DPI = 100
SVG_HASH_SALT = "arena-leaderboard"
# Heights and widths per model, in inches: enough for a 7-point label per row.
ROW_INCHES = 0.16
CELL_INCHES = 0.16
# Below this many models the heatmap cells carry their numbers.
ANNOTATE_MAX_MODELS = 16


def relative_luminance(rgb: npt.ArrayLike) -> float:
    """WCAG 2 relative luminance of an sRGB colour.

    Parameters
    ----------
    rgb : array_like of float
        Red, green and blue in [0, 1] (an alpha channel, if present, is ignored).

    Returns
    -------
    float
        ``0.2126 R + 0.7152 G + 0.0722 B`` on the linearised channels (WCAG 2.2, "relative luminance").
    """
    channels = np.asarray(rgb, dtype=np.float64)[:3]
    linear = np.where(channels <= 0.04045, channels / 12.92, ((channels + 0.055) / 1.055) ** 2.4)
    return float(linear @ np.array([0.2126, 0.7152, 0.0722]))


def contrast_ratio(first: npt.ArrayLike, second: npt.ArrayLike) -> float:
    """WCAG 2 contrast ratio ``(L1 + 0.05) / (L2 + 0.05)`` of two sRGB colours, from 1 to 21."""
    high, low = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def label_colour(background: npt.ArrayLike) -> str:
    """Black or white, whichever contrasts more with ``background`` (an sRGB(A) colour in [0, 1])."""
    on_black = contrast_ratio(background, (0.0, 0.0, 0.0))
    on_white = contrast_ratio(background, (1.0, 1.0, 1.0))
    return "black" if on_black >= on_white else "white"


def _label_size(n_models: int) -> float:
    """Font size for model names: large for a few models, 7 points at a hundred."""
    return float(np.clip(13.0 - n_models / 12.0, 7.0, 11.0))


def plot_intervals(leaderboard: Leaderboard, *, title: str | None = None) -> Figure:
    """Ratings with their interval whiskers, one row per model, best at the top.

    Parameters
    ----------
    leaderboard : Leaderboard
        The fitted leaderboard; rows are sorted by rating (ties by name).
    title : str, optional
        Figure title; by default names the method and interval level.

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
    fig = Figure(figsize=(9.0, max(3.0, 1.4 + ROW_INCHES * n * (11.0 / 7.0 if n < 30 else 1.0))))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    y = np.arange(n)
    err = np.vstack([np.maximum(rating - low, 0.0), np.maximum(high - rating, 0.0)])
    ax.errorbar(rating, y, xerr=err, fmt="o", color="#1f4e79", ecolor="#6f9fd8", capsize=2.5, markersize=4)
    ax.set_yticks(y, names, fontsize=_label_size(n))
    ax.set_ylim(n - 0.5, -0.5)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.set_xlabel("rating (Elo scale)")
    ax.set_ylabel("model (sorted by rating)")
    level = leaderboard.parameters.get("level")
    level_text = f"{float(level):.0%} " if isinstance(level, int | float) else ""
    ax.set_title(title or f"{leaderboard.method}: ratings with {level_text}intervals")
    fig.tight_layout()
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
    matrix: npt.NDArray[np.float64], models: Sequence[str], *, title: str = "battles per pair"
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
    side = max(5.0, 2.5 + CELL_INCHES * n * (1.0 if n >= 30 else 2.2))
    fig = Figure(figsize=(side + 1.5, side))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    cmap = cmap.with_extremes(bad="#f2f2f2")
    image = ax.imshow(
        np.where(np.isfinite(matrix), matrix, np.nan),
        cmap=cmap,
        vmin=vmin,
        vmax=vmax,
        interpolation="nearest",
    )
    ticks = np.arange(n)
    size = _label_size(n)
    ax.set_xticks(ticks, list(models), rotation=90, fontsize=size)
    ax.set_yticks(ticks, list(models), fontsize=size)
    ax.set_xlabel("opponent (column model)")
    ax.set_ylabel("model (row)")
    ax.set_title(title)
    if n <= ANNOTATE_MAX_MODELS:
        for i in range(n):
            for j in range(n):
                value = matrix[i, j]
                if np.isfinite(value):
                    colour = label_colour(cmap(image.norm(value)))
                    ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=8, color=colour)
    bar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    bar.set_label(colorbar_label)
    fig.tight_layout()
    return fig


def plot_calibration(
    tables: Mapping[str, Sequence[Mapping[str, float]]], *, title: str = "Calibration on the test votes"
) -> Figure:
    """Expected against observed score of the left model, by bin of rating difference, one line per
    system (the tables of :func:`leaderboard.calibration.calibration_table`).

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


def save_figure(fig: Figure, stem: Path | str, *, formats: Sequence[str] = FIGURE_FORMATS) -> list[Path]:
    """Save ``fig`` as ``stem.svg`` / ``stem.png`` with byte-stable output; returns the paths written.

    Dates, software names and random SVG ids are what make matplotlib files differ between runs; they
    are switched off here (``metadata`` with ``None`` values and a fixed ``svg.hashsalt``).
    """
    stem = Path(stem)
    written: list[Path] = []
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        with matplotlib.rc_context({"svg.hashsalt": SVG_HASH_SALT, "svg.fonttype": "none"}):
            if fmt == "svg":
                fig.savefig(path, format="svg", metadata={"Date": None, "Creator": None})
            elif fmt == "png":
                fig.savefig(path, format="png", dpi=PNG_DPI, metadata={"Software": None})
            else:
                raise ValueError(f"unsupported figure format {fmt!r}")
        written.append(path)
    return written
