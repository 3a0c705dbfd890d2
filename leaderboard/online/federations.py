"""The chess federations' own rating rules as online raters: FIDE's and US Chess's, one vote a rated game.

:class:`FideRater` follows the FIDE Rating Regulations (effective 1 July 2014; the rules used here are
unchanged since): the expected score is read from FIDE's table 8.1(b) (a normal curve of rating
differences, tabulated in steps of 0.01), a rating difference of more than 400 points counts as 400, and
the K factor is 40 for a newcomer's first 30 games, 20 while the rating stays under 2400 and 10 once it
has reached 2400 (:class:`~leaderboard.online.elo_schedules.FideK`).

:class:`UscfRater` follows M. E. Glickman, *The US Chess Rating System* (2004,
http://math.bu.edu/people/mg/ratings/rs/): the effective number of games ``N'``
(:func:`~leaderboard.online.elo_schedules.uscf_effective_games`); the *special* formula for a player with 8
or fewer games, or whose games so far were all wins or all losses (:func:`uscf_special_rating`, with the
linear provisional winning expectancy); the *standard* formula otherwise, ``R + K (S - E)`` with
``K = 800 / (N' + m)`` and the logistic expectancy; and the absolute rating floor of 100.

Both rate on the federations' own scale: a new model enters at ``initial_rating`` (1500 by default, Glickman's
rating for a player about whom nothing is known), and the federations' levels (FIDE's 2400, US Chess's
2200 in ``N*``) are kept as they are, so they act on a model as they would on a player that far above a
newcomer. Rating points are the same size as the board's (400 points are odds of 10 to 1), so
differences, the 400-point cap among them, need no conversion. Each vote is its own event of one game
(``m = 1``); rules that belong to tournaments are left out: FIDE's rating periods (and its cap of K times
games at 700 a period), its initial ratings from a newcomer's performance and its K of 40 for juniors;
US Chess's steps 3 to 5 (re-rating an event against the opponents' intermediate ratings), its event
bonus (only for events of three or more games) and its floors tied to a player's peak.

A draw scores half a point in both (``ties="half"``); ``ties="ignore"`` skips ties. Forecasts split the
expected score into three outcomes with a Davidson tie propensity ``tie_nu``
(:func:`~leaderboard.online.raters.davidson_probabilities`). ``left_advantage`` (rating points added to
the left model) is Arena's, not the federations'.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from leaderboard.online.elo_schedules import FideK, UscfK, uscf_effective_games
from leaderboard.online.raters import OnlineRater, TieMode, davidson_probabilities, score_of

__all__ = [
    "FIDE_MAX_DIFFERENCE",
    "ChessState",
    "FideRater",
    "UscfRater",
    "fide_expected_score",
    "uscf_special_rating",
]

#: FIDE table 8.1(b): the largest rating difference (whole points) of each band, whose higher-rated player
#: expects 0.50, 0.51, ... 0.99; above the last band, 1.00.
FIDE_EXPECTANCY_BANDS: tuple[int, ...] = (
    3, 10, 17, 25, 32, 39, 46, 53, 61, 68, 76, 83, 91, 98, 106, 113, 121, 129, 137, 145,
    153, 162, 170, 179, 188, 197, 206, 215, 225, 235, 245, 256, 267, 278, 290, 302, 315, 328, 344, 357,
    374, 391, 411, 432, 456, 484, 517, 559, 619, 735,
)  # fmt: skip
#: FIDE: "a difference in rating of more than 400 points shall be counted ... as though it were 400".
FIDE_MAX_DIFFERENCE = 400.0
#: The rating a new model enters at on the federations' scales (Glickman's for an unknown player).
FEDERATION_INITIAL = 1500.0
#: US Chess's absolute rating floor.
USCF_FLOOR = 100.0
#: US Chess rates a player with at most this many games by the special formula.
USCF_SPECIAL_GAMES = 8
#: The linear provisional winning expectancy of US Chess saturates this far from the opponent.
USCF_PROVISIONAL_SPAN = 400.0
#: Expected scores are kept this far from 0 and 1 when turned into a forecast's log-odds.
_EDGE = 1e-9


def fide_expected_score(difference: float, *, max_difference: float | None = FIDE_MAX_DIFFERENCE) -> float:
    """FIDE's expected score of a player rated ``difference`` points above the opponent (table 8.1(b)).

    The difference is capped at ``max_difference`` (None: no cap) and rounded to whole points, as FIDE's
    published ratings are; a lower-rated player expects one minus the higher-rated one's score.

    Examples
    --------
    >>> fide_expected_score(100.0), fide_expected_score(-420.0)
    (0.64, 0.08)
    >>> fide_expected_score(-420.0, max_difference=None)
    0.07
    """
    d = difference if max_difference is None else min(max(difference, -max_difference), max_difference)
    band = bisect_left(FIDE_EXPECTANCY_BANDS, math.floor(abs(d) + 0.5))
    hundredths = 50 + band if d >= 0 else 50 - band
    return hundredths / 100.0


def _log_odds(expected: float) -> float:
    """The natural-log strength difference whose logistic win probability is ``expected``."""
    p = min(max(expected, _EDGE), 1.0 - _EDGE)
    return math.log(p / (1.0 - p))


@dataclass(frozen=True)
class ChessState:
    """One model's state under a federation's rules: rating, games, highest rating, points scored.

    ``points`` (1 a win, 0.5 a draw) tells US Chess whether every game so far was a win or a loss.
    """

    rating: float
    games: int = 0
    peak: float = -math.inf
    points: float = 0.0

    def after(self, rating: float, score: float) -> ChessState:
        """The state after one more game scoring ``score`` that leaves the rating at ``rating``."""
        return ChessState(rating, self.games + 1, max(self.peak, rating), self.points + score)


def _check_modes(ties: TieMode, tie_nu: float) -> None:
    if ties not in ("half", "ignore"):
        raise ValueError(f"the federations score a draw half a point: ties half or ignore, not {ties!r}")
    if tie_nu < 0:
        raise ValueError("tie_nu must be >= 0")


@dataclass(frozen=True)
class FideRater(OnlineRater[ChessState]):
    """FIDE's rating rules, one vote a game (see the module).

    Parameters
    ----------
    schedule : FideK
        K from games and highest rating (40 / 20 / 10 at 30 games and 2400).
    max_difference : float or None
        The cap on the rating difference (FIDE: 400); None reads the whole table.
    initial_rating : float
        Rating of a new model on FIDE's scale.
    ties : {"half", "ignore"}
    tie_nu : float
        Davidson tie propensity of the forecasts.
    left_advantage : float
        Rating points added to the left model's side of the difference.
    """

    schedule: FideK = field(default_factory=FideK)
    max_difference: float | None = FIDE_MAX_DIFFERENCE
    initial_rating: float = FEDERATION_INITIAL
    ties: TieMode = "half"
    tie_nu: float = 0.0
    left_advantage: float = 0.0

    def __post_init__(self) -> None:
        _check_modes(self.ties, self.tie_nu)
        if self.max_difference is not None and self.max_difference <= 0:
            raise ValueError("max_difference must be positive")

    def initial(self) -> ChessState:
        return ChessState(self.initial_rating, 0, self.initial_rating, 0.0)

    def expected_score(self, a: ChessState, b: ChessState) -> float:
        """Expected score of the left model from FIDE's table."""
        difference = a.rating - b.rating + self.left_advantage
        return fide_expected_score(difference, max_difference=self.max_difference)

    def expected(self, a: ChessState, b: ChessState) -> tuple[float, float, float]:
        return davidson_probabilities(_log_odds(self.expected_score(a, b)), self.tie_nu)

    def shown(self, state: ChessState) -> tuple[float, float | None]:
        return float(state.rating), None

    def k_of(self, state: ChessState) -> float:
        """K of the model's next game."""
        return self.schedule.k(state.rating, state.games, max(state.peak, state.rating))

    def _step(self, a: ChessState, b: ChessState, outcome: int) -> tuple[ChessState, ChessState]:
        s = score_of(outcome)
        delta = s - self.expected_score(a, b)
        return (
            a.after(a.rating + self.k_of(a) * delta, s),
            b.after(b.rating - self.k_of(b) * delta, 1.0 - s),
        )


