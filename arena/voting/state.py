"""The web app's shared state: :class:`ArenaState`, one per app on ``app.state.arena``.

Built by :func:`arena.app.create_app`; route handlers reach it through
:func:`arena.web.routes.deps.get_state`. It sits below both the app factory and the routes, so neither has to
import the other to name it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastapi.templating import Jinja2Templates
from sqlalchemy.engine import Engine
from sqlmodel import Session

from arena.llm.pool import EndpointPool
from arena.security import BattleTokens, RateLimiter, Signer
from arena.settings import Settings
from arena.voting.pairing_service import PairingService

if TYPE_CHECKING:
    from arena.signin import OidcSignIn
from votes.voting.live import LiveConfig, provisional_deviation
from votes.voting.views import Standing, live_standings
from votes.voting.writer import VoteWriter

__all__ = ["ArenaState"]


@dataclass
class ArenaState:
    """Everything the routes share; one per app, on ``app.state.arena``."""

    settings: Settings
    engine: Engine
    live: LiveConfig  # the live rater: the plain Elo's configuration or another online rater
    writer: VoteWriter
    signer: Signer
    tokens: BattleTokens
    limiter: RateLimiter
    pairing: PairingService
    templates: Jinja2Templates
    clock: Callable[[], float] = field(default=time.time)
    endpoints: EndpointPool = field(default_factory=EndpointPool)  # the live battles' clients
    signin: OidcSignIn | None = None  # the OpenID Connect provider, when one is configured

    def live_standings(self, session: Session) -> list[Standing]:
        """The live board as these settings rank it, provisional models marked."""
        return live_standings(
            session=session,
            rank_by=self.settings.live_rank_by,
            provisional_above=provisional_deviation(self.live),
            provisional_games=self.settings.live_provisional_games,
        )
