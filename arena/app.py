"""The web application: ``create_app(settings)`` wires the store, the vote writer, security and the routes."""

from __future__ import annotations

import gc
import logging
import math
import random
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2
import markupsafe
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from sqlalchemy.engine import Engine
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from arena.logs import RequestLogMiddleware
from arena.metrics import RequestMetricsMiddleware
from arena.security import BattleTokens, InMemoryRateLimiter, RateLimiter, RedisRateLimiter, Signer
from arena.settings import Settings, live_config
from arena.voting.pairing_service import PairingService
from arena.voting.state import ArenaState
from arena.web.display import board_title, time_tag
from arena.web.limits import RequestLimitsMiddleware
from arena.web.markdown import render_markdown
from arena.web.middleware import SecurityHeadersMiddleware, SessionCookieMiddleware, TrustedProxyMiddleware
from arena.web.routes import admin, api, docs, health, live_battle, overview, pages, review, snapshots
from arena.web.routes.deps import NeedsInvite, NeedsSignIn, RateLimited
from arena.web.routes.docs import SWAGGER_ASSETS

if TYPE_CHECKING:
    from arena.signin import OidcSignIn
from leaderboard.data import OUTCOMES
from votes.db import make_engine
from votes.voting.ratings import ensure_live_rater
from votes.voting.writer import GroupCommitWriter, RemoteVoteWriter, VoteWriter, writer_identity

__all__ = ["DatabaseOutageLog", "create_app", "create_app_from_env", "template_dirs"]

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent
STATIC_DIR = PACKAGE_DIR / "static"


def template_dirs() -> list[Path]:
    """The repository's ``templates/`` (a checkout) and the wheel's ``arena/_templates`` (an install)."""
    candidates = [PACKAGE_DIR.parent / "templates", PACKAGE_DIR / "_templates"]
    return [p for p in candidates if p.is_dir()]


def _make_templates(settings: Settings) -> Jinja2Templates:
    loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(p)) for p in template_dirs()])
    env = jinja2.Environment(loader=loader, autoescape=True, auto_reload=False)
    env.globals["sign_in_enabled"] = settings.sign_in
    # The vote buttons of every page, with their keys and meanings, from the one outcome vocabulary.
    env.globals["vote_buttons"] = tuple(OUTCOMES.values())
    env.filters["markdown"] = lambda text: markupsafe.Markup(render_markdown(text or ""))  # nosec B704 # nh3-sanitised HTML from render_markdown
    env.filters["rating"] = lambda value: "—" if math.isnan(value) else f"{value:.1f}"  # NaN: unrated
    env.filters["signed"] = lambda value: f"{value:+.1f}"
    env.filters["when"] = time_tag  # a time to the minute, the exact one in <time datetime>
    env.filters["board_title"] = board_title  # "category=coding" -> "Coding"
    return Jinja2Templates(env=env)


#: Seconds a client is asked to wait (``Retry-After``) while the database cannot be reached.
DATABASE_RETRY_AFTER_SECONDS = 5
#: Failures closer together than this belong to one outage, which is logged once.
OUTAGE_GAP_SECONDS = 30.0


