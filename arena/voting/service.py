"""The voting service: issue the next blind battle and record a vote, shared by the HTML pages and the API.

Entry points: :func:`next_battle` (choose and issue, from memory where it can), :func:`submit_vote` (check
the token, hand the vote to the group-commit writer, await its commit) and :func:`vote_result_json`. Both
are coroutines: the database is only ever touched from a worker thread or the writer, never on the event
loop.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, replace
from typing import Any

from starlette.concurrency import run_in_threadpool

from arena.logs import REQUEST_ID
from arena.metrics import (
    BATTLES_ISSUED,
    VOTE_COMMIT_WAIT_SECONDS,
    VOTES_ACCEPTED,
    VOTES_AWAITING_COMMIT,
    count_refusal,
)
from arena.security import BattleTokenError, SessionData
from arena.voting.checks import GoldChoice, RepeatChoice
from arena.voting.pairing import Choice
from arena.voting.state import ArenaState
from leaderboard.data import Outcome
from votes.models import Output, Prompt, utcnow
from votes.voting.battles import (
    AlreadyVotedError,
    IssuedBattle,
    VoteError,
    VoteRequest,
    VoteResult,
    issue_battle,
)
from votes.voting.gold_votes import GoldTicket
from votes.voting.live_battles import LIVE_SOURCE
from votes.voting.repeat_votes import REPEATABLE_SOURCES

__all__ = ["VOTE_TIMEOUT_S", "BattleContext", "next_battle", "submit_vote", "vote_result_json"]

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
    state: ArenaState,
    annotator_id: int,
    choice: Choice,
    texts: tuple[Prompt, Output, Output],
    *,
    repeat: int | None = None,
) -> BattleContext:
    """A battle's token and texts; ``repeat`` is the vote a repeat battle repeats (in the token only)."""
    battle = issue_battle(
        token_id=secrets.token_urlsafe(18),
        annotator_id=annotator_id,
        prompt_id=choice.prompt_id,
        output_a=choice.output_a,
        output_b=choice.output_b,
        pair_probability=choice.pair_probability,
    )
    if repeat is not None:
        battle = replace(battle, repeat=repeat)
    prompt, output_a, output_b = texts
    BATTLES_ISSUED.inc()
    return BattleContext(
        token=state.tokens.issue(battle),
        prompt=prompt,
        output_a=output_a,
        output_b=output_b,
        expires_in=state.settings.battle_token_ttl_seconds,
    )


def _issue_gold(state: ArenaState, annotator_id: int, gold: GoldChoice, prompt: Prompt) -> BattleContext:
    """A gold battle, issued exactly like any other: same token (the gold rides encrypted inside), same
    texts-only context; the answers are unsaved outputs, built once per gold like the live answers'
    cache (:class:`arena.voting.pairing_service.PairingService`)."""
    ticket = GoldTicket(gold.gold_id, gold.expected, gold.quiz)
    battle = IssuedBattle(
        token_id=secrets.token_urlsafe(18),
        annotator_id=annotator_id,
        prompt_id=gold.prompt_id,
        output_a_id=0,
        output_b_id=0,
        model_a_id=gold.model_a_id,
        model_b_id=gold.model_b_id,
        issued_at=utcnow(),
        pair_probability=gold.pair_probability,
        gold=ticket.encode(),
    )
    BATTLES_ISSUED.inc()
    return BattleContext(
        token=state.tokens.issue(battle),
        prompt=prompt,
        output_a=gold.answer_a,
        output_b=gold.answer_b,
        expires_in=state.settings.battle_token_ttl_seconds,
    )


