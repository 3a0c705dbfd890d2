"""Figures drawn by a forked child (arena.publish.drawing): the same bytes and the same snapshot as
drawn in place, an error in the child raised in the parent, and a cancelled child writes nothing more;
a child forked before the fit draws the point ratings' figures ahead, kept only when the board agrees."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from arena.publish import drawing as plot_process
from arena.publish.drawing import PlotDrawing
from leaderboard.snapshot.figures import (
    draw_plots,
    plot_files,
    plot_stems,
    point_plot_stems,
    same_point_plots,
)
from leaderboard.snapshot.folder import write_snapshot
from tests.factories import handmade_leaderboard, simulated_counts

AT = datetime(2026, 1, 1, tzinfo=UTC)


def test_child_draws_the_snapshot_drawn_in_place(tmp_path: Path) -> None:
    counts = simulated_counts()
    board = handmade_leaderboard(counts)
    here = write_snapshot(tmp_path / "here", board, counts, created_at=AT)
    drawing = PlotDrawing(tmp_path / "child", board, counts, fork=True)
    assert drawing._child is not None  # Linux forks: the figures are drawn by the child
    child = write_snapshot(tmp_path / "child", board, counts, created_at=AT, plots=drawing)
    assert child.metadata == here.metadata  # every file's sha256 (figures included) and so the id
    for name in plot_files():
        assert (tmp_path / "child" / name).read_bytes() == (tmp_path / "here" / name).read_bytes(), name


def test_an_error_in_the_child_is_raised_by_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = os.getpid()
    drawn_in: list[int] = []

    def broken(out: Path, *args: object, **kwargs: object) -> None:
        drawn_in.append(os.getpid())  # the child's list is its own copy: only the parent's call shows
        raise RuntimeError(f"cannot draw in {out.name}")

    monkeypatch.setattr(plot_process, "draw_plots", broken)
    counts = simulated_counts()
    drawing = PlotDrawing(tmp_path / "out", handmade_leaderboard(counts), counts, fork=True)
    with pytest.raises(RuntimeError, match="cannot draw in out"):
        drawing.wait()
    assert drawn_in == [parent]


def test_a_cancelled_child_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(out: Path, *args: object) -> None:
        import time

        time.sleep(30)
        out.mkdir(parents=True, exist_ok=True)
        (out / "late.svg").write_text("drawn after the cancel")

    monkeypatch.setattr(plot_process, "draw_plots", slow)
    counts = simulated_counts()
    drawing = PlotDrawing(tmp_path / "out", handmade_leaderboard(counts), counts, fork=True)
    child = drawing._child
    drawing.cancel()
    assert child is not None and not child.is_alive()
    assert not (tmp_path / "out").exists()


def test_a_child_that_never_finishes_is_stopped_and_the_parent_draws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = os.getpid()
    drawn_in: list[int] = []

    def stuck_in_child(out: Path, *args: object, **kwargs: object) -> None:
        if os.getpid() != parent:
            import time

            time.sleep(60)
        drawn_in.append(os.getpid())

    monkeypatch.setattr(plot_process, "draw_plots", stuck_in_child)
    monkeypatch.setattr(plot_process, "CHILD_TIMEOUT_SECONDS", 0.5)
    counts = simulated_counts()
    drawing = PlotDrawing(tmp_path / "out", handmade_leaderboard(counts), counts, fork=True)
    child = drawing._child
    drawing.wait()
    # the figures the child never took drawn here as it waited, then the rest once it was stopped
    assert drawn_in and set(drawn_in) == {parent}
    assert child is not None and not child.is_alive()


def test_a_process_running_other_threads_draws_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With another thread alive (as in the web server) no child is forked; the figures are drawn in
    place when waited for, the same as a child draws them. A command (its other thread the progress
    bar's) forks."""
    monkeypatch.setattr(plot_process, "_command_line", False)  # whatever a command run in this process set
    counts = simulated_counts()
    board = handmade_leaderboard(counts)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, name="a server's thread")
    other.start()
    try:
        assert not plot_process.forking_is_safe()
        drawing = PlotDrawing(tmp_path / "out", board, counts)
        assert drawing._child is None
        drawing.wait()
        plot_process.command_line_process()
        assert plot_process.forking_is_safe()
    finally:
        stop.set()
        other.join()
    write_snapshot(tmp_path / "here", board, counts, created_at=AT)
    for name in plot_files():
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "here" / name).read_bytes(), name