def _provisional_expectancy(rating: float, opponent: float) -> float:
    """US Chess's provisional winning expectancy: 0 at 400 or more below, 1 at 400 or more above, linear
    between (``1/2 + (R - R_i) / 800``)."""
    x = (rating - opponent) / (2.0 * USCF_PROVISIONAL_SPAN) + 0.5
    return min(max(x, 0.0), 1.0)


def uscf_special_rating(
    prior: float,
    n_effective: float,
    opponents: Sequence[float],
    score: float,
    *,
    all_wins: bool = False,
    all_losses: bool = False,
) -> float:
    """US Chess's special rating formula: the rating at which the expected score equals the score.

    With ``R0'`` and ``S'`` the adjusted prior and score (``R0 - 400`` and ``S + N'`` when every earlier
    game was a win, ``R0 + 400`` and ``S`` when every one was a loss, ``R0`` and ``S + N'/2`` otherwise),
    the rating solves ``N' PWe(R, R0') + sum_i PWe(R, R_i) = S'`` with the provisional expectancy ``PWe``
    (linear within 400 points). Glickman (2004), section "Special rating formula"
    (http://math.bu.edu/people/mg/ratings/rs/node4.html). The left side is non-decreasing in ``R``; when
    a whole range of ratings solves it (a player who beat everyone by the table's measure), the point of
    that range nearest the prior is taken: the prior's purpose in US Chess's first step is "to choose
    among equally plausible ratings".

    Parameters
    ----------
    prior : float
        Pre-event rating ``R0`` (an unrated player's initial rating).
    n_effective : float
        ``N'``, the effective number of earlier games (0 for an unrated player).
    opponents : sequence of float
        The event's opponents' ratings, one per game (``m`` of them).
    score : float
        Points scored in the event, ``S`` (0 to ``m``).
    all_wins, all_losses : bool
        Every earlier game was a win (a loss); both False for a player without earlier games.

    Returns
    -------
    float

    Examples
    --------
    The approximating-formulas example of US Chess: rated 1500 on 6 games, a win, a loss and a draw
    against 1400, 1550 and 1650:

    >>> round(uscf_special_rating(1500.0, 6.0, [1400.0, 1550.0, 1650.0], 1.5), 2)
    1511.11
    """
    m = len(opponents)
    if m == 0 or not 0.0 <= score <= m or n_effective < 0 or (all_wins and all_losses):
        raise ValueError("need a game, 0 <= score <= games, N' >= 0, and not both all wins and all losses")
    if all_wins:
        anchor, target = prior - USCF_PROVISIONAL_SPAN, score + n_effective
    elif all_losses:
        anchor, target = prior + USCF_PROVISIONAL_SPAN, score
    else:
        anchor, target = prior, score + n_effective / 2.0
    weighted = [(float(r), 1.0) for r in opponents]
    if n_effective > 0:
        weighted.append((anchor, n_effective))

    def excess(r: float) -> float:
        return sum(w * _provisional_expectancy(r, o) for o, w in weighted) - target

    # piecewise linear between the points where an expectancy starts or stops moving
    xs = sorted({o + sign * USCF_PROVISIONAL_SPAN for o, _ in weighted for sign in (-1.0, 1.0)})
    # at the ends the excess is -S' and N' + m - S', zero up to rounding when the score is all or nothing
    eps = 1e-12 * (n_effective + m)
    fs = [0.0 if abs(f) <= eps else f for f in map(excess, xs)]
    low, high = -math.inf, math.inf
    if fs[0] < 0:  # below the first point the excess is -S'; otherwise S' = 0 and every low rating solves
        j = next(k for k, f in enumerate(fs) if f >= 0)
        low = xs[j - 1] + (xs[j] - xs[j - 1]) * (0.0 - fs[j - 1]) / (fs[j] - fs[j - 1])
    if fs[-1] > 0:  # above the last point the excess is N' + m - S'
        j = max(k for k, f in enumerate(fs) if f <= 0)
        high = xs[j] + (xs[j + 1] - xs[j]) * (0.0 - fs[j]) / (fs[j + 1] - fs[j])
    return min(max(prior, low), high)


