"""The shared pace of a live battle's panes, on a made-up clock: neither pane shows its model's speed.

A fast model (10 deltas a second) and a slow one (2 a second) answer on random sides; the panes show the
same number of deltas while both write, leave "waiting" together, complete together when the answers are
as long, and a faster answer already received never jumps ahead when the slower model stops first.
"""

from __future__ import annotations

import pytest

from arena.voting.live_pace import MAX_RATE, Feed, PaneChange, SharedPace, Side


class Race:
    """Two models writing on a made-up clock, stepped by 10 ms; each writes ``length`` deltas at ``rate``
    per second after ``delay`` seconds."""

    def __init__(self, models: dict[Side, tuple[float, int, float]], *, paced: bool = True) -> None:
        self.models = models
        self.feeds: dict[Side, Feed] = {side: Feed(0.0) for side in models}
        self.pace = SharedPace(dict(self.feeds), paced=paced)
        self.now = 0.0
        self.log: list[tuple[float, PaneChange]] = []

    def step(self) -> None:
        self.now = round(self.now + 0.01, 6)
        for side, (rate, length, delay) in self.models.items():
            feed = self.feeds[side]
            due = min(length, int((self.now - delay) * rate + 1e-9)) if self.now >= delay else 0
            while feed.writing and feed.count < due:
                feed.add(f"{side}{feed.count} ")
            if feed.writing and feed.count == length:
                feed.end(self.now)
        self.log += [(self.now, change) for change in self.pace.advance(self.now)]

    def run(self, limit_s: float = 120.0, *, one_count: bool = True) -> None:
        while not self.pace.complete and self.now < limit_s:
            self.step()
            shown = [self.pace.shown(side) for side in ("a", "b")]
            if one_count and all(
                self.feeds[s].writing or self.pace.shown(s) < self.feeds[s].count for s in ("a", "b")
            ):
                assert shown[0] == shown[1], (self.now, shown)  # both incomplete: one count
        assert self.pace.complete

    def completed_at(self, side: Side) -> float:
        return next(t for t, c in self.log if c.side == side and c.kind in ("done", "failed"))

    def first_text_at(self, side: Side) -> float:
        return next(t for t, c in self.log if c.side == side)


@pytest.mark.parametrize("fast", ["a", "b"])
def test_answers_of_one_length_complete_together_whichever_model_is_faster(fast: Side) -> None:
    slow: Side = "b" if fast == "a" else "a"
    race = Race({fast: (10.0, 40, 0.2), slow: (2.0, 40, 1.5)})
    race.run()
    assert race.completed_at("a") == race.completed_at("b")
    assert race.first_text_at("a") == race.first_text_at("b") >= 1.5  # both leave "waiting" together
    assert (race.feeds[fast].ended_at or 99) < 5 < race.completed_at(fast)  # it was done long before


def test_a_faster_answer_received_goes_on_at_the_slower_pace_when_the_slower_model_stops_first() -> None:
    race = Race({"a": (10.0, 60, 0.0), "b": (2.0, 10, 0.0)})
    race.run()
    assert race.completed_at("b") == pytest.approx(5.0, abs=0.05)
    # From 10 deltas at 5 s to 60: at the slow model's rate (2 a second), not in one jump.
    shown = [(t, c.tokens) for t, c in race.log if c.side == "a"]
    after = [(t, n) for t, n in shown if t > 5.0]
    assert after and all(n2 - n1 <= 1 for (_, n1), (_, n2) in zip(after, after[1:], strict=False))
    assert race.completed_at("a") == pytest.approx(30.0, abs=0.5)


def test_the_shorter_answer_completes_first_at_one_pace() -> None:
    race = Race({"a": (10.0, 12, 0.0), "b": (2.0, 30, 0.0)})  # the fast model writes the short answer
    race.run()
    # At the slow model's pace: 12 deltas and the end, one step more (13 deltas of the slow model).
    assert race.completed_at("a") == pytest.approx(6.5, abs=0.05)
    assert race.completed_at("b") == pytest.approx(15.0, abs=0.05)


