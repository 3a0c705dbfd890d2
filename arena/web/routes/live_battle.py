"""The live battle page, ``/battle``: the annotator's prompt, two anonymous models answering side by side.

With JavaScript the page posts each turn to ``/battle/stream`` and draws both answers as they arrive
(Server-Sent Events over the POST's own response: ``start`` with the prompt rendered, ``update`` with a
pane's text so far and its token count, ``reset`` when another model takes a side over, ``done`` or
``failed`` per pane, ``end``; both panes advance at one shared pace, see
:mod:`arena.voting.live_pace`). Without it, the same form posts to ``/battle``, which answers when both
are complete. The vote goes to the ordinary ``POST /vote`` with the battle token the last event (or the
page) carries, and the reveal is the ordinary one.

The page says at once when live battles cannot run (fewer than two models with endpoints). Refusals
(CSRF, limits, prompt length, moderation, no models, the daily budget) come before any request reaches
an endpoint; none of them, no event and no header names a model. Stopping is the page closing its
request: the server then cancels both requests upstream (:mod:`arena.voting.live_turn`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from arena.security import CSRF_FIELD, SessionData
from arena.voting.live import (
    NO_MODELS,
    LiveEvent,
    LivePlan,
    LiveRefused,
    check_prompt,
    collect,
    live_ready,
    prepare_turn,
)
from arena.voting.live_turn import run_turn
from arena.voting.state import ArenaState
from arena.web.markdown import render_markdown, render_markdown_uncached
from arena.web.routes.deps import (
    RateLimited,
    StateDep,
    annotator_session,
    check_live_limits,
    check_rate_limits,
    limit_identity,
    request_address,
    require_session,
    session_or_new,
)

router = APIRouter(include_in_schema=False)

#: The form field's own cap (the request body limit is lower still); the setting's cap is checked after.
_FIELD_CAP = 1_000_000
FAILED_TEXT = "This answer could not be completed."
#: What a failed pane says, by why it failed.
FAILED_TEXTS = {"error": FAILED_TEXT, "timeout": "This model took too long to answer."}
STOPPED_NOTICE = "You stopped this battle, so it ends without a vote. Start a new live battle to try again."
_Message = Annotated[str, Form(max_length=_FIELD_CAP)]
_Token = Annotated[str, Form(max_length=4096)]
_Csrf = Annotated[str, Form(alias=CSRF_FIELD, max_length=200)]


def _context(
    state: ArenaState, who: SessionData, *, turns: dict[str, list[dict[str, str]]] | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "csrf_token": state.signer.csrf_token(who),
        "turns": turns or {"a": [], "b": []},
        "status": {"a": None, "b": None},
        "token": None,  # nosec B105 # the battle token of the page, not a password
        "notice": None,
        "max_chars": state.settings.live_max_prompt_chars,
        "failed_text": FAILED_TEXT,
        "stopped_notice": STOPPED_NOTICE,
        "ready": True,
        **extra,
    }


def _page(
    request: Request, state: ArenaState, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    return state.templates.TemplateResponse(
        request=request, name="pages/battle.html", context=context, status_code=status_code
    )


@router.get("/battle", response_class=HTMLResponse)
async def battle_page(request: Request, state: StateDep) -> Response:
    await check_rate_limits(state, address=request_address(request), who=None, voting=False)
    who = await session_or_new(request, state)
    if not await run_in_threadpool(live_ready, state):
        return _page(request, state, _context(state, who, ready=False, notice=NO_MODELS))
    return _page(request, state, _context(state, who))


async def _plan(request: Request, state: ArenaState, message: str, csrf_token: str, token: str) -> LivePlan:
    """Every check of a turn, in order: session and CSRF, the prompt itself, the limits, the plan."""
    who = require_session(request, state)
    if not state.signer.check_csrf(who, csrf_token):
        raise LiveRefused(403, "The form's security token is missing or wrong; please reload the page.")
    check_prompt(state, message)  # length and moderation first: a refused prompt costs no generation
    await check_live_limits(state, address=request_address(request), annotator_id=limit_identity(who))
    who = await annotator_session(request, state, who)  # its answers are stored under the annotator
    return await prepare_turn(state, who, message=message, token=token or None)


@router.post("/battle", response_class=HTMLResponse)
async def battle_submit(  # nosec B107 # form field defaults, not passwords
    request: Request,
    state: StateDep,
    message: _Message,
    csrf_token: _Csrf = "",
    token: _Token = "",
) -> Response:
    """Without JavaScript: the whole turn, answered when both models are done."""
    who = require_session(request, state)
    try:
        plan = await _plan(request, state, message, csrf_token, token)
    except LiveRefused as exc:
        return _page(request, state, _context(state, who, notice=str(exc)), exc.status_code)
    events = [event async for frame in run_turn(state, plan, paced=False) for event in frame]
    done = collect(events)
    turns: dict[str, list[dict[str, str]]] = {}
    for side, contender in (("a", plan.a), ("b", plan.b)):
        turns[side] = [{"role": m["role"], "content": m["content"]} for m in contender.history]
        if done[side]:
            turns[side].append({"role": "assistant", "content": str(done[side])})
    context = _context(
        state,
        who,
        turns=turns,
        status={"a": done["a_status"], "b": done["b_status"]},
        token=done.get("token"),
        notice=done.get("notice"),
    )
    return _page(request, state, context)


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


async def _events(state: ArenaState, plan: LivePlan, who: SessionData) -> AsyncIterator[bytes]:
    # Starlette cancels this generator when the client goes away; run_turn then cancels both requests.
    # One frame is one write, so both panes of a frame change together on the page.
    async for frame in run_turn(state, plan):
        yield (
            b"".join(_sse(event.kind, _event_data(state, event, who)) for event in frame) or b": waiting\n\n"
        )


def _event_data(state: ArenaState, event: LiveEvent, who: SessionData) -> dict[str, Any]:
    if event.kind == "start":
        return {"html": render_markdown(event.text)}  # the prompt, as the reveal renders it
    if event.kind == "reset":
        return {"side": event.side, "notice": event.notice}
    if event.kind == "update":
        return {"side": event.side, "html": render_markdown_uncached(event.text), "tokens": event.tokens}
    if event.kind in ("done", "failed"):
        failed = event.kind == "failed"
        return {
            "side": event.side,
            "html": render_markdown(event.text),
            "tokens": event.tokens,
            "failed": failed,
            "message": FAILED_TEXTS.get(event.reason or "error", FAILED_TEXT) if failed else None,
        }
    template = state.templates.get_template("partials/_live_controls.html")
    controls = template.render(_context(state, who, token=event.token, notice=event.notice))
    return {"votable": event.token is not None, "notice": event.notice, "controls": controls}


@router.post("/battle/stream")
async def battle_stream(  # nosec B107 # form field defaults, not passwords
    request: Request,
    state: StateDep,
    message: _Message,
    csrf_token: _Csrf = "",
    token: _Token = "",
) -> Response:
    """With JavaScript: the turn as Server-Sent Events (``update``, ``done``/``failed`` per side, ``end``)."""
    try:
        plan = await _plan(request, state, message, csrf_token, token)
    except LiveRefused as exc:
        return JSONResponse({"detail": str(exc)}, status_code=exc.status_code)
    except RateLimited as exc:
        return JSONResponse(
            {"detail": str(exc)}, status_code=429, headers={"Retry-After": str(exc.retry_after)}
        )
    who = require_session(request, state)
    return StreamingResponse(
        _events(state, plan, who),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
