"""A snapshot's figures drawn by a forked child while the parent computes the rest of the snapshot.

The six figures (matplotlib, SVG and PNG) of a 100-model board take seconds to draw, as long as the
fit itself, and need nothing but the fitted board and the counts. Once the fit is done, a child forked
from the publishing process draws them on another core while the parent computes the fragility
certificate, the metadata and the data files; :func:`leaderboard.snapshot.write_snapshot` waits for
them before it hashes the folder. A fork hands the child the parent's modules and arrays as they are
(nothing pickled, nothing imported again), and the child draws exactly what the parent would: the same
bytes. Where the platform cannot fork, or the child fails, the parent draws the figures itself when it
waits, so a drawing error is raised in the parent as it would be without the child.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from pathlib import Path

from leaderboard.data import PairCounts
from leaderboard.result import Leaderboard
from leaderboard.snapshot import draw_plots

__all__ = ["CHILD_TIMEOUT_SECONDS", "PlotDrawing", "command_line_process", "forking_is_safe"]

#: Far beyond what drawing any board takes (seconds for a hundred models).
CHILD_TIMEOUT_SECONDS = 900.0


_command_line = False


def command_line_process() -> None:
    """Declare this process a command such as ``arena publish``: besides its main thread it runs at most
    the progress bar's refresh thread, whose locks (the bar's, the terminal's) the child never takes."""
    global _command_line
    _command_line = True


def forking_is_safe() -> bool:
    """Whether a child may be forked here: the platform forks, and no other thread can hold a lock the
    child needs.

    A lock another thread holds at the fork (a log handler's, an import's, a connection pool's, the
    drawing backend's) stays held for ever in the child. A process running one Python thread, or a
    command (:func:`command_line_process`), forks; the web server, whose admin page can publish and
    whose threads do anything, draws the figures in place."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    return _command_line or threading.active_count() == 1


def _draw_in_child(out: Path, leaderboard: Leaderboard, counts: PairCounts) -> None:
    # Output streams of the child's own: another thread may have held the parent's stderr lock (the
    # progress bar writing) at the fork, and a warning printed here would wait for it for ever.
    sys.stdout = sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - until the child exits
    try:
        draw_plots(out, leaderboard, counts)
    except BaseException:  # the parent draws again and raises it; no traceback from the child
        sys.exit(1)


class PlotDrawing:
    """The figures of ``leaderboard`` being drawn into ``out`` by a forked child (see the module), when
    ``fork`` says so (by default when :func:`forking_is_safe`); otherwise drawn in place by :meth:`wait`.

    :meth:`wait` returns once they are there; :meth:`cancel` stops a child whose folder is being
    given up (the publish failed), so it writes nothing more into it."""

    def __init__(
        self, out: Path | str, leaderboard: Leaderboard, counts: PairCounts, *, fork: bool | None = None
    ) -> None:
        self._args = (Path(out), leaderboard, counts)
        self._child: multiprocessing.process.BaseProcess | None = None
        if fork if fork is not None else forking_is_safe():
            child = multiprocessing.get_context("fork").Process(
                target=_draw_in_child, args=self._args, name="arena-plots", daemon=True
            )
            child.start()
            self._child = child

    def wait(self) -> None:
        """Block until the figures are in the folder: drawn by the child, or else drawn here (a child
        still drawing after :data:`CHILD_TIMEOUT_SECONDS`, say stuck on a lock some other thread held
        when it was forked, is stopped first)."""
        child, self._child = self._child, None
        if child is not None:
            child.join(CHILD_TIMEOUT_SECONDS)
            if child.is_alive():
                child.terminate()
                child.join()
            elif child.exitcode == 0:
                return
        draw_plots(*self._args)

    def cancel(self) -> None:
        """Stop the child if it is still drawing (nothing is drawn here)."""
        child, self._child = self._child, None
        if child is not None:
            if child.is_alive():
                child.terminate()
            child.join()
