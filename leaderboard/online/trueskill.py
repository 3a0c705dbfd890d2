"""TrueSkill for two-player games with draws, written from Herbrich, Minka and Graepel (NIPS 2006).

Each model's skill is a Gaussian ``N(mu, sigma^2)``; a game draws performances ``p ~ N(skill, beta^2)``
and the left model wins when ``p_a - p_b > eps``, loses when ``< -eps``, and draws in between. The draw
margin ``eps`` follows from the draw probability of two equal players: ``eps = Phi^-1((p_draw + 1) / 2)
sqrt(2) beta``. Before every game each skill widens by the dynamics ``tau^2``. For two players the
factor graph is a tree and message passing ends in one closed-form step:

* ``c^2 = 2 beta^2 + sigma_a^2 + sigma_b^2``, ``t = (mu_winner - mu_loser) / c``, ``e = eps / c``;
* ``mu_winner += sigma_winner^2 / c * v(t, e)``, ``mu_loser -= sigma_loser^2 / c * v(t, e)``;
* ``sigma^2 *= 1 - sigma^2 / c^2 * w(t, e)`` for both;

with ``v, w`` the mean and variance corrections of a Gaussian truncated to ``(e, inf)`` for a win and to
``(-e, e)`` for a draw (there ``t`` is left minus right). They are computed here through
``log Phi`` so that long-shot results neither divide by zero nor lose all their digits.

Why our own code rather than the ``trueskill`` package: that package has had no release for years
(0.4.5; its source no longer compiles without warnings on current Python, an error under this
project's warnings-as-errors tests), and the two-player case is a dozen lines of published formulas.
The package is kept as a test oracle only (dev extra): the tests compare the two on random games.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from leaderboard.online.raters import OnlineRater, TieMode

__all__ = ["TrueSkillRater", "TrueSkillState", "draw_margin"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True)
class TrueSkillState:
    """One model's skill belief ``N(mu, sigma^2)``."""

    mu: float
    sigma: float


def draw_margin(draw_probability: float, beta: float) -> float:
    """The margin ``eps`` at which two equal players draw with ``draw_probability`` (two players)."""
    if not 0.0 <= draw_probability < 1.0:
        raise ValueError("draw_probability must be in [0, 1)")
    from scipy.special import ndtri

    return float(ndtri((draw_probability + 1.0) / 2.0)) * math.sqrt(2.0) * beta


#: scipy's ``log_ndtr``, looked up on the first rating (see :func:`_log_cdf`).
_LOG_NDTR: Callable[[float], Any] | None = None


def _log_cdf(x: float) -> float:
    """``log Phi(x)``, accurate far into the tails. scipy is imported on the first rating, not when the
    module is (every command that can replay live ratings imports this one), and kept: an import
    statement per call would cost a replay more than the function itself."""
    global _LOG_NDTR
    if _LOG_NDTR is None:
        from scipy.special import log_ndtr

        _LOG_NDTR = log_ndtr
    return float(_LOG_NDTR(x))


def _log_pdf(x: float) -> float:
    return -0.5 * x * x - _LOG_SQRT_2PI


def _win_corrections(t: float, e: float) -> tuple[float, float]:
    """``v = N(t - e) / Phi(t - e)`` and ``w = v (v + t - e)``."""
    x = t - e
    v = math.exp(_log_pdf(x) - _log_cdf(x))
    return v, v * (v + x)


def _draw_corrections(t: float, e: float) -> tuple[float, float]:
    """Corrections for a draw: the Gaussian ``N(t, 1)`` truncated to ``(-e, e)``, seen from ``t``.

    ``v = (N(-e - t) - N(e - t)) / D`` and ``w = v^2 + ((e - t) N(e - t) + (e + t) N(e + t)) / D`` with
    ``D = Phi(e - t) - Phi(-e - t)``; computed for ``|t|`` (``v`` is odd in ``t``, ``w`` even) with
    ``log D = log Phi(a) + log(1 - Phi(b) / Phi(a))``.
    """
    u = abs(t)
    a, b = e - u, -e - u
    log_phi_a = _log_cdf(a)
    log_den = log_phi_a + math.log(-math.expm1(_log_cdf(b) - log_phi_a))
    pdf_a = math.exp(_log_pdf(a) - log_den)
    pdf_b = math.exp(_log_pdf(b) - log_den)
    v = pdf_b - pdf_a
    w = v * v + a * pdf_a - b * pdf_b
    return (-v if t < 0 else v), w


