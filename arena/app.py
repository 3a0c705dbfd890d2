"""The web application: ``create_app(settings)`` wires the store, the vote writer, security and the routes."""

from __future__ import annotations

import gc
import logging
import random
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

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
from arena.settings import Settings, elo_config
from leaderboard.elo import EloConfig
from votes.db import make_engine, read_session
from votes.models import LiveRating, Output, Prompt
from votes.store import (
    GroupCommitWriter,
    VoteWriter,
    annotator_battles_since,
    load_pairing_catalog,
    pair_vote_counts,
)

if TYPE_CHECKING:
    from votes.review import LeakScanner

__all__ = ["ArenaState", "PairingService", "create_app", "create_app_from_env", "template_dirs"]

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent
STATIC_DIR = PACKAGE_DIR / "static"


def template_dirs() -> list[Path]:
    """The repository's ``templates/`` (a checkout) and the wheel's ``arena/_templates`` (an install)."""
    candidates = [PACKAGE_DIR.parent / "templates", PACKAGE_DIR / "_templates"]
    return [p for p in candidates if p.is_dir()]


class _History:
    """One annotator's judged battles, as pairing needs them (kept per process, synced from the store)."""

    __slots__ = ("battles", "high_water", "keys", "n_votes", "per_pair", "synced_at")

    def __init__(self) -> None:
        self.battles: dict[int, tuple[int, int, int]] = {}  # battle id -> (prompt, lower, higher model)
        self.keys: dict[tuple[int, int, int], int] = {}  # (prompt, lower, higher) -> battles
        self.per_pair: dict[tuple[int, int], int] = {}  # (lower, higher) -> distinct prompts judged
        self.n_votes = 0
        self.high_water = 0  # highest battle id read from the store
        self.synced_at = -float("inf")

    def add(self, battle_id: int, key: tuple[int, int, int], *, voted: bool) -> None:
        if battle_id in self.battles:
            return
        self.battles[battle_id] = key
        n = self.keys.get(key, 0)
        self.keys[key] = n + 1
        if n == 0:
            pair = (key[1], key[2])
            self.per_pair[pair] = self.per_pair.get(pair, 0) + 1
        self.n_votes += voted


