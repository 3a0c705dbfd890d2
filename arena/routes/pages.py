"""HTML pages: they work with plain form posts (PRG redirects) and, with JavaScript, as fragments."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import col, select

from arena.language import language_tag
from arena.routes.deps import (
    SessionDep,
    StateDep,
    check_rate_limits,
    request_address,
    require_session,
    session_or_new,
)
from arena.routes.flow import next_battle, submit_vote
from arena.security import CSRF_FIELD, BattleTokenError, SessionData
from votes.db import session_scope
from votes.models import WINNERS, Model
from votes.store import (
    AlreadyVotedError,
    VoteError,
    count_annotator_votes,
    find_annotator_by_token_hash,
    get_battle_view,
    live_standings,
)

router = APIRouter(include_in_schema=False)

FRAGMENT_HEADER = "x-arena-fragment"
WINNER_LABELS = {
    "model_a": "A is better",
    "model_b": "B is better",
    "tie": "Tie",
    "tie (bothbad)": "Both are bad",
}


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
    models = db.exec(select(Model).where(col(Model.active)).order_by(col(Model.name))).all()
    return _render(request, state, "pages/index.html", {"models": models})


@router.get("/guidelines", response_class=HTMLResponse)
def guidelines(request: Request, state: StateDep) -> HTMLResponse:
    return _render(request, state, "pages/guidelines.html", {"labels": WINNER_LABELS})


def _battle_page(
    request: Request, state: StateDep, db: SessionDep, who: SessionData, notice: str | None
) -> Response:
    battle = next_battle(state, who.annotator_id)
    fragment = request.headers.get(FRAGMENT_HEADER) == "1"
    context = {
        "battle": battle,
        "csrf_token": state.signer.csrf_token(who),
        "n_votes": count_annotator_votes(session=db, annotator_id=who.annotator_id),
        "labels": WINNER_LABELS,
        "notice": notice,
        "prompt_lang": language_tag(battle.prompt.language) if battle else None,
    }
    name = "partials/_battle.html" if fragment else "pages/vote.html"
    return _render(request, state, name, context)


@router.get("/vote", response_class=HTMLResponse)
def vote_page(request: Request, state: StateDep, db: SessionDep, notice: str | None = None) -> Response:
    who = session_or_new(request, state)
    check_rate_limits(state, address=request_address(request, state), annotator_id=None, voting=False)
    notice = {"expired": "That battle had expired; here is a fresh one."}.get(notice or "")
    return _battle_page(request, state, db, who, notice)


@router.post("/vote", response_class=HTMLResponse)
def vote_submit(  # nosec B107 # form field defaults, not passwords
    request: Request,
    state: StateDep,
    token: Annotated[str, Form(max_length=4096)],
    winner: Annotated[str, Form(max_length=20)],
    csrf_token: Annotated[str, Form(alias=CSRF_FIELD, max_length=200)] = "",
) -> Response:
    who = require_session(request, state)
    if not state.signer.check_csrf(who, csrf_token):
        return _message(
            request,
            state,
            "Form expired",
            "The form's security token is missing or wrong; please vote again from a freshly loaded page.",
            403,
        )
    if winner not in WINNERS:
        return _message(request, state, "Unknown choice", "Please use one of the vote buttons.", 422)
    check_rate_limits(
        state, address=request_address(request, state), annotator_id=who.annotator_id, voting=True
    )
    try:
        result = submit_vote(state, request, who, token=token, winner=winner)
    except BattleTokenError as exc:
        if exc.reason == "expired" and request.headers.get(FRAGMENT_HEADER) != "1":
            return RedirectResponse("/vote?notice=expired", status_code=303)
        status = {"forged": 400, "expired": 410, "foreign": 403}[exc.reason]
        return _message(request, state, "Battle not accepted", str(exc), status)
    except AlreadyVotedError as exc:
        return _message(request, state, "Already voted", str(exc), 409, link=f"/battles/{exc.battle_id}")
    except VoteError as exc:
        return _message(request, state, "Vote not recorded", str(exc), 409)
    if request.headers.get(FRAGMENT_HEADER) == "1":
        return _reveal(request, state, result.battle_id, who, fragment=True)
    return RedirectResponse(f"/battles/{result.battle_id}", status_code=303)


def _reveal(
    request: Request, state: StateDep, battle_id: int, who: SessionData, *, fragment: bool
) -> Response:
    with session_scope(state.engine) as db:
        view = get_battle_view(session=db, battle_id=battle_id)
        n_votes = count_annotator_votes(session=db, annotator_id=who.annotator_id)
    if view is None or view.annotator_id != who.annotator_id or view.result is None:
        return _message(request, state, "Not found", "There is no such battle of yours.", 404)
    name = "partials/_reveal.html" if fragment else "pages/reveal.html"
    context = {
        "view": view,
        "result": view.result,
        "labels": WINNER_LABELS,
        "n_votes": n_votes,
        "prompt_lang": language_tag(view.prompt.language),
    }
    return _render(request, state, name, context)


@router.get("/battles/{battle_id}", response_class=HTMLResponse)
def reveal_page(request: Request, state: StateDep, battle_id: int) -> Response:
    who = require_session(request, state)
    return _reveal(request, state, battle_id, who, fragment=request.headers.get(FRAGMENT_HEADER) == "1")


@router.get("/invite/{token}", response_class=HTMLResponse)
def accept_invite(request: Request, state: StateDep, db: SessionDep, token: str) -> Response:
    from arena.security import hash_secret

    annotator = find_annotator_by_token_hash(session=db, token_hash=hash_secret(token))
    if annotator is None or annotator.id is None:
        return _message(request, state, "Invite not valid", "This invite link is not valid.", 404, link="/")
    _data, cookie = state.signer.new_session(annotator.id)
    request.state.set_session = cookie
    return RedirectResponse("/vote", status_code=303)


@router.get("/leaderboard/live", response_class=HTMLResponse)
def live_leaderboard(request: Request, state: StateDep, db: SessionDep) -> HTMLResponse:
    standings = live_standings(session=db)
    updated = max((s.updated_at for s in standings if s.updated_at), default=None)
    return _render(
        request, state, "pages/live_leaderboard.html", {"standings": standings, "updated": updated}
    )