def _recording_stems(monkeypatch: pytest.MonkeyPatch, log: Path) -> None:
    """``draw_plots`` as it is, each call's figures written to ``log`` (the child's calls included)."""

    def recorded(out: Path, *args: Any, stems: Sequence[str] = plot_stems(), **kwargs: Any) -> None:
        with log.open("a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()} {','.join(stems)}\n")
        draw_plots(out, *args, stems=stems, **kwargs)

    monkeypatch.setattr(plot_process, "draw_plots", recorded)


def test_a_child_forked_before_the_fit_draws_the_point_figures_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forked before the board exists, the child draws the figures of the point ratings from its preview
    (the same ratings, narrower intervals); once handed the board it writes them and draws the other
    two: the bytes of the figures drawn in place."""
    log = tmp_path / "stems.log"
    _recording_stems(monkeypatch, log)
    counts = simulated_counts()
    board = handmade_leaderboard(counts)
    here = write_snapshot(tmp_path / "here", board, counts, created_at=AT)
    drawing = PlotDrawing(
        tmp_path / "child", None, counts, fork=True, preview=lambda: handmade_leaderboard(counts, spread=5.0)
    )
    assert drawing._child is not None
    drawing.draw(board)
    child = write_snapshot(tmp_path / "child", board, counts, created_at=AT, plots=drawing)
    assert child.metadata == here.metadata
    for name in plot_files():
        assert (tmp_path / "child" / name).read_bytes() == (tmp_path / "here" / name).read_bytes(), name
    ahead = [line.split()[1] for line in log.read_text().splitlines() if int(line.split()[0]) != os.getpid()]
    assert ahead == [",".join(stem for stem in plot_stems() if stem not in point_plot_stems())]


def test_a_preview_other_than_the_board_is_drawn_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A preview whose ratings are not the board's (another order) leaves no figure: the child draws
    all six from the board."""
    log = tmp_path / "stems.log"
    _recording_stems(monkeypatch, log)
    counts = simulated_counts()
    board = handmade_leaderboard(counts)
    other = replace(board, rating=board.rating[::-1].copy())
    assert not same_point_plots(other, board)
    write_snapshot(tmp_path / "here", board, counts, created_at=AT)
    drawing = PlotDrawing(tmp_path / "child", None, counts, fork=True, preview=lambda: other)
    drawing.draw(board)
    drawing.wait()
    for name in plot_files():
        assert (tmp_path / "child" / name).read_bytes() == (tmp_path / "here" / name).read_bytes(), name
    asked = [line.split()[1] for line in log.read_text().splitlines() if int(line.split()[0]) != os.getpid()]
    assert asked == [",".join(plot_stems())]  # by the child: the six from the board (those it still takes)


def test_a_child_forked_before_the_fit_writes_nothing_until_it_has_the_board(tmp_path: Path) -> None:
    """The figures drawn ahead stay in the child's memory: a fit that fails (the drawing cancelled
    before any board was handed over) leaves no folder."""
    counts = simulated_counts()
    board = handmade_leaderboard(counts)
    drawing = PlotDrawing(tmp_path / "out", None, counts, fork=True, preview=lambda: board)
    child = drawing._child
    assert child is not None
    time.sleep(1.0)  # long enough to have drawn some figures ahead
    drawing.cancel()
    assert not child.is_alive()
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="no board to draw"):
        drawing.wait()


def test_a_drawing_without_a_child_draws_the_board_it_is_handed(tmp_path: Path) -> None:
    counts = simulated_counts()
    board = handmade_leaderboard(counts)
    drawing = PlotDrawing(tmp_path / "out", None, counts, fork=False, preview=lambda: board)
    assert drawing._child is None
    drawing.draw(board)
    with pytest.raises(ValueError, match="has its board already"):
        drawing.draw(board)
    drawing.wait()
    write_snapshot(tmp_path / "here", board, counts, created_at=AT)
    for name in plot_files():
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "here" / name).read_bytes(), name


