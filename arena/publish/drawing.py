"""A snapshot's figures drawn by a forked child while the parent computes the rest of the snapshot.

The figures (:data:`~leaderboard.snapshot.figures.FIGURES`, matplotlib, SVG and PNG) of a 100-model
board take seconds to draw, as long as the fit itself, and need nothing but the fitted board and the
counts. A child forked from the publishing process draws them on another core while the parent
computes the fragility certificate, the metadata and the data files;
:func:`leaderboard.snapshot.folder.write_snapshot` waits for them before it hashes the folder.
A fork hands the child the parent's modules and arrays as they are (nothing imported again), and the
child draws exactly what the parent would: the same bytes. Where the platform cannot fork, or the child
fails, the parent draws the figures itself when it waits, so a drawing error is raised in the parent as
it would be without the child.

The child may also be forked before the fit (``leaderboard=None``, with a ``preview``): the figures
whose table entry needs the point ratings only (:func:`~leaderboard.snapshot.figures.point_plot_stems`)
can be drawn early, so while the parent runs the bootstrap the child fits the point ratings itself
(``preview``, a fit without intervals, milliseconds) and draws those into memory.
:meth:`PlotDrawing.draw` then hands it the finished board (pickled into an unnamed temporary file both
hold, so the parent never waits for the child to read); the child writes them only when the board
draws them the same (:func:`~leaderboard.snapshot.figures.same_point_plots`), else draws them again,
and draws the others. Nothing reaches the folder before the board it shows is known.

The two processes share the figures out as they go (:class:`_Claims`, flags in memory both hold): the
child takes them first to last, and the parent, once the rest of the snapshot is written and it would
only wait, takes them from the last one back while the child has more left than it can soon draw
(:data:`CHILD_KEEPS`), so both end about together. Each figure is drawn by one of them, in the same
bytes either way.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle  # nosec B403  # only a board the parent process wrote
import sys
import tempfile
import threading
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from leaderboard.atomic import write_bytes_atomic
from leaderboard.data import PairCounts
from leaderboard.result import Leaderboard
from leaderboard.snapshot.figures import (
    draw_plots,
    plot_stems,
    point_plot_stems,
    render_plots,
    same_point_plots,
)

__all__ = ["CHILD_TIMEOUT_SECONDS", "PlotDrawing", "command_line_process", "forking_is_safe"]

#: Figures the parent leaves to the child: it takes one only while at least this many others stay free
#: (:meth:`_Claims.spare`).
CHILD_KEEPS = 2
#: Far beyond the microseconds the figures' lock is held: a process that waits longer stops taking
#: figures (the other died holding it; :meth:`PlotDrawing.wait` then draws what is missing).
CLAIM_LOCK_SECONDS = 10.0
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


class _Claims:
    """Which figures are taken, as flags in shared memory under one lock, made before the fork so both
    processes hold them: each figure is drawn by whichever process takes it first."""

    def __init__(self) -> None:
        self._stems = plot_stems()
        self._flags = multiprocessing.get_context("fork").Array("b", len(self._stems))

    def take(self, stem: str) -> bool:
        """Take ``stem``'s figure; whether it was still free (then the caller draws it)."""
        return self._take(self._stems.index(stem), keep=-1)

    def spare(self, keep: int) -> Iterator[str]:
        """Figures for the parent, from the last one back, each taken just before it is drawn (the
        iterator goes on once it is), while that leaves at least ``keep`` free for the child: the first
        figure the parent draws costs it about two of the child's (matplotlib is imported and warmed
        up), so it helps only where the child has more than that left to draw."""
        for i in reversed(range(len(self._stems))):
            if not self._take(i, keep=keep):
                return
            yield self._stems[i]

    def _take(self, i: int, *, keep: int) -> bool:
        """Take figure ``i`` if it is free and at least ``keep`` others stay free; whether it did (not if
        the lock could not be had: the other process died holding it)."""
        lock = self._flags.get_lock()
        if not lock.acquire(timeout=CLAIM_LOCK_SECONDS):
            return False
        try:
            if self._flags[i] or sum(not flag for flag in self._flags[:]) <= keep:
                return False
            self._flags[i] = 1
            return True
        finally:
            lock.release()


def _draw_in_child(
    out: Path,
    leaderboard: Leaderboard | None,
    counts: PairCounts,
    preview: Callable[[], Leaderboard] | None,
    handover: _Handover | None,
    claims: _Claims | None = None,
) -> None:
    # Output streams of the child's own: another thread may have held the parent's stderr lock (the
    # progress bar writing) at the fork, and a warning printed here would wait for it for ever.
    sys.stdout = sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - until the child exits
    try:
        drawn: list[tuple[str, bytes]] = []
        ahead: Leaderboard | None = None
        if handover is not None:
            handover.writer.close()  # the parent's end: an EOF then means the parent gave up
            if preview is not None:
                try:
                    ahead = preview()
                    drawn = list(render_plots(ahead, counts, stems=point_plot_stems()))
                except Exception:  # the finished board draws them all
                    ahead, drawn = None, []
            leaderboard = handover.receive()
        if leaderboard is None:
            raise ValueError("no board to draw")
        take = claims.take if claims is not None else None
        stems: Collection[str] = plot_stems()
        if ahead is not None and same_point_plots(ahead, leaderboard):
            out.mkdir(parents=True, exist_ok=True)
            kept = {stem for stem in point_plot_stems() if take is None or take(stem)}
            for name, blob in drawn:
                if name.rsplit(".", 1)[0] in kept:
                    write_bytes_atomic(out / name, blob)
            stems = [stem for stem in plot_stems() if stem not in point_plot_stems()]
        draw_plots(out, leaderboard, counts, stems=stems, take=take)
    except BaseException:  # the parent draws again and raises it; no traceback from the child
        sys.exit(1)


