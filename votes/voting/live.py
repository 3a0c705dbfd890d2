"""Which online rater the live standings use, and how its per-model state lives in a ``LiveRating`` row.

The live ratings are either the plain online Elo (an :class:`~leaderboard.online.elo.EloConfig`, the fast path
of :mod:`votes.voting.recording`, rows holding only rating and games) or any other online rater of
:data:`leaderboard.online.table.RATERS` (Glicko-2, TrueSkill). For the latter a row also holds the rater's
whole state as JSON (``state``, exact floats), the shown rating and deviation derived from it
(:meth:`~leaderboard.online.raters.OnlineRater.shown`), the rater's identity (``rater``), and for a rater
with a clock the time of the model's last counted vote (``clock``).

The clock of a vote is the running maximum of the counted votes' times in vote-id order, so it never
runs backwards even when workers' clocks disagree; the vote transaction reads it as the largest
``clock`` in the table, which is why a rater with a clock serialises every vote transaction.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, fields
from typing import Any, TypeAlias

from leaderboard.online.elo import EloConfig
from leaderboard.online.raters import OnlineRater
from leaderboard.online.table import RATERS, LiveOptions

__all__ = [
    "LiveConfig",
    "decode_state",
    "encode_state",
    "has_clock",
    "live_rater_of",
    "provisional_deviation",
    "rater_identity",
]

#: The live rating system: the plain online Elo, or any online rater.
LiveConfig: TypeAlias = EloConfig | OnlineRater[Any]

#: A model is marked provisional while its deviation is above this share of a new model's deviation.
PROVISIONAL_SHARE = 0.5


def rater_identity(config: LiveConfig) -> str | None:
    """A short name of the rater and all its parameters; ``None`` for the plain Elo (rows without one)."""
    if isinstance(config, EloConfig):
        return None
    digest = hashlib.sha256(repr(config).encode()).hexdigest()[:16]
    return f"{type(config).__name__}:{digest}"


def has_clock(rater: OnlineRater[Any]) -> bool:
    """Whether the rater's states depend on the time (it overrides :meth:`OnlineRater.advance`)."""
    return type(rater).advance is not OnlineRater.advance


def encode_state(state: Any) -> dict[str, Any]:
    """A rater state (a frozen dataclass) as a JSON object."""
    return asdict(state)


def decode_state(rater: OnlineRater[Any], data: dict[str, Any] | None) -> Any:
    """The state stored by :func:`encode_state`; a new model's state when there is none."""
    initial = rater.initial()
    if data is None:
        return initial
    names = {f.name for f in fields(initial)}
    return type(initial)(**{k: v for k, v in data.items() if k in names})


def provisional_deviation(config: LiveConfig) -> float | None:
    """Deviation above which a model is provisional; ``None`` for a rater without deviations."""
    if isinstance(config, EloConfig):
        return None
    deviation = config.shown(config.initial())[1]
    return None if deviation is None or math.isnan(deviation) else PROVISIONAL_SHARE * deviation


def live_rater_of(name: str, *, elo: EloConfig, period_length: float) -> LiveConfig:
    """The live rating system named by a setting: a name in :data:`~leaderboard.online.table.RATERS`
    (``elo``, ``glicko2``, ``trueskill``), made from the Elo's config and Glicko-2's period length.

    Raises
    ------
    ValueError
        On another name.
    """
    entry = RATERS.get(name)
    if entry is None:
        raise ValueError(f"unknown live rating {name!r}")
    return entry.live(LiveOptions(elo=elo, period_length=period_length))