class DatabaseOutageLog:
    """One warning per database outage instead of a traceback per request.

    An outage starts with a failure that comes more than :data:`OUTAGE_GAP_SECONDS` after the previous
    one; the line names the error class only (never a statement or its values).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.last_failure: float | None = None
        self.lock = threading.Lock()

    def failed(self, exc: Exception) -> None:
        now = self.clock()
        with self.lock:
            new = self.last_failure is None or now - self.last_failure > OUTAGE_GAP_SECONDS
            self.last_failure = now
        if new:
            cause = type(getattr(exc, "orig", None) or exc).__name__
            log.warning("database unavailable (%s); answering 503 with Retry-After until it is back", cause)


def _add_error_handlers(app: FastAPI, state: ArenaState) -> None:
    def _wants_json(request: Request) -> bool:
        return request.url.path.startswith("/api/")

    @app.exception_handler(RateLimited)
    def _rate_limited(request: Request, exc: RateLimited) -> Response:
        headers = {"Retry-After": str(exc.retry_after)}
        if _wants_json(request):
            return JSONResponse({"detail": str(exc)}, status_code=429, headers=headers)
        context = {"title": "Slow down", "text": str(exc), "link": "/vote"}
        response = state.templates.TemplateResponse(
            request=request, name="pages/message.html", context=context, status_code=429
        )
        response.headers.update(headers)
        return response

    outage = DatabaseOutageLog()

    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    @app.exception_handler(PoolTimeoutError)
    def _database_unavailable(request: Request, exc: Exception) -> Response:
        # Votes already acknowledged are committed; this request was not. The client may retry.
        outage.failed(exc)
        text = "The database is unavailable for a moment; please try again shortly."
        headers = {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)}
        if _wants_json(request):
            return JSONResponse({"detail": text}, status_code=503, headers=headers)
        context = {"title": "Back in a moment", "text": text, "link": request.url.path}
        response = state.templates.TemplateResponse(
            request=request, name="pages/message.html", context=context, status_code=503
        )
        response.headers.update(headers)
        return response

    @app.exception_handler(RequestValidationError)
    def _invalid_request(_request: Request, exc: RequestValidationError) -> Response:
        # Where and what, never the submitted value: a 200 MB body must not come back in the answer.
        errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.exception_handler(NeedsSignIn)
    def _needs_sign_in(request: Request, _exc: NeedsSignIn) -> Response:
        text = "This arena counts votes from signed-in annotators only: please sign in first."
        if _wants_json(request):
            return JSONResponse({"detail": text, "sign_in": "/signin"}, status_code=403)
        context = {"title": "Sign in to vote", "text": text, "link": "/signin"}
        return state.templates.TemplateResponse(
            request=request, name="pages/message.html", context=context, status_code=403
        )

    @app.exception_handler(NeedsInvite)
    def _needs_invite(request: Request, _exc: NeedsInvite) -> Response:
        text = "This arena is open to invited annotators only: please use your invite link."
        if _wants_json(request):
            return JSONResponse({"detail": text}, status_code=403)
        context = {"title": "Invite needed", "text": text, "link": "/"}
        return state.templates.TemplateResponse(
            request=request, name="pages/message.html", context=context, status_code=403
        )


def _sign_in(settings: Settings, clock: Callable[[], float]) -> OidcSignIn | None:
    """The OpenID Connect client when a provider is configured (Authlib and joserfc load only then)."""
    if not settings.sign_in:
        return None
    from arena.signin import OidcSignIn  # Authlib and joserfc: only with a sign-in provider

    return OidcSignIn(settings, settings.secret_key, clock=clock)


def create_app(
    settings: Settings,
    *,
    engine: Engine | None = None,
    clock: Callable[[], float] = time.time,
    seed: int | None = None,
    freeze_gc: bool = False,
) -> FastAPI:
    """Build the site; ``engine``, ``clock`` and ``seed`` are for tests (by default: from settings).

    ``freeze_gc`` is for a process that serves this app and nothing else (the uvicorn factory): after
    start-up, the objects alive are frozen out of the garbage collector's generations.
    """
    own_engine = engine is None
    engine = engine or make_engine(settings.database_url)
    live = live_config(settings)
    limiter: RateLimiter = (
        RedisRateLimiter(settings.redis_url, clock=clock)
        if settings.redis_url
        else InMemoryRateLimiter(clock)
    )
    writer: VoteWriter = GroupCommitWriter(
        engine,
        config=live,
        max_wait_ms=settings.group_commit_max_wait_ms,
        max_batch=settings.group_commit_max_batch,
    )
    if settings.vote_writer_socket:
        writer = RemoteVoteWriter(
            settings.vote_writer_socket, fallback=writer, expect=writer_identity(engine, live)
        )
    rng = random.Random(seed) if seed is not None else random.SystemRandom(secrets.randbits(64))  # nosec B311 # pairing randomness, not a secret
    state = ArenaState(
        settings=settings,
        engine=engine,
        live=live,
        writer=writer,
        signer=Signer(settings.secret_key),
        tokens=BattleTokens(settings.secret_key, ttl_seconds=settings.battle_token_ttl_seconds, clock=clock),
        limiter=limiter,
        pairing=PairingService(engine, settings, rng=rng),
        templates=_make_templates(settings),
        clock=clock,
        signin=_sign_in(settings, clock),
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # Live rows written by another rater (the setting changed) are replaced by this one's replay.
        ensure_live_rater(engine, live)
        state.writer.start()  # the pairing catalog is read on first use
        if freeze_gc:
            # Everything imported and built so far lives as long as the process: move it out of the
            # collector's sight, or each full collection walks it again (100-260 ms per pause, measured
            # in a worker under load: the largest part of the vote latency's tail).
            gc.collect()
            gc.freeze()
        try:
            yield
        finally:
            await state.endpoints.aclose()
            state.writer.stop()
            if isinstance(state.limiter, RedisRateLimiter):
                state.limiter.close()
            if own_engine:
                engine.dispose()

    app = FastAPI(
        title="Arena",
        summary="Blind pairwise votes on LLM answers, live Elo, published Bradley-Terry leaderboards.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # arena.web.routes.docs serves /docs in the site's own accessible layout
        redoc_url=None,  # ... and sends /redoc there: ReDoc's CDN script is blocked by the CSP too
    )
    app.state.arena = state
    _add_error_handlers(app, state)
    app.add_middleware(SessionCookieMiddleware, secure=settings.session_cookie_secure)
    app.add_middleware(
        RequestLimitsMiddleware,
        default_body_bytes=settings.max_body_bytes,
        # The multipart envelope around the file gets a little room of its own.
        body_bytes_by_prefix={"/api/admin/import": admin.MAX_IMPORT_BYTES + 64 * 1024},
        max_header_bytes=settings.max_header_bytes,
        max_headers=settings.max_headers,
    )
    app.add_middleware(SecurityHeadersMiddleware)
    if settings.metrics != "off":
        app.add_middleware(RequestMetricsMiddleware)
    if settings.log_format == "json":
        app.add_middleware(RequestLogMiddleware)
    if settings.trusted_proxies:  # outermost: every layer inside sees the client behind the proxies
        app.add_middleware(TrustedProxyMiddleware, trusted=settings.trusted_proxies)
    # The voting API first: routes are tried in order, and trying the pages, the live battles and the
    # mounts before it cost a tenth of a worker's CPU per vote. Its paths are all literal under /api (no
    # path parameter), so it cannot take a request meant for a router below.
    app.include_router(api.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.mount("/docs/swagger/assets", StaticFiles(directory=SWAGGER_ASSETS), name="swagger-assets")
    app.include_router(health.router)
    app.include_router(pages.router)
    app.include_router(live_battle.router)
    app.include_router(admin.router)
    app.include_router(review.router)
    app.include_router(docs.router)
    app.include_router(snapshots.router)
    app.include_router(overview.router)
    if settings.sign_in:
        from arena.web.routes import signin  # the OpenID Connect client is loaded only where it is used

        app.include_router(signin.router)
    return app


def create_app_from_env() -> FastAPI:
    """uvicorn factory (``arena.app:create_app_from_env``): settings from the ``ARENA_*`` environment."""
    return create_app(Settings(), freeze_gc=True)
