"""The web application: ``create_app(settings)`` wires the store, the vote writer, security and the routes."""

from __future__ import annotations

import random
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import markupsafe
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from arena.markdown import render_markdown
from arena.pairing import Choice, PairingCatalog, choose_battle
from arena.security import (
    BattleTokens,
    InMemoryRateLimiter,
    RateLimiter,
    RedisRateLimiter,
    SecurityHeadersMiddleware,
    Signer,
)
from arena.settings import Settings
from leaderboard.elo import EloConfig
from votes.db import make_engine
from votes.models import LiveRating, Output, Prompt
from votes.review import LeakScanner
from votes.store import GroupCommitWriter, annotator_seen_pairs, load_pairing_catalog, pair_vote_counts

__all__ = ["ArenaState", "PairingService", "create_app", "create_app_from_env", "template_dirs"]

PACKAGE_DIR = Path(__file__).resolve().parent
STATIC_DIR = PACKAGE_DIR / "static"


def template_dirs() -> list[Path]:
    """The repository's ``templates/`` (a checkout) and the wheel's ``arena/_templates`` (an install)."""
    candidates = [PACKAGE_DIR.parent / "templates", PACKAGE_DIR / "_templates"]
    return [p for p in candidates if p.is_dir()]


class PairingService:
    """Caches what pairing needs (catalog, pair counts, texts) and refreshes it every ``ttl_s`` seconds."""

    def __init__(
        self, engine: Engine, settings: Settings, *, rng: random.Random, ttl_s: float = 10.0
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.rng = rng
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._loaded_at = -float("inf")
        self._catalog = PairingCatalog(outputs={})
        self._counts: dict[tuple[int, int], int] = {}
        self._ratings: dict[int, float] = {}
        self._texts: dict[tuple[str, int], Prompt | Output] = {}
        # Answers that name their own model or maker are kept out of battles (votes.leaks).
        self.leaks = LeakScanner()

    def refresh(self, *, force: bool = False) -> None:
        if not force and time.monotonic() - self._loaded_at < self.ttl_s:
            return
        with Session(self.engine) as session:
            leaking = self.leaks.leaking_output_ids(session.connection())
            rows = [r for r in load_pairing_catalog(session=session) if r.output_id not in leaking]
            catalog = PairingCatalog.from_rows(rows)
            counts = pair_vote_counts(session=session)
            ratings = dict(session.exec(select(LiveRating.model_id, LiveRating.rating)).all())
        with self._lock:
            self._catalog, self._counts, self._ratings = catalog, counts, ratings
            self._texts.clear()
            self._loaded_at = time.monotonic()

    def note_vote(self, model_a_id: int, model_b_id: int) -> None:
        key = (min(model_a_id, model_b_id), max(model_a_id, model_b_id))
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    @property
    def catalog(self) -> PairingCatalog:
        self.refresh()
        return self._catalog

    def choose(self, session: Session, annotator_id: int) -> Choice | None:
        self.refresh()
        seen = annotator_seen_pairs(session=session, annotator_id=annotator_id)
        with self._lock:
            return choose_battle(
                self._catalog,
                policy=self.settings.pairing_policy,
                counts=self._counts,
                seen=seen,
                rng=self.rng,
                power=self.settings.pairing_balance_power,
                ratings=self._ratings,
            )

    def prompt(self, session: Session, prompt_id: int) -> Prompt:
        return self._cached(session, Prompt, "prompt", prompt_id)  # type: ignore[return-value]

    def output(self, session: Session, output_id: int) -> Output:
        return self._cached(session, Output, "output", output_id)  # type: ignore[return-value]

    def _cached(
        self, session: Session, table: type[Prompt] | type[Output], kind: str, key: int
    ) -> Prompt | Output:
        hit = self._texts.get((kind, key))
        if hit is not None:
            return hit
        row: Prompt | Output | None = session.get(table, key)  # type: ignore[assignment]
        if row is None:
            raise LookupError(f"{kind} {key} not found")
        session.expunge(row)
        self._texts[(kind, key)] = row
        return row


@dataclass
class ArenaState:
    """Everything the routes share; one per app, on ``app.state.arena``."""

    settings: Settings
    engine: Engine
    elo: EloConfig
    writer: GroupCommitWriter
    signer: Signer
    tokens: BattleTokens
    limiter: RateLimiter
    pairing: PairingService
    templates: Jinja2Templates
    clock: Callable[[], float] = field(default=time.time)


class SessionCookieMiddleware:
    """Sets the session cookie that a route created (``scope['state']['set_session']``) on its response."""

    def __init__(self, app: ASGIApp, *, secure: bool) -> None:
        self.app = app
        self.secure = secure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                cookie = scope.get("state", {}).get("set_session")
                if cookie:
                    attrs = "; Path=/; HttpOnly; SameSite=Lax; Max-Age=31536000"
                    if self.secure:
                        attrs += "; Secure"
                    headers = list(message.get("headers", []))
                    headers.append((b"set-cookie", f"arena_session={cookie}{attrs}".encode()))
                    message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_cookie)


