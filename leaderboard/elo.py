"""Online Elo for the live standings: O(1) per vote, replayable bit for bit.

The web app calls :func:`update_elo` inside the vote's transaction; :func:`replay_elo` runs the very
same arithmetic over a stream of votes, so the stored live ratings can be checked against a replay.
A tie (and a both-bad vote) scores 0.5 for each side. The Elo-Davidson variant replaces the logistic
expected score by the Davidson (1970) one with a tie propensity ``nu``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from leaderboard.data import Outcome

__all__ = [
    "EloConfig",
    "EloStandings",
    "expected_score",
    "replay_elo",
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
    nu = config.davidson_nu
    if nu:
        e = _davidson_expected(rating_a, rating_b, config.scale, config.base, nu)
    else:
        e = expected_score(rating_a, rating_b, scale=config.scale, base=config.base)
    delta = s - e
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
    from leaderboard.data import parse_outcome

    a = list(np.asarray(model_a, dtype=object).tolist())
    b = list(np.asarray(model_b, dtype=object).tolist())
    raw = list(np.asarray(outcome, dtype=object).tolist())
    if not (len(a) == len(b) == len(raw)):
        raise ValueError("model_a, model_b and outcome must have the same length")
    codes = [int(parse_outcome(x)) if isinstance(x, str) else int(x) for x in raw]
    names = tuple(sorted(set(a) | set(b))) if models is None else tuple(models)
    index = {name: i for i, name in enumerate(names)}
    rating = [config.initial] * len(names)
    games = [0] * len(names)
    try:
        ia = [index[x] for x in a]
        ib = [index[x] for x in b]
    except KeyError as exc:
        raise ValueError(f"model {exc.args[0]!r} is not in the given model list") from None
    for i, j, code in zip(ia, ib, codes, strict=True):
        rating[i], rating[j] = update_elo(
            rating[i], rating[j], code, config=config, games_a=games[i], games_b=games[j]
        )
        games[i] += 1
        games[j] += 1
    return EloStandings(
        models=names, rating=np.asarray(rating, dtype=np.float64), games=np.asarray(games, dtype=np.int64)
    )
