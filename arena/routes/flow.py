"""The battle -> vote flow shared by the HTML pages and the JSON API."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from sqlmodel import Session

from arena.app import ArenaState
from arena.routes.deps import request_address
from arena.security import SessionData
from votes.models import Output, Prompt
from votes.store import IssuedBattle, VoteRequest, VoteResult, issue_battle

__all__ = ["BattleContext", "next_battle", "submit_vote", "vote_result_json"]

VOTE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class BattleContext:
    """An issued battle as shown: the texts and the token, nothing that names a model."""

    token: str
    prompt: Prompt
    output_a: Output
    output_b: Output
    expires_in: int


def next_battle(state: ArenaState, session: Session, annotator_id: int) -> BattleContext | None:
    choice = state.pairing.choose(session, annotator_id)
    if choice is None:
        return None
    battle = issue_battle(
        token_id=secrets.token_urlsafe(18),
        annotator_id=annotator_id,
        prompt_id=choice.prompt_id,
        output_a=choice.output_a,
        output_b=choice.output_b,
        pair_probability=choice.pair_probability,
    )
    return BattleContext(
        token=state.tokens.issue(battle),
        prompt=state.pairing.prompt(session, choice.prompt_id),
        output_a=state.pairing.output(session, choice.output_a.output_id),
        output_b=state.pairing.output(session, choice.output_b.output_id),
        expires_in=state.settings.battle_token_ttl_seconds,
    )


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
    battle: IssuedBattle = state.tokens.read(token, annotator_id=who.annotator_id)
    address = request_address(request, state)
    vote = VoteRequest(
        battle=battle,
        winner=winner,
        client_hash=state.signer.client_hash(address, request.headers.get("user-agent", "")),
        idempotency_key=f"{who.annotator_id}:{idempotency_key}" if idempotency_key else None,
    )
    result = state.writer.submit(vote).result(timeout=VOTE_TIMEOUT_S)
    if not result.replayed:
        state.pairing.note_vote(battle.model_a_id, battle.model_b_id)
    return result


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
