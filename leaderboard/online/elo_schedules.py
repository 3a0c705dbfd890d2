"""K-factor schedules of the chess federations for the online Elo rater.

A schedule maps what a model's Elo state knows (rating, games played, highest rating reached) to the K
factor of its next game. :class:`FixedK` is the plain rule; :class:`FideK` and :class:`UscfK` follow
the two federations. Both are written for one game at a time: each vote is its own rated event.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

__all__ = ["FideK", "FixedK", "KSchedule", "UscfK", "uscf_effective_games"]


class KSchedule(Protocol):
    """The K factor for a model's next game."""

    def k(self, rating: float, games: int, peak: float) -> float:
        """K for a model now rated ``rating`` after ``games`` games, whose highest rating was ``peak``."""
        ...


@dataclass(frozen=True)
class FixedK:
    """The same K for everyone, always."""

    value: float = 32.0

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("K must be non-negative")

    def k(self, rating: float, games: int, peak: float) -> float:  # noqa: ARG002 - fixed
        return self.value


@dataclass(frozen=True)
class FideK:
    """FIDE's K factor: 40 for a newcomer, 20 below 2400, 10 once 2400 has been reached.

    FIDE Rating Regulations (effective 1 July 2014), section 8.3.3: K = 40 for a player new to the
    rating list until they have completed events with at least 30 games; K = 20 as long as the rating
    remains under 2400; K = 10 once the published rating has reached 2400, and it stays 10 afterwards
    even if the rating drops. FIDE's further rule of K = 40 for players under 18 (rated below 2300)
    has no meaning for models and is left out. Ratings here are checked after every game, where FIDE
    looks at its published list. The levels are FIDE's own: a rater that uses this schedule on
    another scale moves ``top_rating`` with it (:class:`~leaderboard.online.federations.FideRater` rates
    on FIDE's scale, with FIDE's table and its 400-point cap).

    Parameters
    ----------
    new_k, new_games : float, int
        K while fewer than ``new_games`` games have been played.
    established_k : float
        K for a model past its first games that has never reached ``top_rating``.
    top_k, top_rating : float
        K once the model's highest rating so far (``peak``) has reached ``top_rating``.
    """

    new_k: float = 40.0
    new_games: int = 30
    established_k: float = 20.0
    top_k: float = 10.0
    top_rating: float = 2400.0

    def __post_init__(self) -> None:
        if min(self.new_k, self.established_k, self.top_k) < 0 or self.new_games < 0:
            raise ValueError("K factors and the number of new games must be non-negative")

    def k(self, rating: float, games: int, peak: float) -> float:  # noqa: ARG002 - peak decides
        if games < self.new_games:
            return self.new_k
        if peak >= self.top_rating:
            return self.top_k
        return self.established_k


def uscf_effective_games(rating: float, games: int, *, pivot: float = 2200.0) -> float:
    """US Chess's effective number of games ``N' = min(N, N*)``.

    ``N* = 50 / sqrt(1 + (pivot - R)^2 / 100000)`` for ``R <= pivot`` and 50 above it, with
    ``pivot = 2200``: M. E. Glickman, *The US Chess Rating System*, section "Effective number of games",
    http://math.bu.edu/people/mg/ratings/rs/node3.html (example there: R = 1700 after N = 30 games gives
    N* = 26.7, so N' = 26.7). Later editions of that document refit the constants of ``N*``; this is the
    form we could cite.

    Parameters
    ----------
    rating : float
        Pre-game rating ``R``.
    games : int
        Games the rating is based on, ``N``.
    pivot : float
        Rating at and above which ``N*`` is 50 (2200 on the US Chess scale).

    Returns
    -------
    float
    """
    if rating > pivot:
        n_star = 50.0
    else:
        n_star = 50.0 / math.sqrt(1.0 + (pivot - rating) ** 2 / 100_000.0)
    return min(float(games), n_star)


@dataclass(frozen=True)
class UscfK:
    """US Chess's K factor of the standard formula, ``K = 800 / (N' + m)``.

    ``N'`` is :func:`uscf_effective_games` and ``m`` the number of games in the rated event: one here,
    since every vote is rated on its own. Source: Glickman, *The US Chess Rating System*, section
    "Standard rating formula", http://math.bu.edu/people/mg/ratings/rs/node5.html (its table: N' = 6,
    m = 4 gives K = 80; N' = 20, m = 6 gives 30.77). This is the standard formula's K only: US Chess
    rates a player with 8 or fewer games (or only wins, or only losses) by its special formula instead,
    so this K is never used for a player's first games there;
    :class:`~leaderboard.online.federations.UscfRater` applies both formulas as US Chess does.

    Parameters
    ----------
    games_per_event : int
        ``m``.
    pivot : float
        See :func:`uscf_effective_games`; move it with the rating scale (2200 on US Chess's).
    """

    games_per_event: int = 1
    pivot: float = 2200.0

    def __post_init__(self) -> None:
        if self.games_per_event < 1:
            raise ValueError("an event has at least one game")

    def k(self, rating: float, games: int, peak: float) -> float:  # noqa: ARG002 - no use for the peak
        return 800.0 / (uscf_effective_games(rating, games, pivot=self.pivot) + self.games_per_event)
