"""The FIGURES table: every figure a snapshot carries, with its title, drawer, needs and data file.

One entry per figure, read by everything that names figures: the snapshot writer draws them
(:func:`draw_plots`), the drawing child of :mod:`arena.publish.drawing` shares them out and draws the
point-rating ones ahead of the intervals (:func:`point_plot_stems`), the snapshot pages list them with
their titles and link each to the data file it is drawn from. Adding a figure is one entry here plus its
drawer; nothing else spells a figure's stem.

The drawers reach matplotlib (:mod:`leaderboard.snapshot.plots`) only when a figure is drawn, so the web
pages that read this table to list a snapshot's figures never load it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from leaderboard.atomic import write_bytes_atomic
from leaderboard.bt.matrices import PairwiseMatrices, pairwise_matrices
from leaderboard.data import PairCounts
from leaderboard.result import Leaderboard
from leaderboard.snapshot.files import (
    BATTLES_FILE,
    CSV_FILE,
    FIGURE_FORMATS,
    OBSERVED_FILE,
    PREDICTED_FILE,
    leaderboard_table,
)

if TYPE_CHECKING:  # matplotlib is imported where figures are drawn
    from matplotlib.figure import Figure

__all__ = [
    "FIGURES",
    "FigureSources",
    "FigureSpec",
    "Needs",
    "PlotsUnderWay",
    "draw_plots",
    "plot_files",
    "plot_stems",
    "point_plot_stems",
    "render_plots",
    "same_point_plots",
]

#: What a figure is drawn from: ``point``, the point ratings alone (the models' order, the pairwise
#: matrices and the method's name), so a board fitted without intervals draws it as the finished board
#: does (:func:`same_point_plots`); ``board``, the whole board with its intervals and bootstrap rounds.
Needs = Literal["point", "board"]


@dataclass
class FigureSources:
    """What a drawer reads: the fitted board, its models in the table's order and the aggregated votes,
    with the pairwise matrices (in that order) made on first use and only for the figures that show
    them."""

    leaderboard: Leaderboard
    counts: PairCounts
    names: list[str]
    given: PairwiseMatrices | None = field(default=None, repr=False)

    def matrices(self) -> PairwiseMatrices:
        """The pairwise matrices in the table's model order (made once)."""
        if self.given is None:
            self.given = pairwise_matrices(self.counts, self.leaderboard).reorder(self.names)
        return self.given


#: A drawer: the figure of a board, on a fresh matplotlib figure.
Drawer = Callable[[FigureSources], "Figure"]


@dataclass(frozen=True)
class FigureSpec:
    """One figure of a snapshot.

    Attributes
    ----------
    stem : its files' name without the format (``ratings`` -> ``ratings.svg`` and ``ratings.png``)
    title : the caption the snapshot page shows (and the image's alternative text)
    draw : its drawer
    needs : :data:`Needs`
    data_file : the snapshot file holding the numbers it shows (the page links it), or None
    wide : shown across the snapshot page's whole width (a figure with a row per model and long names)
    """

    stem: str
    title: str
    draw: Drawer
    needs: Needs
    data_file: str | None
    wide: bool = False


def _drawing() -> tuple[ModuleType, ModuleType]:
    """The drawers' module and the renderer's (:mod:`leaderboard.snapshot.plots`,
    :mod:`leaderboard.snapshot.render`), imported on first use: matplotlib loads only where figures are
    drawn, so reading snapshots (the web pages) stays light."""
    from leaderboard.snapshot import plots, render  # matplotlib: only where figures are drawn

    return plots, render


def _ratings(src: FigureSources) -> Figure:
    figure: Figure = _drawing()[0].plot_intervals(src.leaderboard)
    return figure


def _winrate_observed(src: FigureSources) -> Figure:
    title = "Observed win rate of each row model against each column model (ties count half)"
    figure: Figure = _drawing()[0].plot_win_rates(src.matrices().observed, src.names, title=title)
    return figure


def _winrate_predicted(src: FigureSources) -> Figure:
    method = src.leaderboard.method
    title = f"Win rate of each row model against each column model predicted by {method}"
    figure: Figure = _drawing()[0].plot_win_rates(src.matrices().predicted, src.names, title=title)
    return figure


def _battle_counts(src: FigureSources) -> Figure:
    figure: Figure = _drawing()[0].plot_battle_counts(src.matrices().n_battles, src.names)
    return figure


