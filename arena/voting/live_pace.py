"""The shared pace of a live battle's two panes: how much of each answer the annotator sees, and when.

Why a shared pace. Two models answering side by side at their own speeds tell the annotator which is
which before the vote: a model known to be fast is the pane that races ahead and finishes first. So no
pane shows its text at its own model's speed. Both panes are driven by one clock, counted in streamed
deltas (about one token each), that advances no faster than the slower model delivers:

- while both models are writing, the clock is the smaller of their delta counts, so both panes show
  the same number of deltas and both start (leave "waiting") on the same frame;
- once one model has stopped, the clock goes as far as the slowest model (the lowest average rate so
  far, deltas per second since its request started) has reached, and beyond that no faster than that
  rate: when the slower model ends first, the faster model's text, already received, goes on at the same
  pace instead of jumping ahead, and when it ends last nothing changes;
- a pane is complete when the clock has passed its last delta and its end (a model's end counts as one
  more step): the shorter answer completes first, two answers of one length complete on the same frame,
  whichever model was faster, and a pane whose model ended early never reads "done" while the other,
  having written as much, is still at it.

Alternatives weighed. Holding both texts back until both are complete (a progress state and a token count
per pane meanwhile) hides speed just as well only if the counts are held to one pace too, and it leaves
the annotator with no text to read for the whole wait; streaming at the slower pace costs nothing more
when the slower model writes the longer answer, and when it writes the shorter one the faster answer
takes as long to appear as the slower model would need to write it. What the pace still shows is the
slower model's speed, without saying which pane it is.

One cap holds for both panes whatever the models do: the clock never runs faster than :data:`MAX_RATE`
deltas a second, so a burst still reads as text being written.

When the pace stops: once the battle cannot be voted on (a model failed and no other one answers in its
place), the remaining text is shown as it arrives; and the page without JavaScript gets both complete
answers at once. A model that failed and was replaced starts again from an empty pane; the clock then
waits for the new model to catch up with the shown text of the other pane (each pane counts from the
clock's value when its model started, its ``base``).

This module is pure: the caller feeds it the deltas and the time (:class:`Feed`, :meth:`SharedPace.advance`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Feed", "PaneChange", "SharedPace", "Side"]

Side = Literal["a", "b"]
SIDES: tuple[Side, Side] = ("a", "b")

#: Seconds between two steps of the clock while only the pace holds it back.
TICK_S = 0.05
#: Deltas a second the clock never exceeds, whatever the models do: text that arrives in a burst (many
#: deltas in one network read, or a fast pair of models) still grows on the page instead of appearing at
#: once; far faster than anyone reads, and the same for both panes, so it tells nothing.
MAX_RATE = 200.0
#: A rate measured over less time than this is measured over this (a model's first deltas).
_MIN_SPAN_S = 0.05


@dataclass
class Feed:
    """One model's answer as it arrives: its deltas, when its request started, when and how it ended."""

    started_at: float
    pieces: list[str] = field(default_factory=list)
    ended_at: float | None = None  # set when the model is done or failed
    failed: bool = False
    _ends: list[int] = field(default_factory=list)  # the text's length after each delta

    def add(self, delta: str) -> None:
        self.pieces.append(delta)
        self._ends.append((self._ends[-1] if self._ends else 0) + len(delta))

    def end(self, at: float, *, failed: bool = False) -> None:
        self.ended_at = at
        self.failed = failed

    @property
    def count(self) -> int:
        return len(self.pieces)

    @property
    def writing(self) -> bool:
        return self.ended_at is None

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    def text_upto(self, n: int) -> str:
        """The first ``n`` deltas' text."""
        return self.text[: self._ends[n - 1]] if n > 0 else ""

    def rate(self, now: float) -> float | None:
        """Deltas per second since the request started (None before the first delta)."""
        if not self.pieces:
            return None
        span = (self.ended_at if self.ended_at is not None else now) - self.started_at
        return self.count / max(span, _MIN_SPAN_S)


