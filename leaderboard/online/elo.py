"""Online Elo: the live standings' update and replay, and the Elo member of the online raters.

The web app calls :func:`update_elo` inside the vote's transaction; :func:`replay_elo` runs the very
same arithmetic over a stream of votes, so the stored live ratings can be checked against a replay.
A tie (and a both-bad vote) scores 0.5 for each side. The Elo-Davidson variant replaces the logistic
expected score by the Davidson (1970) one with a tie propensity ``nu``.

:class:`EloRater` is the same update as an :class:`~leaderboard.online.raters.OnlineRater`, with what the
chess federations add: K schedules (:mod:`leaderboard.online.elo_schedules`), FIDE's cap on the rating
difference, a choice of tie handling and three-outcome forecasts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from leaderboard.data import Outcome, parse_outcome
from leaderboard.online.elo_schedules import KSchedule
from leaderboard.online.raters import TIE_MODES, OnlineRater, TieMode, check_votes, davidson_probabilities

__all__ = [
    "EloConfig",
    "EloRater",
    "EloState",
    "EloStandings",
    "expected_score",
    "replay_elo",
    "replay_elo_indices",
    "update_elo",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Score of the left model for each outcome code (both-bad is a tie).
_SCORE_A = (1.0, 0.0, 0.5, 0.5)


@dataclass(frozen=True)
class EloConfig:
    """Parameters of the online Elo.

    Attributes
    ----------
    k : float
        K factor once a model is past its provisional games (4 as on public arena live boards).
    scale, base, initial : float
        Rating scale: a difference of ``scale`` means odds of ``base`` to 1; new models start at
        ``initial``.
    provisional : tuple of (games, k) pairs
        A larger K while a model has played fewer than ``games`` games, tried in order; for example
        ``((30, 40.0), (100, 20.0))`` is FIDE-like 40/20 and then ``k``. Empty: always ``k``.
    davidson_nu : float or None
        Tie propensity of Elo-Davidson; ``None`` (or 0) is plain logistic Elo.
    """

    k: float = 4.0
    scale: float = 400.0
    base: float = 10.0
    initial: float = 1000.0
    provisional: tuple[tuple[int, float], ...] = field(default_factory=tuple)
    davidson_nu: float | None = None

    def __post_init__(self) -> None:
        if self.k < 0 or self.scale <= 0 or self.base <= 1:
            raise ValueError("need k >= 0, scale > 0 and base > 1")
        if self.davidson_nu is not None and self.davidson_nu < 0:
            raise ValueError("davidson_nu must be non-negative")
        for games, k in self.provisional:
            if games < 0 or k < 0:
                raise ValueError("provisional entries must be (games >= 0, k >= 0)")

    def k_for(self, games: int) -> float:
        """K factor for a model that has played ``games`` games so far."""
        for limit, k in self.provisional:
            if games < limit:
                return k
        return self.k


def expected_score(ra: float, rb: float, *, scale: float = 400.0, base: float = 10.0) -> float:
    """Expected score of A against B: ``1 / (1 + base ** ((rb - ra) / scale))``.

    Written with ``exp``/``log1p``-safe branches so huge differences do not overflow.
    """
    x = (rb - ra) / scale * math.log(base)
    if x > 0:
        z = math.exp(-x)
        return z / (1.0 + z)
    return 1.0 / (1.0 + math.exp(x))


def _davidson_expected(ra: float, rb: float, scale: float, base: float, nu: float) -> float:
    """Elo-Davidson expected score: ``(pi_a + nu/2 sqrt(pi_a pi_b)) / (pi_a + pi_b + nu sqrt(pi_a pi_b))``.

    Divided through by ``sqrt(pi_a pi_b)`` it depends only on ``h = (ra - rb) ln(base) / (2 scale)``.
    """
    h = (ra - rb) / scale * math.log(base) / 2.0
    if h >= 0:
        e = math.exp(-2 * h)  # pi_b / pi_a in a safe form
        m = math.exp(-h)
        return (1.0 + 0.5 * nu * m) / (1.0 + e + nu * m)
    e = math.exp(2 * h)
    m = math.exp(h)
    return (e + 0.5 * nu * m) / (1.0 + e + nu * m)


def _expected_for(ra: float, rb: float, config: EloConfig) -> float:
    """Expected score of A under ``config``: Elo-Davidson when it has a tie propensity, else logistic."""
    nu = config.davidson_nu
    if nu:
        return _davidson_expected(ra, rb, config.scale, config.base, nu)
    return expected_score(ra, rb, scale=config.scale, base=config.base)


def update_elo(
    rating_a: float,
    rating_b: float,
    outcome: Outcome | int,
    *,
    config: EloConfig = EloConfig(),  # noqa: B008 - frozen, so a shared default is safe
    games_a: int = 0,
    games_b: int = 0,
) -> tuple[float, float]:
    """One Elo update: ``R += K (S - E)`` for each side, O(1).

    Parameters
    ----------
    rating_a, rating_b : float
        Ratings of the left and right model before the vote.
    outcome : Outcome or int
        ``MODEL_A`` scores 1 for A, ``MODEL_B`` 0, ``TIE`` and ``BOTHBAD`` 0.5.
    config : EloConfig
    games_a, games_b : int
        Games played before this one (for the provisional K schedule).

    Returns
    -------
    (new_rating_a, new_rating_b)
        Zero-sum whenever both sides use the same K.
    """
    code = int(outcome)
    if not 0 <= code <= 3:
        raise ValueError(f"unknown outcome code {code}")
    s = _SCORE_A[code]
    delta = s - _expected_for(rating_a, rating_b, config)
    return rating_a + config.k_for(games_a) * delta, rating_b - config.k_for(games_b) * delta


@dataclass(frozen=True)
class EloStandings:
    """Standings after a replay: arrays aligned with ``models``."""

    models: tuple[str, ...]
    rating: FloatArray
    games: IntArray

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.models, self.rating.tolist(), strict=True))


def replay_elo(
    model_a: Sequence[str] | npt.ArrayLike,
    model_b: Sequence[str] | npt.ArrayLike,
    outcome: Sequence[Outcome | int | str] | npt.ArrayLike,
    *,
    config: EloConfig = EloConfig(),  # noqa: B008 - frozen
    models: Sequence[str] | None = None,
) -> EloStandings:
    """Replay a stream of votes, in order, through :func:`update_elo`.

    Parameters
    ----------
    model_a, model_b : sequences of model names
        Left and right model of each vote, in commit order.
    outcome : sequence of Outcome codes or Chatbot Arena winner strings
    config : EloConfig
    models : sequence of str, optional
        Models to report (all start at ``config.initial``); default: sorted names seen.

    Returns
    -------
    EloStandings
    """

    a = list(np.asarray(model_a, dtype=object).tolist())
    b = list(np.asarray(model_b, dtype=object).tolist())
    raw = list(np.asarray(outcome, dtype=object).tolist())
    if not (len(a) == len(b) == len(raw)):
        raise ValueError("model_a, model_b and outcome must have the same length")
    codes = [int(parse_outcome(x)) if isinstance(x, str) else int(x) for x in raw]
    names = tuple(sorted(set(a) | set(b))) if models is None else tuple(models)
    index = {name: i for i, name in enumerate(names)}
    try:
        ia = [index[x] for x in a]
        ib = [index[x] for x in b]
    except KeyError as exc:
        raise ValueError(f"model {exc.args[0]!r} is not in the given model list") from None
    return replay_elo_indices(
        np.asarray(ia, dtype=np.int64), np.asarray(ib, dtype=np.int64), codes, models=names, config=config
    )


def replay_elo_indices(
    model_a: npt.ArrayLike,
    model_b: npt.ArrayLike,
    outcome: npt.ArrayLike,
    *,
    models: Sequence[str],
    config: EloConfig = EloConfig(),  # noqa: B008 - frozen
    start: EloStandings | None = None,
    weight: npt.ArrayLike | None = None,
) -> EloStandings:
    """Replay votes given as integer arrays, optionally continuing from earlier standings.

    The same arithmetic as :func:`update_elo`, in the same order (so bit-identical), inlined into one
    loop over Python floats: a stream can be replayed chunk by chunk in bounded memory, each chunk
    starting from the standings the previous one returned.

    Parameters
    ----------
    model_a, model_b : array of int
        Positions in ``models`` of the left and right model of each vote, in commit order.
    outcome : array of int
        Outcome codes (0-3, see :class:`leaderboard.data.Outcome`).
    models : sequence of str
        The models the positions index.
    config : EloConfig
    start : EloStandings, optional
        Standings to continue from (same ``models``); default: everyone at ``config.initial``, no games.
    weight : array of float, optional
        Per-vote weights: a vote of weight ``w`` moves both ratings by ``w K (S - E)`` (a weight-2 vote
        moves them twice as far as one vote, not as far as two votes in a row). It still counts as one
        game. Default: every vote weighs 1 (the same floats as without weights).

    Returns
    -------
    EloStandings
        New arrays; ``start`` is not modified.

    Raises
    ------
    ValueError
        On arrays of different lengths, an out-of-range position or an unknown outcome code.
    """
    names = tuple(models)
    ia_arr, ib_arr, code_arr = check_votes(model_a, model_b, outcome, n_models=len(names))
    if start is None:
        rating = [config.initial] * len(names)
        games = [0] * len(names)
    else:
        if start.models != names:
            raise ValueError("start standings are for other models")
        rating = start.rating.tolist()
        games = start.games.tolist()
    if weight is None:
        weights = [1.0] * len(ia_arr)
    else:
        w = np.asarray(weight, dtype=np.float64)
        if w.shape != ia_arr.shape or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError("weight must hold one positive finite number per vote")
        weights = w.tolist()
    _replay_lists(ia_arr.tolist(), ib_arr.tolist(), code_arr.tolist(), weights, rating, games, config)
    return EloStandings(
        models=names, rating=np.asarray(rating, dtype=np.float64), games=np.asarray(games, dtype=np.int64)
    )


def _replay_lists(
    ia: list[int],
    ib: list[int],
    codes: list[int],
    weights: list[float],
    rating: list[float],
    games: list[int],
    config: EloConfig,
) -> None:
    """The replay loop, updating ``rating`` and ``games`` in place (they are the caller's own copies).

    Mirrors :func:`update_elo` and :func:`expected_score` operation by operation: same expressions, same
    order, so every float is bit-identical; only the function calls are gone (a weight of 1 multiplies
    the score difference exactly).
    """
    exp = math.exp
    scale, base, nu = config.scale, config.base, config.davidson_nu
    ln_base = math.log(base)
    score = _SCORE_A
    fixed_k = not config.provisional
    k = config.k
    k_for = config.k_for
    for i, j, code, w in zip(ia, ib, codes, weights, strict=True):
        ra = rating[i]
        rb = rating[j]
        if nu:
            e = _davidson_expected(ra, rb, scale, base, nu)
        else:
            x = (rb - ra) / scale * ln_base
            if x > 0:
                z = exp(-x)
                e = z / (1.0 + z)
            else:
                e = 1.0 / (1.0 + exp(x))
        delta = (score[code] - e) * w
        if fixed_k:
            rating[i] = ra + k * delta
            rating[j] = rb - k * delta
        else:
            rating[i] = ra + k_for(games[i]) * delta
            rating[j] = rb - k_for(games[j]) * delta
        games[i] += 1
        games[j] += 1


@dataclass(frozen=True)
class EloState:
    """One model's Elo state: rating, games played and the highest rating it has had (for FIDE's K).

    ``peak`` may lag the rating (the default knows no history): schedules see ``max(peak, rating)``.
    """

    rating: float
    games: int = 0
    peak: float = -math.inf


@dataclass(frozen=True)
class EloRater(OnlineRater[EloState]):
    """Online Elo as an :class:`~leaderboard.online.raters.OnlineRater`: ``R += K (S - E)`` for each side.

    With the defaults it is :func:`update_elo` under ``config`` (the same floats, vote for vote).

    Parameters
    ----------
    config : EloConfig
        Scale, base, initial rating, K (with its provisional steps) and the Elo-Davidson ``nu``.
    ties : {"half", "ignore", "davidson"}
        ``half``: a tie scores 0.5 against the logistic expectation; ``ignore``: ties change nothing;
        ``davidson``: Elo-Davidson, a tie scores 0.5 against the Davidson expectation (needs
        ``config.davidson_nu > 0``; the other modes need it unset).
    schedule : KSchedule, optional
        K from rating, games and peak (:class:`~leaderboard.online.elo_schedules.FideK`, ``UscfK``,
        ``FixedK``) in place of ``config.k`` and ``config.provisional`` (which must then be empty).
    max_difference : float, optional
        A rating difference counts at most this much in the expectation (FIDE: 400 points). FIDE
        itself reads the expectation from its own table (built on the normal curve); this rater
        keeps the logistic curve of the rest of Arena.
    left_advantage : float
        Rating points added to the left model in the expectation; 0 is position off.
    tie_nu : float
        Davidson tie propensity of the forecasts when the updates are not Davidson's (``half``,
        ``ignore``); 0 forecasts no ties. In ``davidson`` mode the forecasts use ``config.davidson_nu``.
    """

    config: EloConfig = field(default_factory=EloConfig)
    ties: TieMode = "half"
    schedule: KSchedule | None = None
    max_difference: float | None = None
    left_advantage: float = 0.0
    tie_nu: float = 0.0

    def __post_init__(self) -> None:
        if self.ties not in TIE_MODES:
            raise ValueError(f"unknown tie mode {self.ties!r}")
        nu = self.config.davidson_nu
        if self.ties == "davidson" and not nu:
            raise ValueError("ties='davidson' needs config.davidson_nu > 0")
        if self.ties != "davidson" and nu:
            raise ValueError(f"ties={self.ties!r} updates without Davidson: leave config.davidson_nu unset")
        if self.schedule is not None and self.config.provisional:
            raise ValueError("give either a schedule or config.provisional, not both")
        if self.max_difference is not None and self.max_difference <= 0:
            raise ValueError("max_difference must be positive")
        if self.tie_nu < 0 or (self.tie_nu and self.ties == "davidson"):
            raise ValueError("tie_nu must be >= 0 and is for the half and ignore modes only")

    def initial(self) -> EloState:
        return EloState(rating=self.config.initial, games=0, peak=self.config.initial)

    def _difference(self, ra: float, rb: float) -> float:
        d = ra - rb + self.left_advantage
        cap = self.max_difference
        return d if cap is None else min(max(d, -cap), cap)

    def expected_score(self, ra: float, rb: float) -> float:
        """Expected score of the left model, the ``E`` of the update."""
        if self.max_difference is None and not self.left_advantage:
            return _expected_for(ra, rb, self.config)
        return _expected_for(self._difference(ra, rb), 0.0, self.config)

    def expected(self, a: EloState, b: EloState) -> tuple[float, float, float]:
        cfg = self.config
        nu = cfg.davidson_nu if self.ties == "davidson" else self.tie_nu
        d = self._difference(a.rating, b.rating) / cfg.scale * math.log(cfg.base)
        return davidson_probabilities(d, nu or 0.0)

    def shown(self, state: EloState) -> tuple[float, float | None]:
        """The rating; Elo has no deviation."""
        return float(state.rating), None

    def k_of(self, state: EloState) -> float:
        """K factor of the model's next game."""
        if self.schedule is None:
            return self.config.k_for(state.games)
        return self.schedule.k(state.rating, state.games, max(state.peak, state.rating))

    def _step(self, a: EloState, b: EloState, outcome: int) -> tuple[EloState, EloState]:
        delta = _SCORE_A[outcome] - self.expected_score(a.rating, b.rating)
        ra = a.rating + self.k_of(a) * delta
        rb = b.rating - self.k_of(b) * delta
        return (
            EloState(rating=ra, games=a.games + 1, peak=max(a.peak, ra)),
            EloState(rating=rb, games=b.games + 1, peak=max(b.peak, rb)),
        )