def _winrate_average(src: FigureSources) -> Figure:
    figure: Figure = _drawing()[0].plot_average_win_rates(src.matrices().observed, src.names)
    return figure


def _bootstrap(src: FigureSources) -> Figure:
    figure: Figure = _drawing()[0].plot_bootstrap(src.leaderboard)
    return figure


#: The figures, in the order they are drawn and shown.
FIGURES: dict[str, FigureSpec] = {
    spec.stem: spec
    for spec in (
        FigureSpec("ratings", "Ratings with intervals", _ratings, "board", CSV_FILE, wide=True),
        FigureSpec("winrate_observed", "Observed win rate", _winrate_observed, "point", OBSERVED_FILE),
        FigureSpec("winrate_predicted", "Predicted win rate", _winrate_predicted, "point", PREDICTED_FILE),
        FigureSpec("battle_counts", "Battles per pair", _battle_counts, "point", BATTLES_FILE),
        FigureSpec("winrate_average", "Average win rate", _winrate_average, "point", OBSERVED_FILE),
        FigureSpec("bootstrap", "Bootstrap distribution of ratings", _bootstrap, "board", None),
    )
}


def plot_stems() -> tuple[str, ...]:
    """Every figure's stem, in :data:`FIGURES` order."""
    return tuple(FIGURES)


def point_plot_stems() -> tuple[str, ...]:
    """The figures drawn from the point ratings alone (``needs == "point"``), in table order."""
    return tuple(stem for stem, spec in FIGURES.items() if spec.needs == "point")


def plot_files() -> tuple[str, ...]:
    """Every figure's files (``stem.svg``, ``stem.png``), in table order."""
    return tuple(f"{stem}.{fmt}" for stem in FIGURES for fmt in FIGURE_FORMATS)


class PlotsUnderWay(Protocol):
    """Figures being drawn elsewhere (:class:`arena.publish.drawing.PlotDrawing`)."""

    def wait(self) -> None:
        """Return once the figures are in the folder."""


def draw_plots(
    out: Path,
    leaderboard: Leaderboard,
    counts: PairCounts,
    matrices: PairwiseMatrices | None = None,
    *,
    stems: Collection[str] | None = None,
    take: Callable[[str], bool] | None = None,
) -> None:
    """The board's figures (:func:`plot_files`, SVG and PNG; those of ``stems`` only when given) in
    ``out``; ``matrices`` in the table's model order when the caller has them; ``take``: see
    :func:`render_plots`."""
    rendered = render_plots(leaderboard, counts, matrices, stems=stems, take=take)
    out.mkdir(parents=True, exist_ok=True)
    for name, blob in rendered:
        write_bytes_atomic(out / name, blob)


def render_plots(
    leaderboard: Leaderboard,
    counts: PairCounts,
    matrices: PairwiseMatrices | None = None,
    *,
    stems: Collection[str] | None = None,
    take: Callable[[str], bool] | None = None,
) -> Iterator[tuple[str, bytes]]:
    """Each figure of ``stems`` (every one when None; in :data:`FIGURES` order) as ``(file name,
    bytes)``: what :func:`draw_plots` writes, each figure drawn as the iterator reaches it. ``take(stem)``,
    when given, is asked just before a figure is drawn, and the figure is left out unless it says yes
    (figures shared out between two processes as they go: :mod:`arena.publish.drawing`)."""
    chosen = set(FIGURES) if stems is None else set(stems)
    unknown = chosen - set(FIGURES)
    if unknown:
        raise ValueError(f"no such figure: {', '.join(sorted(unknown))}")
    specs = [spec for stem, spec in FIGURES.items() if stem in chosen]
    sources = FigureSources(leaderboard, counts, list(leaderboard_table(leaderboard)["model"]), matrices)
    return (
        (f"{spec.stem}.{fmt}", blob)
        for spec in specs
        if take is None or take(spec.stem)
        for fmt, blob in _drawing()[1].render_figure(spec.draw(sources)).items()
    )


def same_point_plots(a: Leaderboard, b: Leaderboard) -> bool:
    """Whether ``a`` and ``b`` draw the same :func:`point_plot_stems` figures from the same counts: the
    same models, ratings (so order and predicted rates) and method name, whatever their intervals."""
    return a.models == b.models and a.method == b.method and np.array_equal(a.rating, b.rating)