def _make_templates() -> Jinja2Templates:
    loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(p)) for p in template_dirs()])
    env = jinja2.Environment(loader=loader, autoescape=True, auto_reload=False)
    env.filters["markdown"] = lambda text: markupsafe.Markup(render_markdown(text or ""))  # nosec B704 # nh3-sanitised HTML from render_markdown
    env.filters["rating"] = lambda value: "—" if value != value else f"{value:.1f}"  # NaN: unrated
    env.filters["signed"] = lambda value: f"{value:+.1f}"
    return Jinja2Templates(env=env)


def _add_error_handlers(app: FastAPI, state: ArenaState) -> None:
    from arena.routes.deps import NeedsInvite, RateLimited

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

    @app.exception_handler(NeedsInvite)
    def _needs_invite(request: Request, _exc: NeedsInvite) -> Response:
        text = "This arena is open to invited annotators only: please use your invite link."
        if _wants_json(request):
            return JSONResponse({"detail": text}, status_code=403)
        context = {"title": "Invite needed", "text": text, "link": "/"}
        return state.templates.TemplateResponse(
            request=request, name="pages/message.html", context=context, status_code=403
        )


def create_app(
    settings: Settings,
    *,
    engine: Engine | None = None,
    clock: Callable[[], float] = time.time,
    seed: int | None = None,
) -> FastAPI:
    """Build the site; ``engine``, ``clock`` and ``seed`` are for tests (by default: from settings)."""
    from arena.routes import admin, api, pages, review

    own_engine = engine is None
    engine = engine or make_engine(settings.database_url)
    elo = EloConfig(k=settings.elo_k, initial=settings.elo_initial)
    limiter: RateLimiter = (
        RedisRateLimiter(settings.redis_url, clock=clock)
        if settings.redis_url
        else InMemoryRateLimiter(clock)
    )
    rng = random.Random(seed) if seed is not None else random.SystemRandom(secrets.randbits(64))  # nosec B311 # pairing randomness, not a secret
    state = ArenaState(
        settings=settings,
        engine=engine,
        elo=elo,
        writer=GroupCommitWriter(
            engine,
            config=elo,
            max_wait_ms=settings.group_commit_max_wait_ms,
            max_batch=settings.group_commit_max_batch,
        ),
        signer=Signer(settings.secret_key),
        tokens=BattleTokens(settings.secret_key, ttl_seconds=settings.battle_token_ttl_seconds, clock=clock),
        limiter=limiter,
        pairing=PairingService(engine, settings, rng=rng),
        templates=_make_templates(),
        clock=clock,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        state.writer.start()
        try:
            yield
        finally:
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
    )
    app.state.arena = state
    _add_error_handlers(app, state)
    app.add_middleware(SessionCookieMiddleware, secure=settings.session_cookie_secure)
    app.add_middleware(SecurityHeadersMiddleware)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.include_router(pages.router)
    app.include_router(api.router)
    app.include_router(admin.router)
    app.include_router(review.router)
    try:  # the published snapshot pages (issue 5) when present
        from arena.routes import snapshots  # type: ignore[attr-defined,unused-ignore]

        app.include_router(snapshots.router)
    except ImportError:
        pass
    return app


def create_app_from_env() -> FastAPI:
    """uvicorn factory (``arena.app:create_app_from_env``): settings from the ``ARENA_*`` environment."""
    return create_app(Settings())
