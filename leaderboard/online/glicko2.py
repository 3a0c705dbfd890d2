"""Glicko-2 as an online rater: rating, deviation and volatility, with rating periods of a set length.

Glicko-2 (M. E. Glickman, "Example of the Glicko-2 system", 2012; the method is from Glickman, 1999,
"Parameter estimation in large dynamic paired comparison experiments", Applied Statistics 48) rates all
the games of a rating period together, each against the opponent's rating at the start of the period.
Here that batch is kept O(1) per vote and lazy: a model's state holds its values at the start of its
current period plus two running sums over the period's games (``sum g^2 I`` and ``sum g (s - E)``).
When the model is next seen in a later period, :meth:`Glicko2Rater.advance` first rates the finished
period (Glickman's steps 3-8, with the Illinois iteration for the volatility) and then widens the
deviation for every period without games (``phi^2 + sigma^2`` each), never past ``max_deviation``.

Ties: ``half`` is Glickman's own rule (a draw scores 0.5); ``ignore`` skips them; ``davidson`` puts
Davidson's three-outcome likelihood in the place of the logistic one, which changes only two terms of
each game: the expected score ``E = P(win) + P(tie) / 2`` and the information
``I = P(win) P(loss) + (P(win) + P(loss)) P(tie) / 4`` (``= E (1 - E)`` when ``nu = 0``), both taken at
the opponent-deviation-shrunk difference ``g(phi_j) (mu - mu_j)``.

Forecasts (:meth:`Glicko2Rater.expected`) use the values at the start of the vote's period, as the
updates do: within a period the games already played are counted but not yet rated. Without vote
times the clock is the vote's position in the stream, so by default every vote is a period of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from leaderboard.online.raters import TIE_MODES, OnlineRater, TieMode, davidson_probabilities, score_of

__all__ = ["GLICKO_SCALE", "Glicko2Rater", "Glicko2State"]

#: Rating points per Glicko-2 unit, ``400 / ln 10`` (Glickman rounds it to 173.7178).
GLICKO_SCALE = 400.0 / math.log(10.0)


@dataclass(frozen=True)
class Glicko2State:
    """One model's Glicko-2 state, on the rating scale (not Glickman's internal ``mu``, ``phi``).

    Attributes
    ----------
    rating, deviation, volatility : float
        Values at the start of ``period``.
    period : int or None
        The rating period these values open; ``None`` until the model's first vote.
    games : int
        Games played in ``period`` so far, not yet rated.
    information : float
        Their ``sum g(phi_j)^2 I_j`` (Glickman's ``1 / v``).
    gradient : float
        Their ``sum g(phi_j) (s_j - E_j)``.
    """

    rating: float
    deviation: float
    volatility: float
    period: int | None = None
    games: int = 0
    information: float = 0.0
    gradient: float = 0.0


def _g(phi: float) -> float:
    """Glickman's ``g(phi) = 1 / sqrt(1 + 3 phi^2 / pi^2)``: a far-off opponent's uncertainty shrinks d."""
    return 1.0 / math.sqrt(1.0 + 3.0 * phi * phi / (math.pi * math.pi))


@dataclass(frozen=True)
class Glicko2Rater(OnlineRater[Glicko2State]):
    """Glicko-2 with rating periods of ``period_length`` time units.

    Parameters
    ----------
    ties : {"half", "ignore", "davidson"}
        See the module docstring; ``davidson`` needs ``nu > 0``.
    initial_rating, initial_deviation, initial_volatility : float
        A new model's values (Glickman: 1500, 350, 0.06).
    tau : float
        System constant bounding the volatility's change (Glickman suggests 0.3 to 1.2).
    period_length : float
        Length of a rating period in the units of the vote times; without times the clock is the
        vote's position in the stream, so the default rates every vote as its own period.
    max_deviation : float or None
        The deviation never grows past this (Glicko's rule that an unrated player's 350 is the most);
        ``None``: no bound.
    nu : float
        Davidson tie propensity: the forecasts' tie probability in every mode, and the updates' model
        in ``davidson`` mode. 0 forecasts no ties.
    left_advantage : float
        Rating points added to the left model; 0 is position off.
    scale : float
        Rating points per Glicko-2 unit.
    tolerance, max_iterations : float, int
        Convergence tolerance of the volatility iteration (Glickman's epsilon) and the most steps it
        may take before :class:`RuntimeError`.
    """

    ties: TieMode = "half"
    initial_rating: float = 1500.0
    initial_deviation: float = 350.0
    initial_volatility: float = 0.06
    tau: float = 0.5
    period_length: float = 1.0
    max_deviation: float | None = 350.0
    nu: float = 0.0
    left_advantage: float = 0.0
    scale: float = GLICKO_SCALE
    tolerance: float = 1e-6
    max_iterations: int = 100

    def __post_init__(self) -> None:
        if self.ties not in TIE_MODES:
            raise ValueError(f"unknown tie mode {self.ties!r}")
        if self.ties == "davidson" and self.nu <= 0:
            raise ValueError("ties='davidson' needs nu > 0")
        if self.nu < 0:
            raise ValueError("nu must be non-negative")
        if min(self.initial_deviation, self.initial_volatility, self.tau, self.period_length) <= 0:
            raise ValueError("deviation, volatility, tau and period_length must be positive")
        if self.scale <= 0 or self.tolerance <= 0 or self.max_iterations < 1:
            raise ValueError("scale, tolerance and max_iterations must be positive")
        if self.max_deviation is not None and self.max_deviation < self.initial_deviation:
            raise ValueError("max_deviation must be at least the initial deviation")

    def initial(self) -> Glicko2State:
        return Glicko2State(self.initial_rating, self.initial_deviation, self.initial_volatility)

    def period_of(self, time: float) -> int:
        """The rating period a time falls in: ``floor(time / period_length)``."""
        return math.floor(time / self.period_length)

    def advance(self, state: Glicko2State, time: float) -> Glicko2State:
        """The state at the start of ``time``'s period: earlier periods rated, idle ones widened."""
        period = self.period_of(time)
        if state.period is None:
            return replace(state, period=period)
        if period < state.period:
            raise ValueError("time runs backwards")
        if period == state.period:
            return state
        settled = self.settle(state)
        idle = period - state.period - 1
        if idle == 0:
            return settled
        phi = settled.deviation / self.scale
        phi = math.sqrt(phi * phi + idle * settled.volatility**2)
        return replace(settled, deviation=self._capped(phi * self.scale), period=period)

    def settle(self, state: Glicko2State) -> Glicko2State:
        """Rate the state's period: its values at the start of the next period (Glickman's steps 3-8).

        A model without games in the period only widens: ``phi' = sqrt(phi^2 + sigma^2)``.
        """
        if state.period is None:
            return state
        phi = state.deviation / self.scale
        sigma = state.volatility
        if state.games == 0:
            wide = math.sqrt(phi * phi + sigma * sigma) * self.scale
            return replace(state, deviation=self._capped(wide), period=state.period + 1)
        v = 1.0 / state.information
        delta = v * state.gradient
        sigma = self._new_volatility(phi, sigma, v, delta)
        phi_star = min(math.sqrt(phi * phi + sigma * sigma), self._cap_units())
        phi_new = 1.0 / math.sqrt(1.0 / (phi_star * phi_star) + state.information)
        mu_step = phi_new * phi_new * state.gradient
        return Glicko2State(
            rating=state.rating + self.scale * mu_step,
            deviation=phi_new * self.scale,
            volatility=sigma,
            period=state.period + 1,
        )

    def shown(self, state: Glicko2State) -> tuple[float, float | None]:
        """Rating and deviation as if the state's open period ended now (:meth:`settle`): a period's
        games are rated when it ends, and a board shown this way moves with every vote."""
        settled = self.settle(state) if state.games else state
        return settled.rating, settled.deviation

    def _cap_units(self) -> float:
        return math.inf if self.max_deviation is None else self.max_deviation / self.scale

    def _capped(self, deviation: float) -> float:
        return deviation if self.max_deviation is None else min(deviation, self.max_deviation)

    def _new_volatility(self, phi: float, sigma: float, v: float, delta: float) -> float:
        """Glickman's step 5: the root of ``f`` by the Illinois variant of regula falsi."""
        a = math.log(sigma * sigma)
        tau2 = self.tau * self.tau
        spread = delta * delta - phi * phi - v

        def f(x: float) -> float:
            ex = math.exp(x)
            return ex * (spread - ex) / (2.0 * (phi * phi + v + ex) ** 2) - (x - a) / tau2

        lo = a
        if spread > 0:
            hi = math.log(spread)
        else:
            k = 1
            while f(a - k * self.tau) < 0:
                k += 1
                if k > self.max_iterations:
                    raise RuntimeError("Glicko-2 volatility: no bracket for the root")
            hi = a - k * self.tau
        f_lo, f_hi = f(lo), f(hi)
        steps = 0
        while abs(hi - lo) > self.tolerance:
            steps += 1
            if steps > self.max_iterations:
                raise RuntimeError(f"Glicko-2 volatility did not converge in {self.max_iterations} steps")
            mid = lo + (lo - hi) * f_lo / (f_hi - f_lo)
            f_mid = f(mid)
            if f_mid * f_hi <= 0:
                lo, f_lo = hi, f_hi
            else:
                f_lo /= 2.0
            hi, f_hi = mid, f_mid
        return math.exp(lo / 2.0)

    def _shrunk_difference(self, a: Glicko2State, b: Glicko2State, phi: float) -> float:
        return _g(phi) * (a.rating - b.rating + self.left_advantage) / self.scale

    def expected(self, a: Glicko2State, b: Glicko2State) -> tuple[float, float, float]:
        """Forecast with both deviations: ``d = g(sqrt(phi_a^2 + phi_b^2)) (mu_a - mu_b)`` (Glicko)."""
        phi = math.hypot(a.deviation, b.deviation) / self.scale
        return davidson_probabilities(self._shrunk_difference(a, b, phi), self.nu)

    def _step(self, a: Glicko2State, b: Glicko2State, outcome: int) -> tuple[Glicko2State, Glicko2State]:
        if a.period is None or a.period != b.period:
            raise ValueError("advance both states to the vote's time before updating")
        s = score_of(outcome)
        nu = self.nu if self.ties == "davidson" else 0.0
        d = self._shrunk_difference(a, b, b.deviation / self.scale)
        new_a = self._add_game(a, _g(b.deviation / self.scale), s, davidson_probabilities(d, nu))
        d = -self._shrunk_difference(a, b, a.deviation / self.scale)
        new_b = self._add_game(b, _g(a.deviation / self.scale), 1.0 - s, davidson_probabilities(d, nu))
        return new_a, new_b

    @staticmethod
    def _add_game(
        state: Glicko2State, g: float, score: float, proba: tuple[float, float, float]
    ) -> Glicko2State:
        win, tie, loss = proba
        expected = win + 0.5 * tie
        information = win * loss + 0.25 * (win + loss) * tie
        return replace(
            state,
            games=state.games + 1,
            information=state.information + g * g * information,
            gradient=state.gradient + g * (score - expected),
        )
