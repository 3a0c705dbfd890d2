"""An online rater inside the vote transaction: the locked models' states, one vote's step, the write-back.

:mod:`votes.voting.recording` runs the plain Elo itself (its fast path) and hands every other online rater's
votes to :func:`rate_vote`, one at a time in vote order, with the :class:`LiveBook` read from the rows it
locked (:func:`open_book`); :func:`write_states` writes the touched rows back with the votes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, func, update
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Connection

from leaderboard.online.raters import OnlineRater
from votes.models import utcnow
from votes.tables import liverating_t, model_t
from votes.voting.battles import VoteRequest
from votes.voting.live import decode_state, encode_state, has_clock, rater_identity

__all__ = ["LOCK_STATES", "LiveBook", "RaterStep", "open_book", "rate_vote", "write_states"]

#: The rows of a transaction's models, with their states, locked in model-id order.
LOCK_STATES = (
    sa_select(
        liverating_t.c.model_id,
        liverating_t.c.rating,
        liverating_t.c.games,
        model_t.c.name,
        liverating_t.c.state,
        liverating_t.c.clock,
    )
    .join(model_t, model_t.c.id == liverating_t.c.model_id)
    .where(liverating_t.c.model_id.in_(bindparam("ids", expanding=True)))
    .order_by(liverating_t.c.model_id)
    .with_for_update(of=liverating_t)
)
_LAST_CLOCK = sa_select(func.max(liverating_t.c.clock))
_UPDATE_STATES = (
    update(liverating_t)
    .where(liverating_t.c.model_id == bindparam("m"))
    .values(
        rating=bindparam("r"),
        games=bindparam("g"),
        updated_at=bindparam("t"),
        deviation=bindparam("d"),
        state=bindparam("s"),
        clock=bindparam("c"),
        rater=bindparam("w"),
    )
)


@dataclass
class LiveBook:
    """An online rater's states of the locked models while a transaction runs through its votes."""

    rater: OnlineRater[Any]
    states: dict[int, Any]
    clocks: dict[int, float | None]
    clock: float | None  # the last counted vote's time; None for a rater without a clock
    deviations: dict[int, float | None] = field(default_factory=dict)

    def copy(self) -> LiveBook:
        """A copy to run a batch on, so that a rolled-back attempt leaves this one as it was."""
        return LiveBook(self.rater, dict(self.states), dict(self.clocks), self.clock, dict(self.deviations))

    def apply(self, model_a: int, model_b: int, step: RaterStep) -> None:
        """Keep a counted vote's new states (once the vote is written)."""
        self.states[model_a], self.states[model_b] = step.state_a, step.state_b
        self.deviations[model_a], self.deviations[model_b] = step.deviation_a, step.deviation_b
        if step.clock is not None:
            self.clocks[model_a] = self.clocks[model_b] = self.clock = step.clock


@dataclass(frozen=True)
class RaterStep:
    """One vote through the rater: both new states, the vote's clock and the ratings shown after."""

    state_a: Any
    state_b: Any
    clock: float | None
    rating_a: float
    rating_b: float
    deviation_a: float | None
    deviation_b: float | None


def rate_vote(request: VoteRequest, book: LiveBook, *, counted: bool) -> RaterStep:
    """A vote's step: advance both states to the vote's clock, then :meth:`OnlineRater.update`.

    The same arithmetic as :meth:`OnlineRater.replay` with the clock :func:`votes.voting.ratings` feeds it:
    the running maximum of the counted votes' times. An uncounted vote changes nothing.
    """
    b = request.battle
    rater = book.rater
    a, bb = book.states[b.model_a_id], book.states[b.model_b_id]
    if not counted:
        (ra, da), (rb, db) = rater.shown(a), rater.shown(bb)
        return RaterStep(a, bb, None, ra, rb, da, db)
    clock = None
    if has_clock(rater):
        if request.voted_at is None:
            raise ValueError("a rater with a clock needs the vote's time")
        clock = request.voted_at.timestamp()
        clock = clock if book.clock is None else max(book.clock, clock)
    code = int(request.winner)
    if not (code >= 2 and rater.ties == "ignore"):  # an ignored tie leaves both states as they were
        if clock is not None:
            a, bb = rater.advance(a, clock), rater.advance(bb, clock)
        a, bb = rater.update(a, bb, code)
    (ra, da), (rb, db) = rater.shown(a), rater.shown(bb)
    return RaterStep(a, bb, clock, ra, rb, da, db)


def open_book(conn: Connection, rater: OnlineRater[Any], locked_rows: Sequence[Any]) -> LiveBook:
    """The rater's states of rows locked by :data:`LOCK_STATES`, and the last counted vote's clock."""
    states = {int(row[0]): decode_state(rater, row[4]) for row in locked_rows}
    clocks = {int(row[0]): None if row[5] is None else float(row[5]) for row in locked_rows}
    clock = None
    if has_clock(rater):
        last = conn.execute(_LAST_CLOCK).scalar()
        clock = None if last is None else float(last)
    deviations = {m: rater.shown(state)[1] for m, state in states.items()}
    return LiveBook(rater, states, clocks, clock, deviations)


def write_states(
    conn: Connection, book: LiveBook, ratings: dict[int, tuple[float, int]], touched: set[int]
) -> None:
    """Write the touched models' ratings and rater states in one executemany."""
    now = utcnow()
    identity = rater_identity(book.rater)
    rows = [
        {
            "m": m,
            "r": ratings[m][0],
            "g": ratings[m][1],
            "t": now,
            "d": book.deviations.get(m),
            "s": encode_state(book.states[m]),
            "c": book.clocks.get(m),
            "w": identity,
        }
        for m in sorted(touched)
    ]
    conn.execute(_UPDATE_STATES, rows)