@dataclass(frozen=True)
class PaneChange:
    """What a pane shows now: ``update`` (more text), ``done`` or ``failed`` (its final text)."""

    side: Side
    kind: Literal["update", "done", "failed"]
    text: str
    tokens: int


@dataclass
class SharedPace:
    """One clock for both panes (see the module docstring); ``paced=False`` shows text as it arrives."""

    feeds: dict[Side, Feed]
    paced: bool = True
    clock: float = 0.0
    _base: dict[Side, float] = field(default_factory=lambda: dict.fromkeys(SIDES, 0.0))
    _shown: dict[Side, int] = field(default_factory=lambda: dict.fromkeys(SIDES, 0))
    _ended: set[Side] = field(default_factory=set)
    _at: float | None = None  # when the clock last moved

    def restart(self, side: Side, feed: Feed) -> None:
        """Another model answers on ``side``: its pane is empty again and counts from the clock's value."""
        self.feeds[side] = feed
        self._base[side] = self.clock
        self._shown[side] = 0
        self._ended.discard(side)

    def unpace(self) -> None:
        """From now on show everything as it arrives (the battle cannot be voted on any more)."""
        self.paced = False

    @property
    def complete(self) -> bool:
        """Both panes show their whole, ended answer."""
        return self._ended == set(SIDES)

    def shown(self, side: Side) -> int:
        return self._shown[side]

    def _reach(self, side: Side) -> float:
        """How far ``side``'s model has taken the clock: its deltas, and its end as one step more (so a
        model that ended completes its pane only when the other has ended too, or written past it)."""
        feed = self.feeds[side]
        return self._base[side] + feed.count + (0 if feed.writing else 1)

    def _targets(self) -> tuple[float, float]:
        """How far the clock may go: (the least a writing model has reached, the most any model has)."""
        writing = [self._reach(side) for side, feed in self.feeds.items() if feed.writing]
        return (min(writing) if writing else math.inf), max(self._reach(side) for side in SIDES)

    def _both_writing(self) -> bool:
        return all(feed.writing for feed in self.feeds.values())

    def _slowest(self, now: float) -> tuple[float, float]:
        """The slowest model's rate so far and how far it has reached (infinite before any delta)."""
        rates = [(r, self._reach(s)) for s, f in self.feeds.items() if (r := f.rate(now)) is not None]
        return min(rates) if rates else (math.inf, math.inf)

    def waiting_for_time(self) -> bool:
        """True when only the pace holds the clock back (the caller should call :meth:`advance` again in
        :data:`TICK_S`), False when it waits for a model."""
        gate, top = self._targets()
        return self.paced and self.clock < min(gate, top)

    def advance(self, now: float) -> list[PaneChange]:
        """Move the clock to ``now``; what each pane newly shows.

        While both models write, the clock follows the one behind. Once one has stopped, the other may be
        far ahead: the clock then goes as far as the slowest model has reached, and beyond that no faster
        than its rate. Never faster than :data:`MAX_RATE`."""
        gate, top = self._targets()
        limit = math.inf
        if self.paced and self._at is not None:
            elapsed = now - self._at
            limit = self.clock + MAX_RATE * elapsed
            if not self._both_writing():
                rate, reached = self._slowest(now)
                limit = min(limit, max(reached, self.clock + rate * elapsed))
        self.clock = max(self.clock, min(gate, top, limit))
        self._at = now
        changes: list[PaneChange] = []
        for side in SIDES:
            feed = self.feeds[side]
            if side in self._ended:
                continue
            steps = (
                math.inf
                if feed.failed or not self.paced
                else math.floor(self.clock - self._base[side] + 1e-9)
            )
            shown = int(max(0, min(feed.count, steps)))
            grew = shown > self._shown[side]
            self._shown[side] = max(shown, self._shown[side])
            if not feed.writing and steps > feed.count:  # past its last delta and its end
                self._ended.add(side)
                kind: Literal["done", "failed"] = "failed" if feed.failed else "done"
                changes.append(PaneChange(side, kind, feed.text, feed.count))
            elif grew:
                changes.append(PaneChange(side, "update", feed.text_upto(shown), shown))
        return changes
