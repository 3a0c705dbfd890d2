"""One place that reads the environment: every knob is an `ARENA_` variable or a constructor argument."""

from __future__ import annotations

import re
import secrets
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from leaderboard.design.pairing import DEFAULT_FLOOR
from leaderboard.online.elo import EloConfig
from leaderboard.online.table import DEFAULT_LIVE_RATER, RATERS, LiveOptions
from votes.voting.live import LiveConfig, live_rater_of

__all__ = ["Settings", "DEFAULT_DATABASE_URL", "elo_config", "live_config", "live_rating_words"]

DEFAULT_DATABASE_URL = "sqlite:///arena.db"


class Settings(BaseSettings):
    """Arena settings; read from `ARENA_*` environment variables (and a `.env` file if present)."""

    model_config = SettingsConfigDict(env_prefix="ARENA_", env_file=".env", extra="ignore")

    database_url: str = Field(DEFAULT_DATABASE_URL, description="SQLAlchemy URL; SQLite file by default.")
    redis_url: str | None = Field(None, description="Redis for shared rate limits across workers.")
    secret_key: str = Field(
        default_factory=lambda: secrets.token_urlsafe(32),
        description="Signs sessions and battle tokens. Set it for more than one worker or across restarts.",
    )
    admin_token: str | None = Field(
        None, description="Bearer token for the admin API; admin is off if unset."
    )
    snapshot_dir: str = Field("snapshots", description="Where published snapshots are stored.")

    # Request limits (a reverse proxy in front should use the same or smaller ones)
    max_body_bytes: int = Field(
        64 * 1024, ge=1024, description="Largest request body outside the admin import."
    )
    max_header_bytes: int = Field(
        16 * 1024, ge=1024, description="Largest total size of a request's headers."
    )
    max_headers: int = Field(100, ge=10, description="Most headers in one request.")
    max_expanded_bytes: int = Field(
        1 << 30, ge=1, description="Most bytes a gzipped import file may expand to (gzip bombs)."
    )
    # Connections (arena.web.connections): one host cannot hold the site with idle or slow sockets
    header_timeout_seconds: float = Field(
        10.0, gt=0.0, le=300.0, description="Seconds a request's headers may take to arrive (408 after)."
    )
    max_connections_per_address: int = Field(
        64, ge=1, description="Open connections per client address (IPv6: per /64) and worker; 503 beyond."
    )
    max_connections: int = Field(4096, ge=16, description="Open connections per worker; 503 beyond.")

    # Pairing
    pairing_policy: Literal["uniform", "balanced", "active", "optimal"] = Field(
        "optimal",
        description=(
            "How the next pair is chosen (see arena.voting.pairing); each battle logs its probability."
        ),
    )
    pairing_floor: float = Field(
        DEFAULT_FLOOR,
        gt=0.0,
        le=1.0,
        description="Optimal policy: share of battles drawn uniformly over all pairs.",
    )
    pairing_balance_power: float = Field(1.0, ge=0.0, description="Balanced policy: weight ~ 1/(n+1)^power.")

    gold_rate: float = Field(
        0.05,
        ge=0.0,
        le=0.2,
        description="Share of served battles that are gold battles (right vote known), 0 to 0.2.",
    )
    gold_quiz: int = Field(
        0,
        ge=0,
        le=20,
        description="Golds a new annotator votes on first; below 75% right, their votes never count.",
    )
    repeat_rate: float = Field(
        0.015,
        ge=0.0,
        le=0.05,
        description="Share of served battles that repeat one of the annotator's own earlier battles, sides "
        "swapped, to measure their self-agreement (never counted), 0 to 0.05.",
    )
    flagged_votes: Literal["exclude", "down-weight"] = Field(
        "exclude",
        description="Published boards and recomputes from the database: flagged annotators' votes left "
        "out, or down-weighted (each weighs the smaller of the annotator's honest weight and "
        "flagged_weight).",
    )
    flagged_weight: float = Field(
        0.2, ge=0.0, le=1.0, description="With flagged_votes=down-weight: the most a flagged vote weighs."
    )

    @property
    def flagged_down_weight(self) -> float | None:
        """The ``flagged_votes`` setting as a filter's ``flagged_weight`` (None: flagged votes left out)."""
        return self.flagged_weight if self.flagged_votes == "down-weight" else None

    # Live standings: the online rater, and how the board ranks
    live_rating: str = Field(
        DEFAULT_LIVE_RATER,
        description="Online rater of the live standings, by its name in the RATERS table "
        "(leaderboard.online.table); switching it rebuilds the live table at start-up.",
    )

    @field_validator("live_rating")
    @classmethod
    def _rater_known(cls, name: str) -> str:
        """A name of the RATERS table, refused as a choice among them (read when the settings are made,
        so a rater added to the table is a choice at once)."""
        if name not in RATERS:
            names = [repr(known) for known in RATERS]
            expected = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
            raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})
        return name

    live_rank_by: Literal["rating", "conservative"] = Field(
        "rating", description="Rank the live board by rating, or by rating - 2 deviations."
    )
    live_provisional_games: int = Field(
        20,
        ge=0,
        description="A model with fewer live games is marked provisional on the live board, whatever the "
        "rater: one vote is not a measurement, and the plain Elo has no deviation of its own to say so.",
    )
    live_period_seconds: float = Field(86400.0, gt=0.0, description="Glicko-2 rating period length.")
    elo_k: float = Field(4.0, gt=0.0)
    elo_initial: float = 1000.0

    # Sessions, tokens and limits
    battle_token_ttl_seconds: int = Field(3600, gt=0)
    session_cookie_secure: bool = False
    invite_only: bool = False
    rate_limit_per_minute: int = Field(60, ge=1, description="Votes per annotator per minute.")
    rate_limit_per_address_per_minute: int = Field(300, ge=1)
    daily_vote_cap: int | None = Field(None, ge=1)
    # Limits a visitor cannot shed by dropping the cookie: keyed on the address (an IPv6 /64 as one).
    votes_per_address_per_minute: int = Field(
        60, ge=1, description="Anonymous votes per address (IPv6: per /64) per minute."
    )
    votes_per_address_per_day: int = Field(
        2000, ge=1, description="Anonymous votes per address (IPv6: per /64) per day."
    )
    new_sessions_per_address_per_hour: int = Field(
        120, ge=1, description="New anonymous sessions (cookies) handed to one address per hour."
    )
    trusted_proxies: list[str] = Field(default_factory=list)

    # Sign-in with OpenID Connect (optional): an account is one annotator on every device, its limits
    # counted on the account; with require_sign_in only signed-in votes are taken.
    oidc_issuer: str | None = Field(
        None,
        description="OpenID Connect issuer URL (its /.well-known/openid-configuration is read); https, "
        "or http on a loopback host for a local provider. Unset: no sign-in.",
    )
    oidc_client_id: str | None = Field(None, description="This site's client id at the provider.")
    oidc_client_secret: SecretStr | None = Field(
        None, description="This site's client secret (never logged)."
    )
    require_sign_in: bool = Field(False, description="Only signed-in annotators may vote (needs OIDC).")
    oidc_min_account_age_days: int = Field(
        0, ge=0, description="Refuse accounts younger than this, where the provider states an account's age."
    )
    oidc_account_created_claim: str = Field(
        "created_at",
        max_length=100,
        description="The ID-token claim with the account's creation time (epoch seconds or ISO 8601).",
    )

    @field_validator("oidc_issuer")
    @classmethod
    def _issuer_is_https(cls, issuer: str | None) -> str | None:
        """Tokens from a provider reached over plain HTTP could be forged on the way, except on loopback."""
        if issuer is None:
            return None
        url = urlsplit(issuer)
        loopback = url.hostname in {"localhost", "127.0.0.1", "::1"}
        if url.scheme != "https" and not (url.scheme == "http" and loopback):
            raise ValueError("the OIDC issuer must be an https URL (http only on a loopback host)")
        return issuer.rstrip("/")

    @model_validator(mode="after")
    def _sign_in_is_configured(self) -> Settings:
        if (self.oidc_issuer is None) != (self.oidc_client_id is None):
            raise ValueError("ARENA_OIDC_ISSUER and ARENA_OIDC_CLIENT_ID are set together")
        if self.require_sign_in and self.oidc_issuer is None:
            raise ValueError("ARENA_REQUIRE_SIGN_IN needs ARENA_OIDC_ISSUER and ARENA_OIDC_CLIENT_ID")
        return self

    @property
    def sign_in(self) -> bool:
        """True when an OpenID Connect provider is configured."""
        return self.oidc_issuer is not None

    # Live battles (/battle): the annotator's own prompt, answered by two registered endpoints
    live_max_prompt_chars: int = Field(
        4000,
        ge=1,
        description="Longest live prompt (characters); longer ones are refused before any request.",
    )
    live_generations_per_minute: int = Field(10, ge=1, description="Live turns per annotator per minute.")
    live_generations_per_address_per_minute: int = Field(
        30, ge=1, description="Live turns per client address per minute."
    )
    live_daily_tokens: int | None = Field(
        1_000_000, ge=1, description="Tokens per endpoint per UTC day for live battles (unset: no budget)."
    )
    live_moderation_patterns: list[str] = Field(
        default_factory=list,
        description="Regular expressions (JSON list); a matching live prompt is refused before any request.",
    )

    @field_validator("live_moderation_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        """A pattern that is not a regular expression is refused at start-up, not on the first prompt."""
        for i, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"moderation pattern {i + 1} is not a regular expression: {exc}") from None
        return patterns

    live_timeout_seconds: float = Field(120.0, gt=0.0, description="Longest a live answer may take.")
    live_stall_seconds: float = Field(
        20.0,
        gt=0.0,
        description="Longest wait for a live answer's first token or its next one; then another model "
        "answers in its place (on a first turn, when one is free) or the battle ends without a vote.",
    )
    live_max_turns: int = Field(8, ge=1, description="Most turns of one live conversation.")

    # Durability: group commit window for votes (0 = commit each vote on its own).
    group_commit_max_wait_ms: float = Field(2.0, ge=0.0)
    group_commit_max_batch: int = Field(256, ge=1)
    vote_writer_socket: str | None = Field(
        None,
        description="Unix socket of a shared vote writer process (`arena vote-writer`; `arena serve` starts "
        "one for several workers). Unset: each worker writes its own votes.",
    )

    # Operations
    metrics: Literal["on", "off", "admin"] = Field(
        "on", description="`/metrics`: open to all (on), absent (off), or behind the admin token (admin)."
    )
    log_format: Literal["text", "json"] = Field(
        "text", description="Logs as plain text, or one JSON object per line (requests and access log)."
    )
    prometheus_multiproc_dir: str | None = Field(
        None,
        validation_alias="PROMETHEUS_MULTIPROC_DIR",
        description="prometheus-client's folder for the samples of several processes (`arena serve "
        "--workers N` makes one); unset: one process, its own registry.",
    )


def elo_config(settings: Settings) -> EloConfig:
    """The live Elo of these settings."""
    return EloConfig(k=settings.elo_k, initial=settings.elo_initial)


def live_config(settings: Settings) -> LiveConfig:
    """The live rater of these settings (the web workers and the vote writer process must agree on it)."""
    return live_rater_of(
        settings.live_rating, elo=elo_config(settings), period_length=settings.live_period_seconds
    )


def live_rating_words(settings: Settings) -> str:
    """What the live board's ratings are, in words (``Online Elo (K = 4.0)``), from the RATERS table."""
    options = LiveOptions(elo=elo_config(settings), period_length=settings.live_period_seconds)
    return RATERS[settings.live_rating].describe(options)
