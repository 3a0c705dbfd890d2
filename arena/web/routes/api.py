"""JSON API mirroring the vote flow, for annotation tools. Cookie session + CSRF header, like the pages."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Request
from pydantic import BaseModel, Field

from arena.metrics import count_refusal
from arena.security import BattleTokenError
from arena.voting.service import next_battle, submit_vote, vote_result_json
from arena.web.routes.deps import (
    SessionDep,
    StateDep,
    check_rate_limits,
    get_state,
    request_address,
    require_session,
    session_or_new,
    voting_session,
)
from leaderboard.data import Outcome, OutcomeLabel, parse_outcome
from votes.voting.annotators import count_annotator_votes
from votes.voting.battles import AlreadyVotedError, VoteError

router = APIRouter(prefix="/api", tags=["api"])

Winner = OutcomeLabel


class Turn(BaseModel):
    role: str
    content: str


class PromptOut(BaseModel):
    text: str
    conversation: list[Turn] | None = None
    category: str | None = None


class AnswerOut(BaseModel):
    text: str
    conversation: list[Turn] | None = None


class BattleOut(BaseModel):
    """A blind battle: texts only; the model names come with the vote's answer."""

    token: str = Field(description="Opaque, single-use, expiring battle token bound to this session.")
    csrf_token: str = Field(description="Send back as the X-CSRF-Token header on POST /api/votes.")
    expires_in: int = Field(description="Seconds until the token expires.")
    prompt: PromptOut
    a: AnswerOut
    b: AnswerOut
    votes: int = Field(description="Votes this annotator has cast so far.")


class VoteIn(BaseModel):
    token: str = Field(max_length=4096)
    winner: Winner

    @property
    def outcome(self) -> Outcome:
        """The winner as an :class:`Outcome`: read here, at the door, and carried as one to the writer."""
        return parse_outcome(self.winner)


class SideRating(BaseModel):
    before: float
    after: float
    change: float
    deviation: float | None = None  # after the vote, for a live rater with deviations


class RevealRatings(BaseModel):
    model_a: SideRating
    model_b: SideRating


class VoteOut(BaseModel):
    battle_id: int
    vote_id: int
    winner: Winner
    model_a: str = Field(description="The model shown as A (left).")
    model_b: str = Field(description="The model shown as B (right).")
    ratings: RevealRatings
    replayed: bool = Field(description="True when this repeats an earlier identical submission.")


class StandingOut(BaseModel):
    model: str
    rating: float | None
    games: int
    updated_at: datetime | None
    # The live rater's deviation (null for Elo), rating - 2 deviations, and whether it is still large.
    deviation: float | None = None
    conservative: float | None = None
    provisional: bool = False


class MeOut(BaseModel):
    annotator_id: int
    votes: int


class ErrorOut(BaseModel):
    detail: str


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut} for code in (400, 403, 404, 409, 410, 429)
}


def _conversation(value: list[dict[str, Any]] | None) -> list[Turn] | None:
    return (
        [Turn(role=str(t.get("role", "")), content=str(t.get("content", ""))) for t in value]
        if value
        else None
    )


@router.get("/battles/next", response_model=BattleOut, responses=ERRORS, summary="Next battle")
async def api_next_battle(request: Request) -> BattleOut:
    """Issue the next blind battle for this session (a session cookie is set on the first call)."""
    state = get_state(request)  # not a dependency: FastAPI spends more per request on one than it saves
    # async, and from memory (see PairingService): a battle costs no thread hop and no query.
    await check_rate_limits(state, address=request_address(request), who=None, voting=False)
    who = await session_or_new(request, state)
    battle = await next_battle(state, who.annotator_id, request_address(request))
    if battle is None:
        raise HTTPException(404, "No battle left for this annotator: every available pair has been judged.")
    return BattleOut(
        token=battle.token,
        csrf_token=state.signer.csrf_token(who),
        expires_in=battle.expires_in,
        prompt=PromptOut(
            text=battle.prompt.text,
            conversation=_conversation(battle.prompt.conversation),
            category=battle.prompt.category,
        ),
        a=AnswerOut(text=battle.output_a.text, conversation=_conversation(battle.output_a.conversation)),
        b=AnswerOut(text=battle.output_b.text, conversation=_conversation(battle.output_b.conversation)),
        votes=state.pairing.n_votes(who.annotator_id),
    )


@router.post("/votes", response_model=VoteOut, responses=ERRORS, summary="Cast a vote")
async def api_vote(
    request: Request,
    body: VoteIn,
    x_csrf_token: Annotated[str | None, Header(max_length=200)] = None,
    idempotency_key: Annotated[str | None, Header(max_length=150)] = None,
) -> VoteOut:
    """Record a vote; answered after it is durably committed, with both names and their live ratings.

    Retrying with the same token and winner, or the same ``Idempotency-Key``, returns the first answer and
    records nothing new; the same token with a different winner is refused (409).
    """
    state = get_state(request)
    who = require_session(request, state)
    if not state.signer.check_csrf(who, x_csrf_token):
        count_refusal("csrf")
        raise HTTPException(403, "Missing or wrong X-CSRF-Token header (take it from GET /api/battles/next).")
    address = request_address(request)
    await check_rate_limits(state, address=address, who=who, voting=True)
    try:
        who = await voting_session(request, state, who, token=body.token)
        result = await submit_vote(
            state,
            who,
            token=body.token,
            winner=body.outcome,
            address=address,
            user_agent=request.headers.get("user-agent", ""),
            idempotency_key=idempotency_key,
        )
    except BattleTokenError as exc:
        raise HTTPException(exc.status_code, str(exc)) from None
    except AlreadyVotedError as exc:
        raise HTTPException(409, str(exc)) from None
    except VoteError as exc:
        raise HTTPException(409, str(exc)) from None
    return VoteOut.model_validate(vote_result_json(result))


@router.get("/leaderboard", response_model=list[StandingOut], summary="Live standings")
def api_leaderboard(state: StateDep, db: SessionDep) -> list[StandingOut]:
    """Live standings, best first as ``ARENA_LIVE_RANK_BY`` ranks them (unrated models last, rating null)."""
    return [
        StandingOut(
            model=s.model,
            rating=None if s.rating != s.rating else s.rating,
            games=s.games,
            updated_at=s.updated_at,
            deviation=s.deviation,
            conservative=None if s.rating != s.rating or s.deviation is None else s.conservative,
            provisional=s.provisional,
        )
        for s in state.live_standings(db)
    ]


@router.get("/me", response_model=MeOut, responses=ERRORS, summary="This session")
def api_me(request: Request, state: StateDep, db: SessionDep) -> MeOut:
    """This session's annotator and vote count."""
    who = require_session(request, state)
    return MeOut(
        annotator_id=who.annotator_id, votes=count_annotator_votes(session=db, annotator_id=who.annotator_id)
    )
