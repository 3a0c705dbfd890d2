"""Live battles: the annotator's own prompt, answered at once by two anonymous endpoint-backed models.

A turn is prepared first (:func:`prepare_turn`: prompt length and moderation, which two models and on
which side, the daily token budget), so that every refusal comes before any request reaches an endpoint.
:func:`arena.voting.live_turn.run_turn` then streams both answers; this module does the bookkeeping
around it: a partner for a model that could not answer (:func:`spare_contender`), and once both answers
have ended (:func:`finish_turn`) usage and failures per model, the conversation stored as a catalog
prompt with two outputs and their provenance, the identity-leak check, and finally the signed
single-use battle token of an ordinary vote (:mod:`arena.voting.service`), issued only now, so a vote
is possible only after both answers have finished. A turn stopped on the way (the annotator pressed
Stop or went away) is counted and closed by :func:`abandon_turn`.

Blindness: nothing here hands the client a model's name, id, endpoint, served model or timing; a failure
reaches the client as a neutral sentence, and the endpoint's own message goes to the server log only.

A battle keeps one token id through all its turns, carried inside the (encrypted) battle token, so it
takes one vote at most. A battle that ends without a vote (a failure, a leak, a stop) gets a vote-less
battle row under that id (:func:`votes.voting.live_battles.close_live_battle`), so no earlier token of it
can be used.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from typing import Literal, cast

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from arena.llm.client import Completion, Message
from arena.llm.generation import turn_stats
from arena.security import BattleTokenError, SessionData
from arena.voting.live_pace import Feed, Side
from arena.voting.state import ArenaState
from votes.catalog.answers import GeneratedAnswer, TurnStats
from votes.catalog.endpoints import EndpointRecord, list_endpoints
from votes.catalog.roles import in_arena
from votes.models import utcnow
from votes.review.leak_review import texts_leak
from votes.tables import battle_t, generation_t, model_t, output_t, prompt_t
from votes.voting.battles import IssuedBattle
from votes.voting.live_battles import (
    LIVE_SOURCE,
    StoredTurn,
    close_live_battle,
    count_live_use,
    live_tokens_today,
    store_live_turn,
)

__all__ = [
    "Contender",
    "LiveEvent",
    "LivePlan",
    "LiveRefused",
    "Outcome",
    "abandon_turn",
    "finish_turn",
    "live_ready",
    "prepare_turn",
    "spare_contender",
    "spent_tokens",
]

log = logging.getLogger(__name__)

FAILED_NOTICE = (
    "One of the models could not finish its answer (it failed or took too long), so this battle ends "
    "without a vote. Its failure is counted against its availability. Start a new live battle to try again."
)
LEAK_NOTICE = (
    "One of the answers names the model or company that wrote it, so a vote on this battle would not be "
    "blind: it is not counted. Start a new live battle."
)
NO_MODELS = "Live battles need two models with endpoints; none are available now."


class LiveRefused(Exception):
    """A live turn refused before any request; the message is neutral and meant for the annotator."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


@dataclass
class Contender:
    """One side's model: its endpoint and the conversation so far, which stay on the server."""

    model_id: int
    endpoint: EndpointRecord
    history: list[Message]  # the conversation so far (user and assistant turns)
    earlier: TurnStats | None = None  # the provenance of the earlier turns, summed
    params: dict[str, object] = field(default_factory=dict)  # the sampling parameters, as stored


@dataclass
class LivePlan:
    """A prepared turn: who answers on which side, and the conversation so far. Names stay server-side.

    ``tried`` holds every model asked in this turn (a failed one is not asked again); a battle whose
    model was replaced has no ``pair_probability``: the pair was not the pairing policy's draw."""

    annotator_id: int
    token_id: str
    a: Contender
    b: Contender
    user_turns: list[str]
    pair_probability: float | None
    issued_at: datetime
    stored: StoredTurn | None = None
    tried: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.tried |= {self.a.model_id, self.b.model_id}


