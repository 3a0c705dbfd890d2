"""``/signin``: send the browser to the OpenID Connect provider, and take it back as a signed-in annotator.

Present only when a provider is configured (:mod:`arena.signin` does the protocol). The account's
annotator row is found (or written, on its first sign-in) by a keyed hash of the issuer and subject, so
one person is one annotator on every device; the session cookie is renewed with a fresh nonce (a new
CSRF token: nothing of the anonymous session carries over into the account's).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from arena.signin import SIGNIN_COOKIE, SIGNIN_TTL_S, OidcSignIn, SignInError
from arena.voting.state import ArenaState
from arena.web.routes.deps import StateDep, check_rate_limits, request_address
from votes.db import session_scope
from votes.voting.annotators import annotator_for_session

router = APIRouter(include_in_schema=False)


def _provider(state: ArenaState) -> OidcSignIn:
    if state.signin is None:  # the routes are mounted only with a provider; this is for the type checker
        raise SignInError("sign-in is not configured on this site")
    return state.signin


def _callback_url(request: Request) -> str:
    return str(request.url_for("signin_callback"))


def _account_annotator(state: ArenaState, key: str) -> int:
    with session_scope(state.engine) as session:
        return annotator_for_session(session=session, session_key=key, kind="account")


def _refused(request: Request, state: ArenaState, text: str) -> HTMLResponse:
    context = {"title": "Sign-in failed", "text": text, "link": "/signin"}
    response = state.templates.TemplateResponse(
        request=request, name="pages/message.html", context=context, status_code=400
    )
    response.delete_cookie(SIGNIN_COOKIE, path="/signin")
    return response


@router.get("/signin")
async def signin(
    request: Request, state: StateDep, next: Annotated[str | None, Query(max_length=500)] = None
) -> Response:
    """Start signing in: a redirect to the provider, this attempt remembered in a ten-minute cookie."""
    await check_rate_limits(state, address=request_address(request), who=None, voting=False)
    try:
        url, cookie = await _provider(state).begin(_callback_url(request), next)
    except SignInError as exc:
        return _refused(request, state, str(exc))
    response = RedirectResponse(url, status_code=303)
    response.set_cookie(
        SIGNIN_COOKIE,
        cookie,
        max_age=SIGNIN_TTL_S,
        path="/signin",
        httponly=True,
        secure=state.settings.session_cookie_secure,
        samesite="lax",  # the provider's redirect back is a top-level GET from another site
    )
    return response


@router.get("/signin/callback", name="signin_callback")
async def signin_callback(request: Request, state: StateDep) -> Response:
    """The provider's redirect back: verify, then sign the browser in as the account's annotator."""
    await check_rate_limits(state, address=request_address(request), who=None, voting=False)
    params = {k: v[:5000] for k, v in request.query_params.items() if k in ("code", "state", "error")}
    try:
        account, target = await _provider(state).finish(
            request.cookies.get(SIGNIN_COOKIE), params, _callback_url(request)
        )
    except SignInError as exc:
        return _refused(request, state, str(exc))
    annotator_id = await run_in_threadpool(_account_annotator, state, account.key)
    _, cookie = state.signer.new_session(annotator_id, signed_in=True)
    request.state.set_session = cookie
    response = RedirectResponse(target, status_code=303)
    response.delete_cookie(SIGNIN_COOKIE, path="/signin")
    return response
