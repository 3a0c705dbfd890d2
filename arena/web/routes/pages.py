"""HTML pages: they work with plain form posts (PRG redirects) and, with JavaScript, as fragments.

The vote flow (``/vote``, the vote post, the reveal) is ``async`` like the JSON API and goes through the
same voting service (:mod:`arena.voting.service`); its database reads run in worker threads.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.engine import Engine
from starlette.concurrency import run_in_threadpool

from arena.metrics import count_refusal
from arena.security import CSRF_FIELD, BattleTokenError, SessionData, hash_secret
from arena.settings import live_rating_words
from arena.voting.service import next_battle, submit_vote
from arena.web.language import language_tag
from arena.web.routes.deps import (
    SessionDep,
    StateDep,
    check_rate_limits,
    request_address,
    require_session,
    session_or_new,
    voting_session,
)
from leaderboard.data import OUTCOMES, Outcome, parse_outcome
from votes.db import read_session
from votes.voting.annotators import count_annotator_votes, find_annotator_by_token_hash
from votes.voting.battles import AlreadyVotedError, VoteError
from votes.voting.live_battles import LIVE_SOURCE, live_availability
from votes.voting.views import BattleView, arena_models, get_battle_view

router = APIRouter(include_in_schema=False)

FRAGMENT_HEADER = "x-arena-fragment"
#: What each winner string's vote button says, for the reveal's "Your vote: ...".
WINNER_LABELS: dict[str, str] = {words.string: words.words for words in OUTCOMES.values()}
#: The side of the answer a vote preferred, as the reveal marks it (none for a tie).
_WON_SIDE = {Outcome.MODEL_A: "A", Outcome.MODEL_B: "B"}


def _render(
    request: Request, state: StateDep, name: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    return state.templates.TemplateResponse(
        request=request, name=name, context=context, status_code=status_code
    )


def _message(
    request: Request, state: StateDep, title: str, text: str, status_code: int, link: str = "/vote"
) -> HTMLResponse:
    fragment = request.headers.get(FRAGMENT_HEADER) == "1"
    name = "partials/_message.html" if fragment else "pages/message.html"
    return _render(request, state, name, {"title": title, "text": text, "link": link}, status_code)


@router.get("/", response_class=HTMLResponse)
def home(request: Request, state: StateDep, db: SessionDep) -> HTMLResponse:
    return _render(request, state, "pages/index.html", {"models": arena_models(session=db)})


@router.get("/favicon.ico")
def favicon() -> RedirectResponse:
    """The site's icon where a browser looks for it unasked (a page without the link: JSON, a file): the
    SVG every page links (``/static/favicon.svg``)."""
    return RedirectResponse("/static/favicon.svg", status_code=301)


@router.get("/guidelines", response_class=HTMLResponse)
def guidelines(request: Request, state: StateDep) -> HTMLResponse:
    return _render(request, state, "pages/guidelines.html", {})


def _count_votes(engine: Engine, annotator_id: int) -> int:
    with read_session(engine) as db:
        return count_annotator_votes(session=db, annotator_id=annotator_id)


async def _battle_page(request: Request, state: StateDep, who: SessionData, notice: str | None) -> Response:
    battle = await next_battle(state, who.annotator_id, request_address(request))
    fragment = request.headers.get(FRAGMENT_HEADER) == "1"
    context = {
        "battle": battle,
        "csrf_token": state.signer.csrf_token(who),
        "n_votes": await run_in_threadpool(_count_votes, state.engine, who.annotator_id),
        "notice": notice,
        "prompt_lang": language_tag(battle.prompt.language) if battle else None,
    }
    name = "partials/_battle.html" if fragment else "pages/vote.html"
    return _render(request, state, name, context)


@router.get("/vote", response_class=HTMLResponse)
async def vote_page(request: Request, state: StateDep, notice: str | None = None) -> Response:
    await check_rate_limits(state, address=request_address(request), who=None, voting=False)
    who = await session_or_new(request, state)
    notice = {"expired": "That battle had expired; here is a fresh one."}.get(notice or "")
    return await _battle_page(request, state, who, notice)


@router.post("/vote", response_class=HTMLResponse)
async def vote_submit(  # nosec B107 # form field defaults, not passwords
    request: Request,
    state: StateDep,
    token: Annotated[str, Form(max_length=4096)],
    winner: Annotated[str, Form(max_length=20)],
    csrf_token: Annotated[str, Form(alias=CSRF_FIELD, max_length=200)] = "",
) -> Response:
    who = require_session(request, state)
    if not state.signer.check_csrf(who, csrf_token):
        count_refusal("csrf")
        return _message(
            request,
            state,
            "Form expired",
            "The form's security token is missing or wrong; please vote again from a freshly loaded page.",
            403,
        )
    try:
        outcome = parse_outcome(winner)  # the one reading of the form's winner: an Outcome from here on
    except ValueError:
        count_refusal("bad_choice")
        return _message(request, state, "Unknown choice", "Please use one of the vote buttons.", 422)
    address = request_address(request)
    await check_rate_limits(state, address=address, who=who, voting=True)
    try:
        who = await voting_session(request, state, who, token=token)
        result = await submit_vote(
            state,
            who,
            token=token,
            winner=outcome,
            address=address,
            user_agent=request.headers.get("user-agent", ""),
        )
    except BattleTokenError as exc:
        if exc.reason == "expired" and request.headers.get(FRAGMENT_HEADER) != "1":
            return RedirectResponse("/vote?notice=expired", status_code=303)
        return _message(request, state, "Battle not accepted", str(exc), exc.status_code)
    except AlreadyVotedError as exc:
        return _message(request, state, "Already voted", str(exc), 409, link=f"/battles/{exc.battle_id}")
    except VoteError as exc:
        return _message(request, state, "Vote not recorded", str(exc), 409)
    if request.headers.get(FRAGMENT_HEADER) == "1":
        return await _reveal(request, state, result.battle_id, who, fragment=True)
    return RedirectResponse(f"/battles/{result.battle_id}", status_code=303)


def _read_reveal(engine: Engine, battle_id: int, annotator_id: int) -> tuple[BattleView | None, int]:
    with read_session(engine) as db:
        view = get_battle_view(session=db, battle_id=battle_id)
        return view, count_annotator_votes(session=db, annotator_id=annotator_id)


async def _reveal(
    request: Request, state: StateDep, battle_id: int, who: SessionData, *, fragment: bool
) -> Response:
    view, n_votes = await run_in_threadpool(_read_reveal, state.engine, battle_id, who.annotator_id)
    if view is None or view.annotator_id != who.annotator_id or view.result is None:
        return _message(request, state, "Not found", "There is no such battle of yours.", 404)
    name = "partials/_reveal.html" if fragment else "pages/reveal.html"
    context = {
        "view": view,
        "result": view.result,
        "labels": WINNER_LABELS,
        "won_side": _WON_SIDE.get(parse_outcome(view.result.winner)),
        "n_votes": n_votes,
        "prompt_lang": language_tag(view.prompt.language),
        "live": view.prompt.source == LIVE_SOURCE,  # the next battle is a live one too
    }
    return _render(request, state, name, context)


@router.get("/battles/{battle_id}", response_class=HTMLResponse)
async def reveal_page(request: Request, state: StateDep, battle_id: int) -> Response:
    who = require_session(request, state)
    return await _reveal(request, state, battle_id, who, fragment=request.headers.get(FRAGMENT_HEADER) == "1")


@router.get("/invite/{token}", response_class=HTMLResponse)
def accept_invite(request: Request, state: StateDep, db: SessionDep, token: str) -> Response:
    annotator = find_annotator_by_token_hash(session=db, token_hash=hash_secret(token))
    if annotator is None or annotator.id is None:
        return _message(request, state, "Invite not valid", "This invite link is not valid.", 404, link="/")
    _data, cookie = state.signer.new_session(annotator.id, invited=True)
    request.state.set_session = cookie
    return RedirectResponse("/vote", status_code=303)


@router.get("/leaderboard/live", response_class=HTMLResponse)
def live_leaderboard(request: Request, state: StateDep, db: SessionDep) -> HTMLResponse:
    standings = state.live_standings(db)
    updated = max((s.updated_at for s in standings if s.updated_at), default=None)
    shown = {s.model for s in standings}
    found = live_availability(db.connection()).values()
    availability = sorted((a for a in found if a.model in shown), key=lambda a: (a.share, a.model))
    context = {
        "standings": standings,
        "updated": updated,
        "availability": availability,
        "rating_words": live_rating_words(state.settings),
    }
    return _render(request, state, "pages/live_leaderboard.html", context)