def test_unpaced_panes_show_text_as_it_arrives() -> None:
    race = Race({"a": (10.0, 20, 0.0), "b": (2.0, 20, 0.0)}, paced=False)
    race.step()
    while race.pace.shown("a") < 20:
        race.step()
    assert race.now == pytest.approx(2.0, abs=0.02) and race.pace.shown("b") < 5


def test_a_replaced_model_starts_from_an_empty_pane_and_the_other_pane_waits_for_it() -> None:
    race = Race({"a": (10.0, 30, 0.0), "b": (10.0, 30, 0.0)})
    for _ in range(100):  # one second: 10 deltas shown on each side
        race.step()
    race.feeds["b"].end(race.now, failed=True)
    fresh = Feed(race.now)
    race.feeds["b"] = fresh
    race.models["b"] = (10.0, 30, race.now)
    race.pace.restart("b", fresh)
    shown_a = race.pace.shown("a")
    race.step()
    assert race.pace.shown("b") == 0 and race.pace.shown("a") == shown_a  # a waits for the new model
    for _ in range(50):
        race.step()
        assert race.pace.shown("a") == shown_a + race.pace.shown("b")  # then both go on at one pace
    race.run(one_count=False)
    assert race.pace.shown("a") == race.pace.shown("b") == 30


def test_a_failed_model_shows_what_it_sent_and_the_pace_can_be_lifted() -> None:
    race = Race({"a": (10.0, 50, 0.0), "b": (2.0, 50, 0.0)})
    for _ in range(100):
        race.step()
    race.feeds["b"].end(race.now, failed=True)
    race.pace.unpace()
    race.step()
    failed = [c for _, c in race.log if c.kind == "failed"]
    assert [(c.side, c.tokens) for c in failed] == [("b", race.feeds["b"].count)]
    assert race.pace.shown("a") == race.feeds["a"].count  # no longer held back


@pytest.mark.parametrize("fast", ["a", "b"])
def test_a_model_that_ended_early_is_not_done_before_the_other_ends_at_the_same_length(fast: Side) -> None:
    """A stream ends a little after its last delta (the finish reason, the usage, then the end): the pane
    of the model that ended long ago waits for the other's end, not only for its last delta."""
    slow: Side = "b" if fast == "a" else "a"
    race = Race({fast: (10.0, 20, 0.0), slow: (2.0, 20, 0.0)})
    while race.feeds[slow].count < 20:
        race.now = round(race.now + 0.01, 6)
        feed = race.feeds[slow]
        while feed.count < min(20, int(race.now * 2.0 + 1e-9)):
            feed.add("s ")
        fast_feed = race.feeds[fast]
        while fast_feed.writing and fast_feed.count < min(20, int(race.now * 10.0 + 1e-9)):
            fast_feed.add("f ")
        if fast_feed.writing and fast_feed.count == 20:
            fast_feed.end(race.now)
        race.log += [(race.now, change) for change in race.pace.advance(race.now)]
    assert not race.pace.complete and race.pace.shown(fast) == race.pace.shown(slow) == 20
    race.now += 0.2  # the slow stream's end arrives 200 ms after its last delta
    race.feeds[slow].end(race.now)
    race.log += [(race.now, change) for change in race.pace.advance(race.now)]
    assert race.pace.complete and race.completed_at(fast) == race.completed_at(slow) == race.now


def test_a_burst_still_grows_on_the_page_at_most_at_the_cap() -> None:
    """Both answers arrive whole in one read: the panes grow over half a second, not in one frame."""
    feeds: dict[Side, Feed] = {"a": Feed(0.0), "b": Feed(0.0)}
    pace = SharedPace(dict(feeds))
    assert pace.advance(0.0) == []
    for feed in feeds.values():
        for i in range(100):
            feed.add(f"{i} ")
        feed.end(0.01)
    now, updates = 0.0, 0
    while not pace.complete:
        now += 0.05
        updates += sum(c.kind == "update" for c in pace.advance(now))
    assert now == pytest.approx(101 / MAX_RATE, abs=0.06) and updates >= 2 * 8