class _Handover:
    """The finished board's way to a child forked before it existed: pickled by the parent into an
    unnamed temporary file both processes hold, then announced by one empty message on a pipe. The
    parent never waits for the child to read (a board with its bootstrap rounds is larger than a pipe
    holds), and the child reads it when it is ready for it."""

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close(), in both processes
        self.reader, self.writer = multiprocessing.Pipe(duplex=False)

    def send(self, leaderboard: Leaderboard) -> None:
        """In the parent: the board for the child (an error if the child is gone)."""
        pickle.dump(leaderboard, self.file, protocol=pickle.HIGHEST_PROTOCOL)
        self.file.flush()
        self.writer.send_bytes(b"")

    def receive(self) -> Leaderboard:
        """In the child: the board, once the parent has sent it (EOFError if it gave up instead)."""
        self.reader.recv_bytes()
        self.file.seek(0)
        board = pickle.load(self.file)  # noqa: S301  # nosec B301  # the parent wrote it
        if not isinstance(board, Leaderboard):
            raise TypeError("the parent sent no board")
        return board

    def close(self) -> None:
        self.file.close()
        self.reader.close()
        self.writer.close()


class PlotDrawing:
    """The figures of ``leaderboard`` being drawn into ``out`` by a forked child (see the module), when
    ``fork`` says so (by default when :func:`forking_is_safe`); otherwise drawn in place by :meth:`wait`.

    With ``leaderboard=None`` the child is forked before the board exists and gets it from
    :meth:`draw`; meanwhile it draws into memory the figures of ``preview()`` that need no interval.
    :meth:`wait` returns once they are there; :meth:`cancel` stops a child whose folder is being
    given up (the publish failed), so it writes nothing more into it."""

    def __init__(
        self,
        out: Path | str,
        leaderboard: Leaderboard | None,
        counts: PairCounts,
        *,
        fork: bool | None = None,
        preview: Callable[[], Leaderboard] | None = None,
    ) -> None:
        self._out = Path(out)
        self._counts = counts
        self._leaderboard = leaderboard
        self._child: multiprocessing.process.BaseProcess | None = None
        self._handover: _Handover | None = None
        self._claims: _Claims | None = None
        if fork if fork is not None else forking_is_safe():
            try:
                handover = _Handover() if leaderboard is None else None
            except OSError:  # no temporary file to hand the board over in: drawn here when waited for
                return
            try:
                claims: _Claims | None = _Claims()
            except OSError:  # no shared memory or semaphore here: the child draws every figure
                claims = None
            child = multiprocessing.get_context("fork").Process(
                target=_draw_in_child,
                args=(self._out, leaderboard, counts, preview, handover, claims),
                name="arena-plots",
                daemon=True,
            )
            try:
                child.start()
            except BaseException:
                if handover is not None:
                    handover.close()
                raise
            if handover is not None:
                handover.reader.close()  # the child's end
            self._child, self._handover, self._claims = child, handover, claims

    @property
    def forked(self) -> bool:
        """Whether a child is drawing (on another core, where the platform has two)."""
        return self._child is not None

    def draw(self, leaderboard: Leaderboard) -> None:
        """The finished board of a drawing started without one: handed to the child, or kept for
        :meth:`wait` to draw here."""
        if self._leaderboard is not None:
            raise ValueError("this drawing has its board already")
        self._leaderboard = leaderboard
        handover, self._handover = self._handover, None
        if handover is not None:
            try:
                handover.send(leaderboard)
            except OSError:  # the child is gone: wait() draws here
                pass
            finally:
                handover.close()

    def wait(self) -> None:
        """Block until the figures are in the folder: the last ones the child has not taken yet drawn
        here meanwhile (see the module), the others by the child, or else all drawn here (a child still
        drawing after :data:`CHILD_TIMEOUT_SECONDS`, say stuck on a lock some other thread held when it
        was forked, is stopped first)."""
        if self._leaderboard is None:
            raise ValueError("no board to draw: call draw() first")
        child, self._child = self._child, None
        claims, self._claims = self._claims, None
        drawn_here: list[str] = []
        if child is not None:
            try:
                for stem in claims.spare(CHILD_KEEPS) if claims is not None else ():
                    draw_plots(self._out, self._leaderboard, self._counts, stems=(stem,))
                    drawn_here.append(stem)
            except BaseException:  # raised here as without a child, which is stopped first
                child.terminate()
                child.join()
                raise
            child.join(CHILD_TIMEOUT_SECONDS)
            if child.is_alive():
                child.terminate()
                child.join()
            elif child.exitcode == 0:
                return
        # the child's figures drawn here (it failed, or was stopped): every one not drawn here already
        rest = [stem for stem in plot_stems() if stem not in drawn_here]
        draw_plots(self._out, self._leaderboard, self._counts, stems=rest)

    def cancel(self) -> None:
        """Stop the child if it is still drawing (nothing is drawn here)."""
        child, self._child = self._child, None
        handover, self._handover = self._handover, None
        if handover is not None:
            handover.close()
        if child is not None:
            if child.is_alive():
                child.terminate()
            child.join()