async def next_battle(
    state: ArenaState, annotator_id: int, address: str | None = None
) -> BattleContext | None:
    """Choose and issue a battle: from memory, reading the store in a worker thread only on a miss.

    With the client's ``address``, answers revealed to anyone voting from that network are kept out too
    (a fresh cookie does not make a voter forget). A share of the battles (``gold_rate``, and the
    onboarding quiz) are gold battles (:mod:`votes.voting.gold_votes`), and a share (``repeat_rate``) repeat
    one of the annotator's own earlier battles with the sides swapped (:mod:`votes.voting.repeat_votes`); both
    are issued exactly like any battle.
    """
    pairing = state.pairing
    address_hash = state.signer.address_hash(address) if address is not None else None
    if not pairing.ready(annotator_id, address_hash):
        await run_in_threadpool(pairing.prepare, annotator_id, address_hash)
    # The live battle is chosen (and its texts read) first, even when a gold takes its place and the
    # battle is released: a gold is issued after the same work as a live battle, so its timing does not
    # tell it apart (the texts read stay cached for when the battle comes up again).
    choice = pairing.pick(annotator_id, address_hash)
    gold = pairing.pick_gold(annotator_id)
    if gold is not None:
        if choice is not None:
            pairing.release(annotator_id, choice)
            if pairing.cached_texts(choice) is None:
                await run_in_threadpool(pairing.load_texts, choice)
        prompt = pairing.cached_prompt(gold.prompt_id)
        if prompt is None:
            prompt = await run_in_threadpool(pairing.gold_prompt, gold.prompt_id)
        return _issue_gold(state, annotator_id, gold, prompt)
    repeat: RepeatChoice | None = pairing.pick_repeat(annotator_id)
    if repeat is not None:  # a repeat takes the live battle's place as a gold does
        if choice is not None:
            pairing.release(annotator_id, choice)
        choice = repeat.choice
    if choice is None:
        return None
    texts = pairing.cached_texts(choice)
    if texts is None:
        texts = await run_in_threadpool(pairing.load_texts, choice)
    original = None if repeat is None else repeat.original_vote_id
    return _issue(state, annotator_id, choice, texts, repeat=original)


async def submit_vote(
    state: ArenaState,
    who: SessionData,
    *,
    token: str,
    winner: Outcome,
    address: str,
    user_agent: str,
    idempotency_key: str | None = None,
) -> VoteResult:
    """Check the token, queue the vote for the group-commit writer, and await its commit (no thread held).

    ``address`` and ``user_agent`` make the client's keyed fingerprint stored with the vote. Raises
    ``BattleTokenError`` or ``VoteError`` (nothing written), or a writer/database error.
    """
    try:
        battle: IssuedBattle = state.tokens.read(token, annotator_id=who)
    except BattleTokenError as exc:
        count_refusal(f"token_{exc.reason}")
        raise
    if battle.annotator_id != who.annotator_id:  # fetched before the first vote wrote the annotator
        battle = replace(battle, annotator_id=who.annotator_id)
    vote = VoteRequest(
        battle=battle,
        winner=winner,
        client_hash=state.signer.client_hash(address, user_agent),
        address_hash=state.signer.address_hash(address),
        idempotency_key=f"{who.annotator_id}:{idempotency_key}" if idempotency_key else None,
        request_id=REQUEST_ID.get(),
    )
    started = time.perf_counter()
    VOTES_AWAITING_COMMIT.inc()
    try:
        future = asyncio.wrap_future(state.writer.submit(vote))
        result = await asyncio.wait_for(future, VOTE_TIMEOUT_S)
    except AlreadyVotedError:
        count_refusal("already_voted")
        raise
    except VoteError:
        count_refusal("invalid")
        raise
    finally:
        VOTES_AWAITING_COMMIT.dec()
        VOTE_COMMIT_WAIT_SECONDS.observe(time.perf_counter() - started)
    if not result.replayed:
        VOTES_ACCEPTED.inc()
    if not result.replayed and battle.counted:  # a gold or a repeat moves no pair count and no history
        state.pairing.note_vote(
            annotator_id=battle.annotator_id,
            battle_id=result.battle_id,
            vote_id=result.vote_id if battle.source in REPEATABLE_SOURCES else None,
            prompt_id=battle.prompt_id,
            model_a_id=battle.model_a_id,
            model_b_id=battle.model_b_id,
            outputs=(battle.output_a_id, battle.output_b_id),
            address_hash=vote.address_hash,
            catalog=battle.source != LIVE_SOURCE,
        )
    return result


def vote_result_json(result: VoteResult) -> dict[str, Any]:
    """A recorded vote as the API answers it: both names, and each side's live rating before and after
    (with its deviation after the vote, for a live rater that has one)."""
    answer: dict[str, Any] = {
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
    if result.deviation_a is not None:  # a live rater with deviations (None for Elo)
        answer["ratings"]["model_a"]["deviation"] = result.deviation_a
    if result.deviation_b is not None:
        answer["ratings"]["model_b"]["deviation"] = result.deviation_b
    return answer