def test_a_child_gone_before_the_board_is_handed_over_leaves_the_drawing_to_the_parent(
    tmp_path: Path,
) -> None:
    counts = simulated_counts()
    board = handmade_leaderboard(counts)
    drawing = PlotDrawing(tmp_path / "out", None, counts, fork=True)
    child = drawing._child
    assert child is not None
    child.terminate()
    child.join()
    drawing.draw(board)  # the pipe is broken: no error, the parent draws when it waits
    drawing.wait()
    write_snapshot(tmp_path / "here", board, counts, created_at=AT)
    for name in plot_files():
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "here" / name).read_bytes(), name


def test_no_temporary_file_to_hand_the_board_over_in_means_no_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_room(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", no_room)
    counts = simulated_counts()
    board = handmade_leaderboard(counts)
    drawing = PlotDrawing(tmp_path / "out", None, counts, fork=True)
    assert drawing._child is None and not drawing.forked
    drawing.draw(board)
    drawing.wait()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(plot_files())


def test_figures_are_taken_once_the_parent_from_the_last_back() -> None:
    claims = plot_process._Claims()
    assert claims.take("ratings") and not claims.take("ratings")
    assert claims.take("battle_counts")
    # from the end back to the first taken one, what lies before it being the child's
    assert list(claims.spare(0)) == ["bootstrap", "winrate_average"]
    assert list(claims.spare(0)) == []
    # each taken only as it is reached, and only while more than ``keep`` others are free
    fresh = plot_process._Claims()
    spare = fresh.spare(2)
    assert next(spare) == "bootstrap"
    assert fresh.take("winrate_average")  # the child took it meanwhile: the parent stops there
    assert list(spare) == []
    last = plot_process._Claims()
    for stem in plot_stems()[:3]:
        assert last.take(stem)
    assert list(last.spare(2)) == ["bootstrap"]  # three were free: one taken, two left to the child


def test_the_parent_draws_the_last_figures_the_child_has_not_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow child (a second before it takes each figure after its first): the parent, waiting, draws
    the figures from the last one back until it meets the one the child took; together they draw each
    figure once, the bytes drawn in place."""
    parent = os.getpid()
    real_take = plot_process._Claims.take

    def slow_in_child(self: plot_process._Claims, stem: str) -> bool:
        if os.getpid() != parent and stem != plot_stems()[0]:
            time.sleep(1.0)
        return real_take(self, stem)

    monkeypatch.setattr(plot_process._Claims, "take", slow_in_child)
    counts = simulated_counts()
    board = handmade_leaderboard(counts)
    here = write_snapshot(tmp_path / "here", board, counts, created_at=AT)
    drawing = PlotDrawing(tmp_path / "shared", board, counts, fork=True)
    assert drawing._child is not None and drawing._claims is not None
    flags = drawing._claims._flags
    deadline = time.monotonic() + 60
    while not flags[0] and time.monotonic() < deadline:  # the child has taken its first figure
        time.sleep(0.01)
    drawn_here: list[str] = []

    def recorded(out: Path, *args: Any, stems: Sequence[str] = plot_stems(), **kwargs: Any) -> None:
        drawn_here.extend(stems)  # the parent's calls only: the child was forked before this patch
        draw_plots(out, *args, stems=stems, **kwargs)

    monkeypatch.setattr(plot_process, "draw_plots", recorded)
    shared = write_snapshot(tmp_path / "shared", board, counts, created_at=AT, plots=drawing)
    assert shared.metadata == here.metadata
    for name in plot_files():
        assert (tmp_path / "shared" / name).read_bytes() == (tmp_path / "here" / name).read_bytes(), name
    # the last figures, drawn here from the last one back; the child drew the first one at least
    assert drawn_here and drawn_here == list(reversed(plot_stems()))[: len(drawn_here)]
    assert plot_stems()[0] not in drawn_here


def test_a_lock_held_for_ever_stops_the_taking(monkeypatch: pytest.MonkeyPatch) -> None:
    """The other process died holding the figures' lock: nothing more is taken (and nobody waits for
    ever); the parent then draws what is missing once the child is found dead."""
    monkeypatch.setattr(plot_process, "CLAIM_LOCK_SECONDS", 0.05)
    claims = plot_process._Claims()
    held, done = threading.Event(), threading.Event()

    def hold() -> None:  # another holder (the lock is re-entrant for its own thread)
        with claims._flags.get_lock():
            held.set()
            done.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        assert not claims.take("ratings")
        assert list(claims.spare(0)) == []
    finally:
        done.set()
        holder.join()
    assert claims.take("ratings")
