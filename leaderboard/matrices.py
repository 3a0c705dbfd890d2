"""Pairwise matrices, per-model totals, performance ratings and the expected-score table."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import optimize

from leaderboard.data import PairCounts, collapse_pairs

__all__ = [
    "battle_count_matrix",
    "expected_score_table",
    "model_totals",
    "observed_win_rates",
    "performance_rating",
    "predicted_win_rates",
]

FloatArray = npt.NDArray[np.float64]


def _frame(values: FloatArray, models: Sequence[str]) -> pd.DataFrame:
    names = pd.Index(list(models), name="model")
    return pd.DataFrame(values, index=names, columns=pd.Index(list(models), name="opponent"))


def battle_count_matrix(counts: PairCounts) -> pd.DataFrame:
    """Battles between each pair (both sides together), symmetric, zero diagonal."""
    st = collapse_pairs(counts)
    m = counts.n_models
    mat = np.zeros((m, m))
    mat[st.lo, st.hi] = st.n
    mat[st.hi, st.lo] = st.n
    return _frame(mat, counts.models)


def observed_win_rates(counts: PairCounts) -> pd.DataFrame:
    """Share of the battles of row model against column model that it won, ties counting half (NaN: none)."""
    st = collapse_pairs(counts)
    m = counts.n_models
    mat = np.full((m, m), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        mat[st.lo, st.hi] = st.score_lo / st.n
        mat[st.hi, st.lo] = (st.wins_hi + 0.5 * st.ties) / st.n
    return _frame(mat, counts.models)


def predicted_win_rates(
    rating: npt.ArrayLike, models: Sequence[str], *, scale: float = 400.0, base: float = 10.0
) -> pd.DataFrame:
    """Expected score of row model against column model: ``1 / (1 + base ** ((Rc - Rr) / scale))``."""
    r = np.asarray(rating, dtype=np.float64)
    diff = (r[None, :] - r[:, None]) / scale * math.log(base)
    mat = 0.5 * (1.0 - np.tanh(0.5 * diff))
    np.fill_diagonal(mat, np.nan)
    return _frame(mat, models)


def model_totals(counts: PairCounts) -> tuple[FloatArray, FloatArray]:
    """Battles of each model and its win rate (ties and both-bad count half); NaN for no battles."""
    st = collapse_pairs(counts)
    m = counts.n_models
    battles = np.bincount(st.lo, weights=st.n, minlength=m) + np.bincount(st.hi, weights=st.n, minlength=m)
    score = np.bincount(st.lo, weights=st.score_lo, minlength=m) + np.bincount(
        st.hi, weights=st.n - st.score_lo, minlength=m
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(battles > 0, score / np.where(battles > 0, battles, 1.0), np.nan)
    return battles.astype(np.float64), rate.astype(np.float64)


def performance_rating(
    opponent_ratings: npt.ArrayLike,
    scores: npt.ArrayLike,
    *,
    method: str = "logistic",
    scale: float = 400.0,
    base: float = 10.0,
) -> float:
    """Performance rating of one player over a set of games.

    Parameters
    ----------
    opponent_ratings : array, shape (G,)
        Rating of the opponent in each game.
    scores : array, shape (G,)
        1 for a win, 0.5 for a tie, 0 for a loss.
    method : ``"400"`` or ``"logistic"``
        ``"400"`` is the "algorithm of 400": ``(sum of opponents + 400 (wins - losses)) / games``
        (``scale`` replaces 400). ``"logistic"`` is the rating ``R`` whose expected total score
        ``sum_g 1 / (1 + base ** ((R_g - R) / scale))`` equals the actual total (the inverse of the
        logistic expected score; infinite for a perfect or zero score).

    Returns
    -------
    float
    """
    opp = np.asarray(opponent_ratings, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    if opp.shape != s.shape or opp.size == 0:
        raise ValueError("need one score per opponent, at least one game")
    if np.any((s < 0) | (s > 1)):
        raise ValueError("scores must be between 0 and 1")
    if method == "400":
        return float((opp.sum() + scale * (2 * s - 1).sum()) / opp.size)
    if method != "logistic":
        raise ValueError("method must be '400' or 'logistic'")
    total = float(s.sum())
    if total <= 0:
        return -math.inf
    if total >= opp.size:
        return math.inf
    k = math.log(base) / scale

    def excess(r: float) -> float:
        return float((0.5 * (1 - np.tanh(0.5 * k * (opp - r)))).sum()) - total

    lo, hi = float(opp.min()) - scale, float(opp.max()) + scale
    while excess(lo) > 0:
        lo -= scale
    while excess(hi) < 0:
        hi += scale
    return float(optimize.brentq(excess, lo, hi, xtol=1e-10))


def expected_score_table(
    differences: npt.ArrayLike | None = None, *, scale: float = 400.0, base: float = 10.0
) -> pd.DataFrame:
    """Expected score of the higher- and lower-rated side for each rating difference."""
    d = np.arange(0, 801, 50, dtype=np.float64) if differences is None else np.asarray(differences, float)
    high = 1.0 / (1.0 + base ** (-d / scale))
    return pd.DataFrame({"difference": d, "expected_higher": high, "expected_lower": 1.0 - high})
