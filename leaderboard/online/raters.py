"""The family of online raters: one base class, the shared replay loop and rolling forecasts.

An online rater keeps an immutable state per model and changes two states per vote in O(1). Elo
(:mod:`leaderboard.online.elo`), Glicko-2 (:mod:`leaderboard.online.glicko2`) and TrueSkill
(:mod:`leaderboard.online.trueskill`) implement :class:`OnlineRater`; everything that runs a stream of votes
through a rater (:meth:`OnlineRater.replay`, :func:`rolling_forecasts`) goes through the one loop
here, so a replay is by construction the same arithmetic as calling the steps one by one.

Forecasts are three-outcome probabilities in the column order ``[left wins, tie, right wins]``, the
order :func:`leaderboard.evaluation.held_out.score_forecasts` reads.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Generic, Literal, TypeVar, get_args

import numpy as np
import numpy.typing as npt

__all__ = [
    "TIE_MODES",
    "OnlineRater",
    "TieMode",
    "check_votes",
    "davidson_probabilities",
    "rolling_forecasts",
    "score_of",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: How a rater treats a tie (and a both-bad vote):
#: ``ignore`` as if the vote had not happened; ``half`` half a win for each side in a two-outcome model;
#: ``davidson`` through the rater's explicit three-outcome model with a tie parameter.
TieMode = Literal["ignore", "half", "davidson"]
TIE_MODES: tuple[str, ...] = get_args(TieMode)

#: Score of the left model for each outcome code (MODEL_A, MODEL_B, TIE, BOTHBAD).
_SCORE_A = (1.0, 0.0, 0.5, 0.5)

S = TypeVar("S")


def score_of(outcome: int) -> float:
    """Score of the left model for an outcome code: 1 for a left win, 0 for a right win, 0.5 for a tie.

    Raises
    ------
    ValueError
        On a code outside 0-3.
    """
    if not 0 <= outcome <= 3:
        raise ValueError(f"unknown outcome code {outcome}")
    return _SCORE_A[outcome]


def davidson_probabilities(d: float, nu: float) -> tuple[float, float, float]:
    """Davidson (1970) probabilities of (left wins, tie, right wins) for a strength difference ``d``.

    With ``pi_a / pi_b = exp(d)``: ``P(left) = pi_a / Z``, ``P(tie) = nu sqrt(pi_a pi_b) / Z``,
    ``P(right) = pi_b / Z`` with ``Z = pi_a + pi_b + nu sqrt(pi_a pi_b)``. Dividing by
    ``sqrt(pi_a pi_b)`` leaves ``exp(d/2)``, ``nu`` and ``exp(-d/2)``; the larger exponent is factored
    out so that no term overflows. ``nu = 0`` is the logistic (Bradley-Terry) model without ties.

    Parameters
    ----------
    d : float
        Natural-log strength difference, left minus right.
    nu : float
        Tie propensity, ``nu >= 0``.

    Returns
    -------
    (p_left, p_tie, p_right)
    """
    h = 0.5 * abs(d)
    small = math.exp(-2.0 * h)  # the weaker side's term over the stronger side's
    middle = nu * math.exp(-h)
    z = 1.0 + small + middle
    strong, weak = 1.0 / z, small / z
    tie = middle / z
    return (strong, tie, weak) if d >= 0 else (weak, tie, strong)


class OnlineRater(ABC, Generic[S]):
    """An online rating system: an initial state, a forecast and an O(1) update per vote.

    Subclasses are frozen dataclasses with a ``ties`` field (a :data:`TieMode`). A rater whose states
    depend on the clock (Glicko-2's rating periods) overrides :meth:`advance`; the others ignore time.
    """

    ties: TieMode

    @abstractmethod
    def initial(self) -> S:
        """The state of a model before its first vote."""

    def advance(self, state: S, time: float) -> S:  # noqa: ARG002 - a clockless rater ignores time
        """The same model's state as seen at ``time`` (no earlier than the state's own time).

        Clockless raters return ``state`` itself.
        """
        return state

    @abstractmethod
    def expected(self, a: S, b: S) -> tuple[float, float, float]:
        """Forecast of a vote between left model ``a`` and right model ``b``: (left, tie, right)."""

    @abstractmethod
    def shown(self, state: S) -> tuple[float, float | None]:
        """The rating and deviation a board shows for a state (``None``: the rater has no deviation)."""

    @abstractmethod
    def _step(self, a: S, b: S, outcome: int) -> tuple[S, S]:
        """The update for a vote the tie mode does not skip (``outcome`` already checked)."""

    def update(self, a: S, b: S, outcome: int) -> tuple[S, S]:
        """New states of the left and right model after one vote, both taken at the vote's time.

        Parameters
        ----------
        a, b : state
            States of the left and right model (from :meth:`advance` when the rater has a clock).
        outcome : int
            :class:`~leaderboard.data.Outcome` code: 0 left wins, 1 right wins, 2 tie, 3 both bad.

        Returns
        -------
        (new_a, new_b)
            ``(a, b)`` unchanged for a tie when ``ties == "ignore"``.
        """
        code = int(outcome)
        score_of(code)
        if code >= 2 and self.ties == "ignore":
            return a, b
        return self._step(a, b, code)

    def replay(
        self,
        model_a: npt.ArrayLike,
        model_b: npt.ArrayLike,
        outcome: npt.ArrayLike,
        *,
        n_models: int,
        times: npt.ArrayLike | None = None,
        start: Sequence[S] | None = None,
    ) -> list[S]:
        """Run a stream of votes, in order, through :meth:`advance` and :meth:`update`.

        Parameters
        ----------
        model_a, model_b : int arrays, shape (n,)
            Positions of the left and right model of each vote, in ``range(n_models)``.
        outcome : int array, shape (n,)
            Outcome codes 0-3.
        n_models : int
        times : float array, shape (n,), optional
            Non-decreasing vote times for raters with a clock; default: the vote's position 0, 1, ...
        start : sequence of states, optional
            States to continue from (one per model); default: :meth:`initial` for everyone.

        Returns
        -------
        list of states, one per model; ``start`` is not modified.
        """
        states, _ = _run(self, model_a, model_b, outcome, n_models, times, start, forecast=False)
        return states


def rolling_forecasts(
    rater: OnlineRater[S],
    model_a: npt.ArrayLike,
    model_b: npt.ArrayLike,
    outcome: npt.ArrayLike,
    *,
    n_models: int,
    times: npt.ArrayLike | None = None,
    start: Sequence[S] | None = None,
) -> FloatArray:
    """Forecast each vote from the votes before it, then learn from it.

    Row ``t`` is ``rater.expected`` on the states after votes ``0 .. t-1`` (advanced to vote ``t``'s
    time), so it never sees the vote it forecasts. Arguments as in :meth:`OnlineRater.replay`.

    Returns
    -------
    float array, shape (n, 3)
        Columns ``[left wins, tie, right wins]``; each row sums to 1.
    """
    _, proba = _run(rater, model_a, model_b, outcome, n_models, times, start, forecast=True)
    return proba


def check_votes(
    model_a: npt.ArrayLike, model_b: npt.ArrayLike, outcome: npt.ArrayLike, *, n_models: int
) -> tuple[IntArray, IntArray, IntArray]:
    """A vote stream as three int64 arrays, checked: same length, positions in range, codes 0-3.

    Raises
    ------
    ValueError
        On arrays of different lengths or shapes, an out-of-range position or an unknown outcome code.
    """
    ia = np.asarray(model_a, dtype=np.int64)
    ib = np.asarray(model_b, dtype=np.int64)
    codes = np.asarray(outcome, dtype=np.int64)
    if not (ia.shape == ib.shape == codes.shape) or ia.ndim != 1:
        raise ValueError("model_a, model_b and outcome must be 1-d and have the same length")
    if ia.size:
        if min(ia.min(), ib.min()) < 0 or max(ia.max(), ib.max()) >= n_models:
            raise ValueError("model position out of range")
        if codes.min() < 0 or codes.max() > 3:
            raise ValueError(f"unknown outcome code {int(codes[(codes < 0) | (codes > 3)][0])}")
    return ia, ib, codes


def _run(
    rater: OnlineRater[S],
    model_a: npt.ArrayLike,
    model_b: npt.ArrayLike,
    outcome: npt.ArrayLike,
    n_models: int,
    times: npt.ArrayLike | None,
    start: Sequence[S] | None,
    *,
    forecast: bool,
) -> tuple[list[S], FloatArray]:
    """The one loop over a vote stream: advance both states, forecast if asked, update."""
    ia, ib, codes = check_votes(model_a, model_b, outcome, n_models=n_models)
    n = ia.shape[0]
    if n and np.any(ia == ib):
        raise ValueError("a model cannot meet itself")
    clock = np.arange(n, dtype=np.float64) if times is None else np.asarray(times, dtype=np.float64)
    if clock.shape != (n,):
        raise ValueError("times must have one entry per vote")
    if n > 1 and np.any(np.diff(clock) < 0):
        raise ValueError("times must be non-decreasing")
    if start is None:
        states = [rater.initial() for _ in range(n_models)]
    else:
        if len(start) != n_models:
            raise ValueError("start must hold one state per model")
        states = list(start)
    proba = np.empty((n, 3), dtype=np.float64)
    skip_ties = rater.ties == "ignore"
    for t, (i, j, code, when) in enumerate(
        zip(ia.tolist(), ib.tolist(), codes.tolist(), clock.tolist(), strict=True)
    ):
        a = rater.advance(states[i], when)
        b = rater.advance(states[j], when)
        if forecast:
            proba[t] = rater.expected(a, b)
        if code >= 2 and skip_ties:
            continue
        states[i], states[j] = rater.update(a, b, code)
    return states, proba
