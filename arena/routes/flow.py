"""The battle -> vote flow shared by the HTML pages and the JSON API."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from arena.app import ArenaState
from arena.pairing import Choice
from arena.routes.deps import request_address
from arena.security import SessionData
from votes.battles import IssuedBattle, VoteRequest, VoteResult, issue_battle
from votes.models import Output, Prompt

__all__ = [
    "BattleContext",
    "next_battle",
    "next_battle_async",
    "submit_vote",
    "submit_vote_async",
    "vote_result_json",
]

VOTE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class BattleContext:
    """An issued battle as shown: the texts and the token, nothing that names a model."""

    token: str
    prompt: Prompt
    output_a: Output
    output_b: Output
    expires_in: int


def _issue(
    state: ArenaState, annotator_id: int, choice: Choice, texts: tuple[Prompt, Output, Output]
) -> BattleContext:
    battle = issue_battle(
        token_id=secrets.token_urlsafe(18),
        annotator_id=annotator_id,
        prompt_id=choice.prompt_id,
        output_a=choice.output_a,
        output_b=choice.output_b,
        pair_probability=choice.pair_probability,
    )
    prompt, output_a, output_b = texts
    return BattleContext(
        token=state.tokens.issue(battle),
        prompt=prompt,
        output_a=output_a,
        output_b=output_b,
        expires_in=state.settings.battle_token_ttl_seconds,
    )


def next_battle(state: ArenaState, annotator_id: int) -> BattleContext | None:
    """Choose and issue a battle (blocking: may read the store; for sync handlers)."""
    choice = state.pairing.choose(annotator_id)
    if choice is None:
        return None
    return _issue(state, annotator_id, choice, state.pairing.load_texts(choice))


async def next_battle_async(state: ArenaState, annotator_id: int) -> BattleContext | None:
    """:func:`next_battle` for async handlers: from memory, reading the store in a thread only on a miss."""
    pairing = state.pairing
    if not pairing.ready(annotator_id):
        await run_in_threadpool(pairing.prepare, annotator_id)
    choice = pairing.pick(annotator_id)
    if choice is None:
        return None
    texts = pairing.cached_texts(choice)
    if texts is None:
        texts = await run_in_threadpool(pairing.load_texts, choice)
    return _issue(state, annotator_id, choice, texts)


def _vote_request(
    state: ArenaState,
    request: Request,
    who: SessionData,
    *,
    token: str,
    winner: str,
    idempotency_key: str | None,
) -> VoteRequest:
    battle: IssuedBattle = state.tokens.read(token, annotator_id=who.annotator_id)
    address = request_address(request, state)
    return VoteRequest(
        battle=battle,
        winner=winner,
        client_hash=state.signer.client_hash(address, request.headers.get("user-agent", "")),
        idempotency_key=f"{who.annotator_id}:{idempotency_key}" if idempotency_key else None,
    )


def _note(state: ArenaState, vote: VoteRequest, result: VoteResult) -> VoteResult:
    if not result.replayed:
        b = vote.battle
        state.pairing.note_vote(
            annotator_id=b.annotator_id,
            battle_id=result.battle_id,
            prompt_id=b.prompt_id,
            model_a_id=b.model_a_id,
            model_b_id=b.model_b_id,
        )
    return result


def submit_vote(
    state: ArenaState,
    request: Request,
    who: SessionData,
    *,
    token: str,
    winner: str,
    idempotency_key: str | None = None,
) -> VoteResult:
    """Check the token, queue the vote for the group-commit writer, and wait for its commit.

    Raises ``BattleTokenError`` or ``VoteError`` (nothing written), or a writer/database error.
    """
    vote = _vote_request(state, request, who, token=token, winner=winner, idempotency_key=idempotency_key)
    return _note(state, vote, state.writer.submit(vote).result(timeout=VOTE_TIMEOUT_S))


async def submit_vote_async(
    state: ArenaState,
    request: Request,
    who: SessionData,
    *,
    token: str,
    winner: str,
    idempotency_key: str | None = None,
) -> VoteResult:
    """:func:`submit_vote` for async handlers: awaits the commit without holding a thread."""
    vote = _vote_request(state, request, who, token=token, winner=winner, idempotency_key=idempotency_key)
    future = asyncio.wrap_future(state.writer.submit(vote))
    return _note(state, vote, await asyncio.wait_for(future, VOTE_TIMEOUT_S))


def vote_result_json(result: VoteResult) -> dict[str, Any]:
    return {
        "battle_id": result.battle_id,
        "vote_id": result.vote_id,
        "winner": result.winner,
        "model_a": result.model_a,
        "model_b": result.model_b,
        "ratings": {
            "model_a": {
                "before": result.rating_a_before,
                "after": result.rating_a_after,
                "change": result.rating_a_after - result.rating_a_before,
            },
            "model_b": {
                "before": result.rating_b_before,
                "after": result.rating_b_after,
                "change": result.rating_b_after - result.rating_b_before,
            },
        },
        "replayed": result.replayed,
    }
