"""A figure as bytes: SVG and PNG, byte-stable, all or nothing on disk.

Dates, software names and random SVG ids are what make matplotlib files differ between runs; they are
switched off here (``metadata`` with ``None`` values and a fixed ``svg.hashsalt``), so the same
leaderboard always gives the same bytes and a snapshot's digests say whether two boards are the same.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from leaderboard.atomic import write_bytes_atomic
from leaderboard.snapshot.files import FIGURE_FORMATS

__all__ = ["PNG_DPI", "SVG_HASH_SALT", "render_figure", "save_figure"]

PNG_DPI = 100
SVG_HASH_SALT = "arena-leaderboard"


def save_figure(fig: Figure, stem: Path | str, *, formats: Sequence[str] = FIGURE_FORMATS) -> list[Path]:
    """Save ``fig`` as ``stem.svg`` / ``stem.png`` with byte-stable output (:func:`render_figure`);
    returns the paths written, each written all or nothing."""
    stem = Path(stem)
    written: list[Path] = []
    for fmt, blob in render_figure(fig, formats=formats).items():
        path = stem.with_suffix(f".{fmt}")
        write_bytes_atomic(path, blob)  # a failed write leaves the previous figure
        written.append(path)
    return written


def render_figure(fig: Figure, *, formats: Sequence[str] = FIGURE_FORMATS) -> dict[str, bytes]:
    """``fig`` in each of ``formats`` (``svg``, ``png``), as the bytes :func:`save_figure` writes.

    Dates, software names and random SVG ids are what make matplotlib files differ between runs; they
    are switched off here (``metadata`` with ``None`` values and a fixed ``svg.hashsalt``).
    """
    for fmt in formats:
        if fmt not in ("svg", "png"):
            raise ValueError(f"unsupported figure format {fmt!r}")
    rendered: dict[str, bytes] = {}
    with matplotlib.rc_context(
        {"svg.hashsalt": SVG_HASH_SALT, "svg.fonttype": "none", "text.parse_math": False}
    ):
        # Lay the figure out and measure its tight box once, then save every format with that fixed box
        # and the layout frozen: matplotlib would otherwise lay out, measure and draw once more per format.
        bbox = _tight_box(fig)
        engine = fig.get_layout_engine()
        fig.set_layout_engine(None)  # None, not "none": a placeholder engine would make savefig lay out again
        try:
            for fmt in formats:
                handle = io.BytesIO()
                if fmt == "svg":
                    metadata = {"Date": None, "Creator": None}
                    fig.savefig(handle, format="svg", metadata=metadata, bbox_inches=bbox)
                else:
                    fig.savefig(
                        handle, format="png", dpi=PNG_DPI, metadata={"Software": None}, bbox_inches=bbox
                    )
                rendered[fmt] = handle.getvalue()
        finally:
            fig.set_layout_engine(engine)
    return rendered


def _tight_box(fig: Figure) -> Bbox:
    """The figure's drawn extent in inches plus the usual save padding, after one layout pass.

    The layout engine runs on its own: a whole draw without rendering (what ``savefig`` would do) also
    positions every artist, which the tight box measures again anyway; the saved files are the same."""
    canvas = fig.canvas
    if not isinstance(canvas, FigureCanvasAgg):
        canvas = FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]
    engine = fig.get_layout_engine()
    if fig.axes and engine is not None:
        try:
            engine.execute(fig)
        except ValueError:  # as Figure.draw does: a figure too small to lay out is drawn as it is
            pass
    box = fig.get_tightbbox(renderer)
    pad = float(matplotlib.rcParams["savefig.pad_inches"])
    return box.padded(pad, pad)