@dataclass(frozen=True)
class UscfRater(OnlineRater[ChessState]):
    """US Chess's rating rules, one vote an event of one game (see the module).

    Parameters
    ----------
    schedule : UscfK
        The standard formula's ``K = 800 / (N' + m)`` (``m`` = 1) and the ``N*`` pivot (2200).
    initial_rating : float
        Rating of a new model on US Chess's scale; a new model has no games (``N = 0``).
    floor : float
        The lowest rating (US Chess: 100).
    ties : {"half", "ignore"}
    tie_nu : float
        Davidson tie propensity of the forecasts.
    left_advantage : float
        Rating points added to the left model's side of the difference.
    """

    schedule: UscfK = field(default_factory=UscfK)
    initial_rating: float = FEDERATION_INITIAL
    floor: float = USCF_FLOOR
    ties: TieMode = "half"
    tie_nu: float = 0.0
    left_advantage: float = 0.0

    def __post_init__(self) -> None:
        _check_modes(self.ties, self.tie_nu)
        if self.schedule.games_per_event != 1:
            raise ValueError("every vote is an event of one game: games_per_event must be 1")

    def initial(self) -> ChessState:
        return ChessState(self.initial_rating, 0, self.initial_rating, 0.0)

    def expected_score(self, a: ChessState, b: ChessState) -> float:
        """US Chess's standard winning expectancy of the left model (the logistic curve, no cap)."""
        d = a.rating - b.rating + self.left_advantage
        return 1.0 / (1.0 + math.pow(10.0, -d / 400.0))

    def expected(self, a: ChessState, b: ChessState) -> tuple[float, float, float]:
        d = (a.rating - b.rating + self.left_advantage) * math.log(10.0) / 400.0
        return davidson_probabilities(d, self.tie_nu)

    def shown(self, state: ChessState) -> tuple[float, float | None]:
        return float(state.rating), None

    def rate(self, state: ChessState, opponent: float, score: float, expected: float) -> float:
        """The model's rating after one game scoring ``score`` against a model rated ``opponent``
        (``expected``: the standard winning expectancy), by the formula its games call for."""
        n, r0 = state.games, state.rating
        n_effective = uscf_effective_games(r0, n, pivot=self.schedule.pivot)
        all_wins = n > 0 and state.points == n
        all_losses = n > 0 and state.points == 0
        if n <= USCF_SPECIAL_GAMES or all_wins or all_losses:
            new = uscf_special_rating(
                r0, n_effective, [opponent], score, all_wins=all_wins, all_losses=all_losses
            )
        else:
            new = r0 + self.schedule.k(r0, n, state.peak) * (score - expected)
        return max(new, self.floor)

    def _step(self, a: ChessState, b: ChessState, outcome: int) -> tuple[ChessState, ChessState]:
        s = score_of(outcome)
        e = self.expected_score(a, b)
        # the position term moves the opponent as the left model sees it (and back for the right one)
        ra = self.rate(a, b.rating - self.left_advantage, s, e)
        rb = self.rate(b, a.rating + self.left_advantage, 1.0 - s, 1.0 - e)
        return a.after(ra, s), b.after(rb, 1.0 - s)