@dataclass(frozen=True)
class TrueSkillRater(OnlineRater[TrueSkillState]):
    """Two-player TrueSkill with draws as an online rater.

    Parameters
    ----------
    ties : {"davidson", "ignore"}
        ``davidson`` rates a tie as a draw through the draw margin, TrueSkill's own three-outcome model
        (a Gaussian counterpart of Davidson's); ``ignore`` skips ties. ``half`` has no meaning in a model
        of performances and is refused.
    mu, sigma : float
        A new model's belief (25 and 25/3 in the paper).
    beta : float
        Performance noise: a skill gap of ``beta`` wins about 76% of the time (25/6).
    tau : float
        Dynamics: standard deviation added to every skill before each of its games (25/300).
    draw_probability : float
        Draw probability of two equal models; sets the draw margin (0.10). Must be positive in
        ``davidson`` mode.
    left_advantage : float
        Skill points added to the left model's performance; 0 is position off.
    """

    ties: TieMode = "davidson"
    mu: float = 25.0
    sigma: float = 25.0 / 3.0
    beta: float = 25.0 / 6.0
    tau: float = 25.0 / 300.0
    draw_probability: float = 0.10
    left_advantage: float = 0.0

    def __post_init__(self) -> None:
        if self.ties not in ("davidson", "ignore"):
            raise ValueError(
                f"TrueSkill takes ties='davidson' (its draw margin) or 'ignore', not {self.ties!r}"
            )
        if self.sigma <= 0 or self.beta <= 0 or self.tau < 0:
            raise ValueError("sigma and beta must be positive and tau non-negative")
        draw_margin(self.draw_probability, self.beta)
        if self.ties == "davidson" and self.draw_probability <= 0:
            raise ValueError("ties='davidson' needs draw_probability > 0")

    @property
    def margin(self) -> float:
        """The draw margin ``eps``."""
        return draw_margin(self.draw_probability, self.beta)

    def initial(self) -> TrueSkillState:
        return TrueSkillState(self.mu, self.sigma)

    def shown(self, state: TrueSkillState) -> tuple[float, float | None]:
        """The skill's mean and standard deviation."""
        return state.mu, state.sigma

    def _widened(self, state: TrueSkillState) -> float:
        return state.sigma * state.sigma + self.tau * self.tau

    def expected(self, a: TrueSkillState, b: TrueSkillState) -> tuple[float, float, float]:
        """P(left wins), P(draw), P(right wins) of the next game, dynamics included."""
        c = math.sqrt(2.0 * self.beta**2 + self._widened(a) + self._widened(b))
        gap = (a.mu - b.mu + self.left_advantage) / c
        e = self.margin / c
        left = math.exp(_log_cdf(gap - e))
        right = math.exp(_log_cdf(-gap - e))
        return left, max(0.0, 1.0 - left - right), right

    def _step(
        self, a: TrueSkillState, b: TrueSkillState, outcome: int
    ) -> tuple[TrueSkillState, TrueSkillState]:
        var_a, var_b = self._widened(a), self._widened(b)
        c2 = 2.0 * self.beta**2 + var_a + var_b
        c = math.sqrt(c2)
        gap = (a.mu - b.mu + self.left_advantage) / c
        e = self.margin / c
        if outcome == 0:
            v, w = _win_corrections(gap, e)
        elif outcome == 1:
            v, w = _win_corrections(-gap, e)
            v = -v
        else:
            v, w = _draw_corrections(gap, e)
        new_a = TrueSkillState(a.mu + var_a / c * v, math.sqrt(var_a * (1.0 - var_a / c2 * w)))
        new_b = TrueSkillState(b.mu - var_b / c * v, math.sqrt(var_b * (1.0 - var_b / c2 * w)))
        return new_a, new_b
