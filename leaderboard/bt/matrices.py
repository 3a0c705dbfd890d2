"""Pairwise matrices (battles, observed and predicted win rates), per-model totals, performance ratings."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from leaderboard.data import Outcome, PairCounts, collapse_pairs
from leaderboard.result import Leaderboard

__all__ = [
    "PairwiseMatrices",
    "battle_count_matrix",
    "expected_score_table",
    "model_totals",
    "observed_win_rates",
    "pairwise_matrices",
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
    from scipy import optimize  # only here: the snapshot pages import this module to read matrices

    return float(optimize.brentq(excess, lo, hi, xtol=1e-10))


def expected_score_table(
    differences: npt.ArrayLike | None = None, *, scale: float = 400.0, base: float = 10.0
) -> pd.DataFrame:
    """Expected score of the higher- and lower-rated side for each rating difference."""
    d = np.arange(0, 801, 50, dtype=np.float64) if differences is None else np.asarray(differences, float)
    high = 1.0 / (1.0 + base ** (-d / scale))
    return pd.DataFrame({"difference": d, "expected_higher": high, "expected_lower": 1.0 - high})


@dataclass(frozen=True)
class PairwiseMatrices:
    """Per-pair matrices in the order of ``models`` (row model against column model).

    Attributes
    ----------
    models : tuple of str
    n_battles : battles between each pair, both sides together (symmetric)
    observed : share of those battles the row model won, ties counting half; NaN without battles
    predicted : the fitted chance that the row model beats the column model (expected score)
    """

    models: tuple[str, ...]
    n_battles: npt.NDArray[np.float64]
    observed: npt.NDArray[np.float64]
    predicted: npt.NDArray[np.float64]

    def reorder(self, names: Sequence[str]) -> PairwiseMatrices:
        index = {name: i for i, name in enumerate(self.models)}
        idx = np.asarray([index[name] for name in names], dtype=np.int64)
        grid = np.ix_(idx, idx)
        return PairwiseMatrices(
            models=tuple(names),
            n_battles=self.n_battles[grid],
            observed=self.observed[grid],
            predicted=self.predicted[grid],
        )


def pairwise_matrices(counts: PairCounts, leaderboard: Leaderboard) -> PairwiseMatrices:
    """Observed and predicted win rates and battle counts for every pair of the leaderboard's models.

    Parameters
    ----------
    counts : PairCounts
        The aggregated votes the leaderboard was fitted on.
    leaderboard : Leaderboard
        Its ratings give the predicted rates, ``1 / (1 + 10 ** ((R_j - R_i) / 400))``.

    Returns
    -------
    PairwiseMatrices
        In the order of ``leaderboard.models``; models in ``counts`` but not on the board are left out.
    """
    n = len(leaderboard.models)
    index = {name: i for i, name in enumerate(leaderboard.models)}
    remap = np.asarray([index.get(name, -1) for name in counts.models], dtype=np.int64)
    a = remap[counts.model_a] if counts.n_cells else np.zeros(0, dtype=np.int64)
    b = remap[counts.model_b] if counts.n_cells else np.zeros(0, dtype=np.int64)
    keep = (a >= 0) & (b >= 0)
    a, b, outcome, count = a[keep], b[keep], counts.outcome[keep], counts.count[keep]
    # Score of the left model in each cell: 1 win, 0 loss, 1/2 any tie.
    score_a = np.where(outcome == Outcome.MODEL_A, 1.0, np.where(outcome == Outcome.MODEL_B, 0.0, 0.5))
    n_battles = np.zeros((n, n))
    points = np.zeros((n, n))
    np.add.at(n_battles, (a, b), count)
    np.add.at(n_battles, (b, a), count)
    np.add.at(points, (a, b), count * score_a)
    np.add.at(points, (b, a), count * (1.0 - score_a))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed: npt.NDArray[np.float64] = np.where(n_battles > 0, points / n_battles, np.nan)
    rating = np.asarray(leaderboard.rating, dtype=np.float64)
    predicted: npt.NDArray[np.float64] = 1.0 / (1.0 + 10.0 ** ((rating[None, :] - rating[:, None]) / 400.0))
    np.fill_diagonal(predicted, np.nan)
    return PairwiseMatrices(
        models=leaderboard.models, n_battles=n_battles, observed=observed, predicted=predicted
    )