@dataclass(frozen=True)
class LiveEvent:
    """What the page is told. ``start``: the turn is accepted (``text``, the user's message).
    ``update``/``done``/``failed``: what a side's pane shows now (``text``, its first ``tokens`` deltas;
    ``reason`` of a failure: ``"error"`` or ``"timeout"``). ``reset``: another model answers on ``side``
    instead, its pane starts again (``notice`` says why). ``end``: both answers have ended; ``token`` (the
    vote's battle token) when the battle can be voted on, else a ``notice`` saying why not."""

    kind: Literal["start", "update", "done", "failed", "reset", "end"]
    side: Side | None = None
    text: str = ""
    tokens: int = 0
    token: str | None = None
    notice: str | None = None
    reason: str | None = None


@dataclass
class Outcome:
    """One model's answer to a turn: what arrived (:class:`~arena.voting.live_pace.Feed`), then the
    finished completion, or why it failed (``"error"`` or ``"timeout"``)."""

    feed: Feed
    completion: Completion | None = None
    reason: str | None = None
    settled: bool = False  # a failure already dealt with: another model took over, or the battle ends

    @property
    def failed(self) -> bool:
        return self.feed.failed


@lru_cache(maxsize=8)
def _patterns(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


def check_prompt(state: ArenaState, message: str) -> str:
    """The prompt stripped, or :class:`LiveRefused` (too long, empty, matched by a moderation pattern)."""
    settings = state.settings
    if len(message) > settings.live_max_prompt_chars:
        raise LiveRefused(
            413, f"The prompt is too long: at most {settings.live_max_prompt_chars} characters, please."
        )
    text = message.strip()
    if not text:
        raise LiveRefused(422, "Please type a prompt.")
    for pattern in _patterns(tuple(settings.live_moderation_patterns)):
        if pattern.search(text):
            raise LiveRefused(422, "This prompt is not accepted here; please ask something else.")
    return text


def _endpoints_by_model(engine: Engine) -> dict[int, EndpointRecord]:
    """The endpoints of the models in the arena, read now: a judge never answers, and a model retired or
    made a judge a moment ago is neither drawn nor continued with."""
    with engine.connect() as conn:
        active = dict(conn.execute(select(model_t.c.name, model_t.c.id).where(in_arena())).all())
    with Session(engine) as session:
        records = list_endpoints(session=session)
    return {int(active[r.name]): r for r in records if r.name in active}


def live_ready(state: ArenaState) -> bool:
    """Whether live battles can start at all: two active models with endpoints (the page says so at once
    when they cannot, before the annotator types anything)."""
    return len(_endpoints_by_model(state.engine)) >= 2


def spare_contender(state: ArenaState, plan: LivePlan, side: Side) -> Contender | None:
    """Another model for ``side`` of a first turn, when its model failed or took too long: a partner of
    the other side's model by the pairing policy among the models not yet asked, or None (a later turn
    keeps its models: a new one would answer a conversation another model has written)."""
    if plan.stored is not None:
        return None
    other = plan.b if side == "a" else plan.a
    endpoints = _endpoints_by_model(state.engine)
    spare = [m for m in endpoints if m not in plan.tried]
    budget = state.settings.live_daily_tokens
    if spare and budget is not None:  # a model that has spent today's budget cannot step in either
        with state.engine.connect() as conn:
            spare = [m for m, spent in live_tokens_today(conn, spare).items() if spent < budget]
    picked = state.pairing.pick_pair(spare, with_model=other.model_id) if spare else None
    if picked is None:
        return None
    model_id = picked[1] if picked[0] == other.model_id else picked[0]
    plan.tried.add(model_id)
    plan.pair_probability = None
    user: list[Message] = [{"role": "user", "content": plan.user_turns[0]}]
    return Contender(model_id, endpoints[model_id], user)


def _new_plan(state: ArenaState, who: SessionData, text: str) -> LivePlan:
    endpoints = _endpoints_by_model(state.engine)
    state.pairing.refresh()
    picked = state.pairing.pick_pair(sorted(endpoints))
    if picked is None:
        raise LiveRefused(503, NO_MODELS)
    left, right, probability = picked
    turn: list[Message] = [{"role": "user", "content": text}]
    return LivePlan(
        annotator_id=who.annotator_id,
        token_id=f"live-{secrets.token_urlsafe(24)}",
        a=Contender(left, endpoints[left], list(turn)),
        b=Contender(right, endpoints[right], list(turn)),
        user_turns=[text],
        pair_probability=probability,
        issued_at=utcnow(),
    )


def _history(first_user: str, text: str, conversation: list[dict[str, str]] | None) -> list[Message]:
    """An output's conversation (a single-turn output keeps only its text)."""
    if not conversation:
        return [{"role": "user", "content": first_user}, {"role": "assistant", "content": text}]
    return [cast(Message, {"role": m["role"], "content": str(m["content"])}) for m in conversation]


def _continued_plan(state: ArenaState, who: SessionData, text: str, token: str) -> LivePlan:
    try:
        battle = state.tokens.read(token, annotator_id=who)
    except BattleTokenError:
        raise LiveRefused(
            409, "This conversation can no longer be continued; please start a new live battle."
        ) from None
    if battle.source != LIVE_SOURCE:
        raise LiveRefused(409, "This battle cannot be continued; please start a new live battle.")
    endpoints = _endpoints_by_model(state.engine)
    with state.engine.connect() as conn:
        ended = conn.execute(select(battle_t.c.id).where(battle_t.c.token_id == battle.token_id)).first()
        prompt = conn.execute(
            select(prompt_t.c.text, prompt_t.c.conversation).where(prompt_t.c.id == battle.prompt_id)
        ).first()
        outputs = {
            int(row.id): row
            for row in conn.execute(
                select(
                    output_t.c.id,
                    output_t.c.text,
                    output_t.c.conversation,
                    generation_t.c.prompt_tokens,
                    generation_t.c.completion_tokens,
                    generation_t.c.latency_s,
                    generation_t.c.finish_reason,
                    generation_t.c.served_model,
                )
                .join(generation_t, generation_t.c.output_id == output_t.c.id)
                .where(output_t.c.id.in_([battle.output_a_id, battle.output_b_id]))
            ).all()
        }
    if ended is not None:
        raise LiveRefused(409, "This battle is over; please start a new live battle.")
    if prompt is None or len(outputs) != 2 or not {battle.model_a_id, battle.model_b_id} <= set(endpoints):
        raise LiveRefused(
            409, "This conversation can no longer be continued; please start a new live battle."
        )
    user_turns = [str(m["content"]) for m in prompt.conversation or []] or [str(prompt.text)]
    if len(user_turns) >= state.settings.live_max_turns:
        raise LiveRefused(
            409, "This conversation has reached its last turn; please vote or start a new live battle."
        )

    def contender(model_id: int, output_id: int) -> Contender:
        row = outputs[output_id]
        history = _history(user_turns[0], str(row.text), row.conversation)
        history.append({"role": "user", "content": text})
        earlier = TurnStats(
            row.prompt_tokens,
            row.completion_tokens,
            float(row.latency_s),
            row.finish_reason,
            row.served_model,
        )
        return Contender(model_id, endpoints[model_id], history, earlier)

    return LivePlan(
        annotator_id=who.annotator_id,
        token_id=battle.token_id,
        a=contender(battle.model_a_id, battle.output_a_id),
        b=contender(battle.model_b_id, battle.output_b_id),
        user_turns=[*user_turns, text],
        pair_probability=battle.pair_probability,
        issued_at=battle.issued_at,
        stored=StoredTurn(battle.prompt_id, battle.output_a_id, battle.output_b_id),
    )


def _check_budget(state: ArenaState, plan: LivePlan) -> None:
    budget = state.settings.live_daily_tokens
    if budget is None:
        return
    with state.engine.connect() as conn:
        spent = live_tokens_today(conn, [plan.a.model_id, plan.b.model_id])
    if any(tokens >= budget for tokens in spent.values()):
        raise LiveRefused(429, "Live battles have used up today's budget; please come back tomorrow.")


def _prepare(state: ArenaState, who: SessionData, text: str, token: str | None) -> LivePlan:
    plan = _new_plan(state, who, text) if token is None else _continued_plan(state, who, text, token)
    _check_budget(state, plan)
    return plan


async def prepare_turn(state: ArenaState, who: SessionData, *, message: str, token: str | None) -> LivePlan:
    """Check the prompt and plan the turn (a new battle, or the next turn of ``token``'s battle).

    Raises :class:`LiveRefused` before any request reaches an endpoint.
    """
    text = check_prompt(state, message)
    return await run_in_threadpool(_prepare, state, who, text, token)


def _answer_record(contender: Contender, outcome: Outcome) -> GeneratedAnswer:
    assert outcome.completion is not None  # nosec B101 # only finished answers are stored
    history = [*contender.history, {"role": "assistant", "content": outcome.completion.text}]
    turns = [t for t in (contender.earlier, turn_stats(outcome.completion)) if t is not None]
    return GeneratedAnswer(
        model_id=contender.model_id,
        endpoint=contender.endpoint.name,
        base_url=contender.endpoint.base_url,
        history=history,
        turns=turns,
        params=contender.params,
    )


def spent_tokens(outcome: Outcome) -> int:
    """Tokens charged to the budget: the server's usage, or (not reported, or a broken or stopped stream)
    one per streamed delta."""
    c = outcome.completion
    if c is None or c.completion_tokens is None:
        return outcome.feed.count + (c.prompt_tokens or 0 if c is not None else 0)
    return (c.prompt_tokens or 0) + c.completion_tokens


def _issued(plan: LivePlan) -> IssuedBattle:
    return IssuedBattle(
        token_id=plan.token_id,
        annotator_id=plan.annotator_id,
        prompt_id=plan.stored.prompt_id if plan.stored else 0,
        output_a_id=plan.stored.output_a_id if plan.stored else 0,
        output_b_id=plan.stored.output_b_id if plan.stored else 0,
        model_a_id=plan.a.model_id,
        model_b_id=plan.b.model_id,
        issued_at=plan.issued_at,
        pair_probability=plan.pair_probability,
        source=LIVE_SOURCE,
    )


def finish_turn(state: ArenaState, plan: LivePlan, a: Outcome, b: Outcome) -> LiveEvent:
    """Count usage, then store the turn and issue the vote token, or close the battle; in a worker thread."""
    engine = state.engine
    for contender, outcome in ((plan.a, a), (plan.b, b)):
        count_live_use(engine, contender.model_id, tokens=spent_tokens(outcome), failed=outcome.failed)
    battle = _issued(plan)
    if a.failed or b.failed:
        if plan.stored is not None:  # an earlier turn's token exists: spend it
            close_live_battle(engine, battle, "failed")
        return LiveEvent("end", notice=FAILED_NOTICE)
    stored = store_live_turn(
        engine,
        user_turns=plan.user_turns,
        answer_a=_answer_record(plan.a, a),
        answer_b=_answer_record(plan.b, b),
        run_id=plan.token_id,
        stored=plan.stored,
    )
    plan.stored = stored
    battle = replace(
        battle, prompt_id=stored.prompt_id, output_a_id=stored.output_a_id, output_b_id=stored.output_b_id
    )
    with engine.connect() as conn:
        leaks = texts_leak(conn, [(plan.a.model_id, a.feed.text), (plan.b.model_id, b.feed.text)])
    if any(leaks):
        close_live_battle(engine, battle, "leak")
        return LiveEvent("end", notice=LEAK_NOTICE)
    return LiveEvent("end", token=state.tokens.issue(battle))


def abandon_turn(state: ArenaState, plan: LivePlan, spent: Iterable[tuple[int, int, bool]]) -> None:
    """A turn stopped before both answers ended (Stop, or the page went away): count each model's
    ``(model id, tokens, failed)`` (a stop is not the model's failure), and close the battle when an
    earlier turn's token exists, so it ends without a vote like a failed one. In a worker thread; never
    raises."""
    try:
        for model_id, tokens, failed in spent:
            count_live_use(state.engine, model_id, tokens=tokens, failed=failed)
        if plan.stored is not None:
            close_live_battle(state.engine, _issued(plan), "stopped")
    except Exception:  # nobody waits for this: the log is the only place a failure can go
        log.exception("a stopped live turn was not recorded")


def collect(events: Iterable[LiveEvent]) -> dict[str, str | None]:
    """The final state of a turn from its events: each side's text and status, the token or notice."""
    result: dict[str, str | None] = {"a": "", "b": "", "a_status": None, "b_status": None}
    for event in events:
        if event.side is not None:
            result[event.side] = event.text
            if event.kind in ("done", "failed"):
                result[f"{event.side}_status"] = event.kind
        if event.kind == "end":
            result["token"] = event.token
            result["notice"] = event.notice
    return result
