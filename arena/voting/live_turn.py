"""Running one live turn: both models asked at once, their answers shown at one pace, a model that fails
or stalls replaced, and a stopped turn cancelled upstream and still counted.

:func:`run_turn` yields frames, each a list of :class:`~arena.voting.live.LiveEvent` that belong to one
moment (the route writes a frame as one chunk, so both panes change together on the page): ``start`` at
once, then what each pane shows as :class:`~arena.voting.live_pace.SharedPace` releases it (why one pace
for both panes: that module's docstring), then ``end``. An empty frame is a heartbeat: something is
written at least every :data:`HEARTBEAT_S`, so a page that went away is noticed even while both models
are still silent.

Time limits, per model: ``live_stall_seconds`` for its first delta and between two deltas,
``live_timeout_seconds`` for the whole answer. A model that fails or runs out of time is counted as failed;
on a first turn another model answers in its place when one is free (once per side: its pane starts
again, ``reset``), else the battle ends without a vote (the other pane's text still arrives, no longer
paced).

Stopping: when the page stops reading (the Stop button aborts the request, or the page is closed), the
server cancels this generator; both requests to the endpoints are cancelled with it (their HTTP responses
are closed), and what they had sent is counted against the budget in a worker thread
(:func:`~arena.voting.live.abandon_turn`), so leaving early never makes generation free.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from starlette.concurrency import run_in_threadpool

from arena.llm.client import Completion, EndpointError
from arena.llm.generation import generation_params
from arena.voting.live import (
    Contender,
    LiveEvent,
    LivePlan,
    Outcome,
    abandon_turn,
    finish_turn,
    spare_contender,
    spent_tokens,
)
from arena.voting.live_pace import SIDES, TICK_S, Feed, SharedPace, Side
from arena.voting.state import ArenaState
from votes.voting.live_battles import count_live_use

__all__ = ["HEARTBEAT_S", "REPLACED", "run_turn"]

log = logging.getLogger(__name__)

#: Seconds without a write after which a heartbeat (an empty frame) goes out.
HEARTBEAT_S = 1.0
#: What the page says when another model takes a side over, by why the first one stopped.
REPLACED = {
    "timeout": "The model on this side took too long, so another model answers in its place.",
    "error": "The model on this side could not answer, so another model answers in its place.",
}


def _contender(plan: LivePlan, side: Side) -> Contender:
    return plan.a if side == "a" else plan.b


async def _answer(state: ArenaState, contender: Contender, outcome: Outcome, wake: asyncio.Event) -> None:
    """Stream one model's answer into ``outcome`` (its feed, then the completion or why it failed)."""
    settings = state.settings
    clock = asyncio.get_running_loop().time
    feed = outcome.feed
    # The stall limit counts from when the request leaves: a wait for one of the endpoint's own
    # concurrency slots is this site's queue, not the model's stall.
    waiting: asyncio.Timeout | None = None
    sent = False

    def on_send() -> None:
        nonlocal sent
        sent = True
        if waiting is not None:
            waiting.reschedule(clock() + settings.live_stall_seconds)

    try:
        client = state.endpoints.client(contender.endpoint)
        async with asyncio.timeout(settings.live_timeout_seconds):
            stream = client.stream(contender.history, on_send=on_send)
            while True:
                async with asyncio.timeout(settings.live_stall_seconds if sent else None) as waiting:
                    item = await anext(stream, None)
                if item is None:
                    break
                if isinstance(item, Completion):
                    outcome.completion = item
                else:
                    feed.add(item)
                    wake.set()
        contender.params = generation_params(client)
        feed.end(clock())
    except TimeoutError:
        log.warning("live answer took too long after %d deltas", feed.count)
        outcome.reason = "timeout"
        feed.end(clock(), failed=True)
    except EndpointError as exc:
        log.warning("live answer failed after %d deltas: %s", feed.count, exc)
        outcome.reason = "error"
        feed.end(clock(), failed=True)
    except Exception:  # an unexpected error must still end the battle cleanly for the annotator
        log.exception("live answer failed")
        outcome.reason = "error"
        feed.end(clock(), failed=True)
    finally:
        wake.set()


async def run_turn(
    state: ArenaState, plan: LivePlan, *, paced: bool = True
) -> AsyncIterator[list[LiveEvent]]:
    """Ask both models, yield the frames of the turn (see the module docstring), end with ``end``.

    ``paced=False`` (the page without JavaScript, which shows only complete answers) passes text on as it
    arrives. Closing the iterator early cancels both requests and counts what they had sent.
    """
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    outcomes: dict[Side, Outcome] = {}
    tasks: dict[Side, asyncio.Task[None]] = {}

    def ask(side: Side) -> Feed:
        outcomes[side] = Outcome(Feed(loop.time()))
        tasks[side] = asyncio.create_task(_answer(state, _contender(plan, side), outcomes[side], wake))
        return outcomes[side].feed

    pace = SharedPace({side: ask(side) for side in SIDES}, paced=paced)
    replaced: set[Side] = set()  # one replacement per side and turn: a broken network cannot walk the list
    ending = False
    try:
        yield [LiveEvent("start", text=plan.user_turns[-1])]
        written = loop.time()
        while True:
            wake.clear()
            frame: list[LiveEvent] = []
            for side in SIDES:
                outcome = outcomes[side]
                if not outcome.failed or outcome.settled:
                    continue
                outcome.settled = True
                spare = (
                    None if side in replaced else await run_in_threadpool(spare_contender, state, plan, side)
                )
                if spare is None:
                    pace.unpace()  # the battle cannot be voted on: nothing left to hide
                    continue
                failed = _contender(plan, side)
                tokens = spent_tokens(outcome)
                await run_in_threadpool(
                    count_live_use, state.engine, failed.model_id, tokens=tokens, failed=True
                )
                setattr(plan, side, spare)
                replaced.add(side)
                pace.restart(side, ask(side))
                frame.append(LiveEvent("reset", side, notice=REPLACED[outcome.reason or "error"]))
            for change in pace.advance(loop.time()):
                reason = outcomes[change.side].reason if change.kind == "failed" else None
                frame.append(LiveEvent(change.kind, change.side, change.text, change.tokens, reason=reason))
            if frame:
                yield frame
                written = loop.time()
            if pace.complete:
                break
            try:
                await asyncio.wait_for(wake.wait(), TICK_S if pace.waiting_for_time() else HEARTBEAT_S)
            except TimeoutError:
                if loop.time() - written >= HEARTBEAT_S:
                    yield []
                    written = loop.time()
        ending = True  # from here the bookkeeping is finish_turn's, even if the page goes away meanwhile
        yield [await run_in_threadpool(finish_turn, state, plan, outcomes["a"], outcomes["b"])]
    finally:
        for task in tasks.values():
            task.cancel()
        if not ending:
            spent = [
                (_contender(plan, side).model_id, spent_tokens(outcomes[side]), outcomes[side].failed)
                for side in SIDES
            ]
            loop.run_in_executor(None, abandon_turn, state, plan, spent)
