"""A published board's fit: the board of the counts as the request asks, its certificates and its style board.

Publishing (:mod:`arena.publish.snapshots`) and recompute (:mod:`arena.publish.recompute`) fit through these
functions, so a board fitted while the votes are still being read and one fitted afterwards are the same
fit: :func:`fit_board` for the Bradley-Terry family, :func:`fit_by_source` for the source-aware composite,
and beside them what the metadata carries about the board (its fragility, the judges' position terms) and
the style-controlled board of the same votes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from arena.publish.drawing import PlotDrawing
from leaderboard.battles import Battles
from leaderboard.bt.clusters import Clusters
from leaderboard.bt.compute import fit_leaderboard
from leaderboard.bt.fit import BTFit
from leaderboard.bt.request import FitRequest, method_spec
from leaderboard.data import PairCounts
from leaderboard.result import Leaderboard
from leaderboard.style.board import StyleBoard, compute_style_board, expand_style

if TYPE_CHECKING:  # the database stack is imported where it is used: a fit from a file needs none
    from votes.reads.annotated import AgreementInput

__all__ = [
    "FittedBoard",
    "Progress",
    "board_fragility",
    "board_judge_positions",
    "fit_board",
    "fit_by_source",
    "fit_style_board",
]

#: ``progress(done, total)`` after each bootstrap round (or batch of rounds).
Progress = Callable[[int, int], None]


def fit_board(
    counts: PairCounts,
    request: FitRequest,
    *,
    progress: Progress | None = None,
    clusters: Clusters | None = None,
    n_jobs: int | None = None,
) -> tuple[Leaderboard, BTFit]:
    """The board of ``counts`` as ``request`` asks (the math lives in :mod:`leaderboard`) and its point fit,
    for the certificates of the same board; ``n_jobs`` bootstrap threads (default: up to two), which
    change how fast, never what."""
    return fit_leaderboard(counts, request, progress=progress, clusters=clusters, n_jobs=n_jobs)


def fit_by_source(read: AgreementInput, request: FitRequest) -> tuple[Leaderboard, dict[str, Any]]:
    """The composite board of votes with their annotators, and its ``composite`` metadata."""
    from leaderboard.composite.board import composite_board
    from votes.reads.annotated import composite_input

    if len(read.battles) == 0:
        raise ValueError("no votes with an annotator and a prompt to fit the composite on")
    fitted = composite_board(
        composite_input(read, request.families),
        read.battles,
        interval=request.interval,
        n_rounds=request.n_rounds,
        level=request.level,
        random_state=request.random_state,
        rectify=request.rectify,
    )
    return fitted.board, fitted.metadata


def board_fragility(counts: PairCounts, request: FitRequest, fit: BTFit | None = None) -> dict[str, Any]:
    """The fragility certificate of the default board (:mod:`leaderboard.design.fragility`), for the metadata.

    ``fit`` is the board's own point fit (:func:`fit_board`), used when it is the one the certificate
    would make (no anchor): then the votes are not fitted a second time."""
    from leaderboard.design.fragility import fragility

    try:
        spec = method_spec(request.method, request.model)
        return fragility(counts, fit=fit if request.anchor is None else None, spec=spec).describe()
    except (ValueError, RuntimeError) as exc:
        return {"error": str(exc)}


def board_judge_positions(judges: Battles) -> dict[str, Any]:
    """Each judge's left-side advantage on the board's votes and the pooled figure whose interval admits
    their spread (:mod:`leaderboard.quality.judge_position`), for the metadata; ``error`` when it cannot be
    fitted (fewer than two judges with enough votes)."""
    from leaderboard.quality.judge_position import judge_positions

    try:
        described = judge_positions(judges, judges.annotator_names or None).describe()
    except (ValueError, RuntimeError) as exc:
        return {"error": str(exc)}
    described["judges"] = sorted(described["judges"], key=lambda j: str(j["judge"]))
    return {"method": "davidson-position", **described}


def fit_style_board(
    battles: Battles, default: Leaderboard, request: FitRequest, *, progress: Progress | None = None
) -> StyleBoard:
    """The style-controlled board of the same votes, with the same request (and so seed) as ``default``."""
    return compute_style_board(
        battles, features=expand_style(request.style), default=default, request=request, progress=progress
    )


class FittedBoard(NamedTuple):
    """A board fitted before :func:`~arena.publish.recompute.recompute_snapshot` is called (publishing fits
    while the votes are still being read): the counts it was fitted on, the board and its point fit, and
    its figures being drawn into the snapshot's folder (None without figures)."""

    counts: PairCounts
    board: Leaderboard
    point_fit: BTFit | None
    drawing: PlotDrawing | None