class PairingService:
    """What pairing needs, cached per process, so that issuing a battle touches no database.

    The catalog (prompts, outputs, pair vote counts, live ratings) is reloaded every ``ttl_s`` seconds in
    the background (requests go on with the previous copy meanwhile). Each annotator's judged battles are
    kept in memory: a vote recorded by this process is added at once, votes recorded elsewhere (another
    worker, an import) are read incrementally from the store when the copy is older than ``history_ttl_s``.
    With one worker the history is therefore exact; with several, a battle voted through another worker
    in the last ``history_ttl_s`` seconds could be offered again. Prompt and answer texts never change
    in place except by a re-import, so they are cached for ``texts_ttl_s`` seconds.
    """

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        *,
        rng: random.Random,
        ttl_s: float = 10.0,
        history_ttl_s: float = 2.0,
        texts_ttl_s: float = 300.0,
        max_histories: int = 50_000,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.rng = rng
        self.ttl_s = ttl_s
        self.history_ttl_s = history_ttl_s
        self.texts_ttl_s = texts_ttl_s
        self.max_histories = max_histories
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._refreshing = False
        self._loaded_at = -float("inf")
        self._texts_loaded_at = time.monotonic()
        self._catalog = PairingCatalog(outputs={})
        self._counts: dict[tuple[int, int], int] = {}
        self._ratings: dict[int, float] = {}
        self._texts: dict[tuple[str, int], Prompt | Output] = {}
        self._histories: OrderedDict[int, _History] = OrderedDict()
        self._leaks: LeakScanner | None = None

    @property
    def leaks(self) -> LeakScanner:
        """Answers that name their own model or maker are kept out of battles (``votes.leaks``)."""
        if self._leaks is None:
            from votes.review import LeakScanner  # heavy (scipy, scikit-learn): not at app import

            self._leaks = LeakScanner()
        return self._leaks

    # -- the catalog ------------------------------------------------------------------------------

    def refresh(self, *, force: bool = False) -> None:
        """Reload the catalog now if it is older than ``ttl_s`` (or always with ``force``)."""
        with self._refresh_lock:
            if not force and time.monotonic() - self._loaded_at < self.ttl_s:
                return
            with read_session(self.engine) as session:
                leaking = self.leaks.leaking_output_ids(session.connection())
                rows = [r for r in load_pairing_catalog(session=session) if r.output_id not in leaking]
                catalog = PairingCatalog.from_rows(rows)
                counts = pair_vote_counts(session=session)
                ratings = dict(session.exec(select(LiveRating.model_id, LiveRating.rating)).all())
            now = time.monotonic()
            with self._lock:
                self._catalog, self._counts, self._ratings = catalog, counts, ratings
                if force or now - self._texts_loaded_at > self.texts_ttl_s:
                    self._texts.clear()
                    self._texts_loaded_at = now
                if force:
                    for history in self._histories.values():
                        history.synced_at = -float("inf")
                self._loaded_at = now

    def _refresh_in_background(self) -> None:
        with self._lock:
            if self._refreshing:
                return
            self._refreshing = True

        def run() -> None:
            try:
                self.refresh()
            except Exception:  # noqa: BLE001 - keep serving the previous catalog; try again next time
                log.exception("pairing catalog refresh failed")
            finally:
                self._refreshing = False

        threading.Thread(target=run, name="arena-pairing-refresh", daemon=True).start()

    @property
    def catalog(self) -> PairingCatalog:
        self.refresh()
        return self._catalog

    # -- annotators' histories --------------------------------------------------------------------

    def _history(self, annotator_id: int) -> _History:
        history = self._histories.get(annotator_id)
        if history is None:
            history = self._histories[annotator_id] = _History()
            while len(self._histories) > self.max_histories:
                self._histories.popitem(last=False)
        else:
            self._histories.move_to_end(annotator_id)
        return history

    def _sync_history(self, annotator_id: int) -> None:
        with self._lock:
            since = self._history(annotator_id).high_water
        with read_session(self.engine) as session:
            rows = annotator_battles_since(session=session, annotator_id=annotator_id, after_id=since)
        with self._lock:
            history = self._history(annotator_id)
            for battle_id, prompt_id, a, b, voted in rows:
                history.add(battle_id, (prompt_id, min(a, b), max(a, b)), voted=voted)
                history.high_water = max(history.high_water, battle_id)
            history.synced_at = time.monotonic()

    def ready(self, annotator_id: int) -> bool:
        """True when :meth:`pick` can run from memory (a stale catalog is refreshed in the background)."""
        now = time.monotonic()
        if self._loaded_at == -float("inf"):
            return False
        if now - self._loaded_at >= self.ttl_s:
            self._refresh_in_background()
        history = self._histories.get(annotator_id)
        return history is not None and now - history.synced_at < self.history_ttl_s

    def prepare(self, annotator_id: int) -> None:
        """Do the database reads :meth:`pick` needs (blocking: call it from a worker thread)."""
        if self._loaded_at == -float("inf"):
            self.refresh()
        if not self.ready(annotator_id):
            self._sync_history(annotator_id)

    def pick(self, annotator_id: int) -> Choice | None:
        """Choose the next battle from memory; call :meth:`prepare` first when not :meth:`ready`."""
        with self._lock:
            history = self._history(annotator_id)
            return choose_battle(
                self._catalog,
                policy=self.settings.pairing_policy,
                counts=self._counts,
                seen=history.keys.keys(),
                rng=self.rng,
                power=self.settings.pairing_balance_power,
                ratings=self._ratings,
                seen_per_pair=history.per_pair,
            )

    def choose(self, annotator_id: int) -> Choice | None:
        self.prepare(annotator_id)
        return self.pick(annotator_id)

    def n_votes(self, annotator_id: int) -> int:
        """Votes of this annotator as of the last :meth:`prepare` and this process's votes since."""
        with self._lock:
            return self._history(annotator_id).n_votes

    def note_vote(
        self, *, annotator_id: int, battle_id: int, prompt_id: int, model_a_id: int, model_b_id: int
    ) -> None:
        """A vote this process recorded: count its pair and add it to the annotator's history at once."""
        key = (min(model_a_id, model_b_id), max(model_a_id, model_b_id))
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1
            history = self._histories.get(annotator_id)
            if history is not None:
                history.add(battle_id, (prompt_id, *key), voted=True)

    # -- texts ------------------------------------------------------------------------------------

    def cached_texts(self, choice: Choice) -> tuple[Prompt, Output, Output] | None:
        """The prompt and both answers from memory, or None when one must be read."""
        texts = self._texts
        prompt = texts.get(("prompt", choice.prompt_id))
        out_a = texts.get(("output", choice.output_a.output_id))
        out_b = texts.get(("output", choice.output_b.output_id))
        if prompt is None or out_a is None or out_b is None:
            return None
        return prompt, out_a, out_b  # type: ignore[return-value]

    def load_texts(self, choice: Choice) -> tuple[Prompt, Output, Output]:
        """The prompt and both answers, read from the store when not cached (blocking)."""
        hit = self.cached_texts(choice)
        if hit is not None:
            return hit
        with read_session(self.engine) as session:
            prompt = self._cached(session, Prompt, "prompt", choice.prompt_id)
            out_a = self._cached(session, Output, "output", choice.output_a.output_id)
            out_b = self._cached(session, Output, "output", choice.output_b.output_id)
        return prompt, out_a, out_b  # type: ignore[return-value]

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
    writer: VoteWriter
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
    freeze_gc: bool = False,
) -> FastAPI:
    """Build the site; ``engine``, ``clock`` and ``seed`` are for tests (by default: from settings).

    ``freeze_gc`` is for a process that serves this app and nothing else (the uvicorn factory): after
    start-up, the objects alive are frozen out of the garbage collector's generations.
    """
    from arena.routes import admin, api, docs, pages, review

    own_engine = engine is None
    engine = engine or make_engine(settings.database_url)
    elo = elo_config(settings)
    limiter: RateLimiter = (
        RedisRateLimiter(settings.redis_url, clock=clock)
        if settings.redis_url
        else InMemoryRateLimiter(clock)
    )
    writer: VoteWriter = GroupCommitWriter(
        engine,
        config=elo,
        max_wait_ms=settings.group_commit_max_wait_ms,
        max_batch=settings.group_commit_max_batch,
    )
    if settings.vote_writer_socket:
        from votes.writer_service import RemoteVoteWriter, writer_identity

        writer = RemoteVoteWriter(
            settings.vote_writer_socket, fallback=writer, expect=writer_identity(engine, elo)
        )
    rng = random.Random(seed) if seed is not None else random.SystemRandom(secrets.randbits(64))  # nosec B311 # pairing randomness, not a secret
    state = ArenaState(
        settings=settings,
        engine=engine,
        elo=elo,
        writer=writer,
        signer=Signer(settings.secret_key),
        tokens=BattleTokens(settings.secret_key, ttl_seconds=settings.battle_token_ttl_seconds, clock=clock),
        limiter=limiter,
        pairing=PairingService(engine, settings, rng=rng),
        templates=_make_templates(),
        clock=clock,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # Import the leak scanner's heavy modules (scipy, scikit-learn) now, before the first battle
        # request would stall on them; the catalog itself is read on first use.
        _ = state.pairing.leaks
        state.writer.start()
        if freeze_gc:
            # Everything imported and built so far lives as long as the process: move it out of the
            # collector's sight, or each full collection walks it again (100-260 ms per pause, measured
            # in a worker under load: the largest part of the vote latency's tail).
            gc.collect()
            gc.freeze()
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
        docs_url=None,  # arena.routes.docs serves /docs in the site's own accessible layout
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
    app.include_router(docs.router)
    try:  # the published snapshot pages (issue 5) when present
        from arena.routes import snapshots  # type: ignore[attr-defined,unused-ignore]

        app.include_router(snapshots.router)
    except ImportError:
        pass
    return app


def create_app_from_env() -> FastAPI:
    """uvicorn factory (``arena.app:create_app_from_env``): settings from the ``ARENA_*`` environment."""
    return create_app(Settings(), freeze_gc=True)
