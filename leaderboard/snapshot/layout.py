"""How the figures are laid out: sizes from the number of models and the longest name, which rows are
named, literal text, and label colours that contrast with their cells.

Figures are sized from the number of models *and* the longest name, laid out by matplotlib's
constrained layout and saved with a tight box, so long names are never clipped. Up to 34 models every
row carries its name; beyond that the rows share ``GRID_INCHES`` and every k-th row is named, k the
fewest rows a name needs to stay readable (the full names are in the CSV files and the table: see
:func:`label_step`). Model names are drawn literally (mathtext off: ``$x$`` in a name is two dollar signs
and an x). Shared by every drawer of :mod:`leaderboard.snapshot.plots`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib
import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

__all__ = [
    "AXIS_LABEL_INCHES",
    "BOX_HEIGHT",
    "CELL_MAX_INCHES",
    "CELL_NUMBER_MIN_INCHES",
    "CELL_TEXT_MIN_POINTS",
    "CELL_TEXT_POINTS",
    "CHAR_EMS",
    "COLORBAR_INCHES",
    "GRID_INCHES",
    "PLOT_INCHES",
    "ROW_LINES",
    "THINNED_SPARE_INCHES",
    "TITLE_INCHES",
    "TITLE_POINTS",
    "contrast_ratio",
    "draw_literally",
    "label_colour",
    "label_size",
    "label_step",
    "ModelRows",
    "finish_model_rows",
    "longest_name",
    "model_rows_figure",
    "name_rows",
    "new_figure",
    "relative_luminance",
    "row_inches",
    "row_pitch",
    "set_title",
    "text_inches",
]

# Width of an average character of the default sans-serif font, in ems (generous, so names never clip).
CHAR_EMS = 0.62
# A row or heatmap cell is at least this many label heights tall, so neighbouring names never touch.
ROW_LINES = 1.45
# Heatmap cells are at most this wide (inches). The models share this height (inches) in the heatmaps
# and the one-row-per-model figures once a name per row would need more: from 35 models on, rows are
# thinner than a name and only every k-th row is named. Naming all of 100 models grew a heatmap to 17
# inches and drew ~6,600 glyphs per PNG one at a time (0.5 s each; 3.9 s for a snapshot's figures).
CELL_MAX_INCHES = 0.5
GRID_INCHES = 7.0
# Spare width (inches) right of a heatmap's colour bar whose names are thinned (0.3 otherwise).
THINNED_SPARE_INCHES = 0.5
# Numbers in heatmap cells: at most this size, and left out where they would need less than the minimum.
CELL_TEXT_POINTS = 8.0
CELL_TEXT_MIN_POINTS = 6.0
# Cells narrower than this (inches; 14.4 points, up to 35 models on the 7-inch grid) carry no numbers at
# all: a 100-model battle-count grid would otherwise hold thousands of 7-point numbers in 10-point cells,
# too cramped to read as a picture and most of the drawing time (the exact values are in the CSV files).
CELL_NUMBER_MIN_INCHES = 0.2
# Room for a colour bar, titles and axis labels around the plotting area (inches).
COLORBAR_INCHES = 1.3
TITLE_INCHES = 0.9
TITLE_POINTS = 12.0
# Height of a bootstrap box, in rows (its caps are half as wide).
BOX_HEIGHT = 0.6
# Width of the plotting area of the one-row-per-model figures (inches).
PLOT_INCHES = 6.5
AXIS_LABEL_INCHES = 0.5


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


def label_size(n_models: int) -> float:
    """Font size for model names: large for a few models, 7 points from about 70 models on."""
    return float(np.clip(13.0 - n_models / 12.0, 7.0, 11.0))


def text_inches(n_chars: int, points: float) -> float:
    """Generous width estimate of a one-line text of ``n_chars`` characters at ``points``."""
    return n_chars * points * CHAR_EMS / 72.0


def row_inches(points: float) -> float:
    """Height (inches) a name at ``points`` needs: ``ROW_LINES`` label heights."""
    return ROW_LINES * points / 72.0


def row_pitch(n_models: int, points: float) -> float:
    """Height of a row of the one-row-per-model figures (inches): a name's height, or a share of
    ``GRID_INCHES`` when the names would need more than that in all."""
    return min(row_inches(points), GRID_INCHES / max(n_models, 1))


def label_step(pitch: float, points: float) -> int:
    """Name every k-th row (or column) of ``pitch`` inches: the smallest k whose span fits a name at
    ``points`` (``ROW_LINES`` label heights), so neighbouring names never touch. 1 when every row fits.

    Parameters
    ----------
    pitch : float
        Height of one row (inches), positive.
    points : float
        Font size of the names.

    Returns
    -------
    int
        The step k >= 1.
    """
    if not pitch > 0.0:
        raise ValueError(f"row height must be positive, got {pitch!r}")
    # A hair of tolerance, so a row exactly one name high is not rounded up to two by float error.
    return max(1, int(np.ceil(row_inches(points) / pitch - 1e-9)))


def name_rows(ax: Axes, names: Sequence[str], pitch: float, points: float, *, columns: bool = False) -> None:
    """Tick and name every :func:`label_step`-th row (and column, for heatmaps) from the first."""
    step = label_step(pitch, points)
    ticks = np.arange(0, len(names), step)
    shown = [names[k] for k in ticks.tolist()]
    if columns:
        ax.set_xticks(ticks, shown, rotation=90, fontsize=points)
    ax.set_yticks(ticks, shown, fontsize=points)


def longest_name(models: Sequence[str]) -> int:
    """Characters of the longest model name (1 for none)."""
    return max((len(m) for m in models), default=1)


def new_figure(width: float, height: float) -> Figure:
    """A fresh figure of ``width`` by ``height`` inches with constrained layout and its own canvas (no
    pyplot state); text on it is drawn literally: no mathtext, whatever a model name contains."""
    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


@dataclass(frozen=True)
class ModelRows:
    """A figure of one row per model (ratings, average win rates, bootstrap distributions): its axes, the
    names in row order (the first at the top), their label size and the row height in inches."""

    fig: Figure
    ax: Axes
    names: Sequence[str]
    size: float
    pitch: float


def model_rows_figure(names: Sequence[str]) -> ModelRows:
    """A fresh figure with one row per name, wide enough for the longest name beside the plot and tall
    enough for a readable row each (see :func:`row_pitch`); the rows are at y = 0, 1, ..."""
    n = len(names)
    size = label_size(n)
    pitch = row_pitch(n, size)
    width = text_inches(longest_name(names), size) + AXIS_LABEL_INCHES + PLOT_INCHES
    fig = new_figure(width, max(3.0, TITLE_INCHES + AXIS_LABEL_INCHES + pitch * n))
    return ModelRows(fig, fig.add_subplot(), names, size, pitch)


def finish_model_rows(rows: ModelRows) -> None:
    """Name the rows (the first at the top) and draw the vertical grid behind the marks."""
    name_rows(rows.ax, rows.names, rows.pitch, rows.size)
    rows.ax.set_ylim(len(rows.names) - 0.5, -0.5)
    rows.ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    rows.ax.set_axisbelow(True)


def set_title(ax: Axes, text: str, width: float) -> None:
    """A caption-like title, wrapped to ``width`` inches (the plotting area: titles are centred on it, so
    wrapped to it they never run past the figure's edge)."""
    per_line = max(20, int(width * 72.0 / (TITLE_POINTS * CHAR_EMS)))
    # Placed at the top of the axes, where matplotlib's automatic placement puts it when no tick labels
    # are on top (none here): the automatic placement measures every y tick label on every draw, which
    # at 100 models was a fifth of a heatmap's drawing time. The files are byte for byte the same.
    ax.set_title(textwrap.fill(text, per_line), fontsize=TITLE_POINTS, y=1.0)


def draw_literally(fig: Figure) -> None:
    """Switch mathtext off on every text of the figure (tick labels are made when the axes are set up)."""
    for text in fig.findobj(Text):
        text.set_parse_math(False)
