"""The statistical screens of the annotator review: tails of a vote count with a personal effect, the
favourite-model test, the skip test, two-sided tails and Benjamini-Hochberg.

Each screen asks one question of every annotator at once (arrays over annotators, or annotators by
models), so :func:`leaderboard.quality.annotators.annotator_stats` reads as the list of questions it
asks. The personal effects' population standard deviations come from
:mod:`leaderboard.quality.overdispersion`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import stats

from leaderboard.data import Outcome
from leaderboard.quality.overdispersion import population_sd, random_effect_tails

__all__ = [
    "as_three_way",
    "benjamini_hochberg",
    "favourite_model_test",
    "skip_test",
    "tails_with_effect",
    "two_sided",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def as_three_way(outcome: npt.ArrayLike) -> IntArray:
    """Outcome codes with both-bad counted as a tie (0 left, 1 right, 2 tie); out-of-range codes refused."""
    codes = np.asarray(outcome, dtype=np.int64)
    if codes.size and (codes.min() < 0 or codes.max() > int(Outcome.BOTHBAD)):
        raise ValueError("outcome codes must be between 0 and 3")
    return np.where(codes == Outcome.BOTHBAD, int(Outcome.TIE), codes)


def benjamini_hochberg(pvalues: FloatArray) -> FloatArray:
    """Benjamini-Hochberg q-values of the p-values that are not NaN (NaN: not a hypothesis; stays NaN)."""
    out = np.full(pvalues.shape, np.nan)
    ok = ~np.isnan(pvalues)
    if ok.any():
        out[ok] = stats.false_discovery_control(pvalues[ok], method="bh")
    return out


def two_sided(upper: FloatArray, lower: FloatArray) -> FloatArray:
    """The two-sided p-value of two one-sided tails."""
    return np.minimum(1.0, 2.0 * np.minimum(upper, lower))


def tails_with_effect(
    cell: IntArray,
    n_cells: int,
    u: FloatArray,
    y: FloatArray,
    sd: float | None,
    min_votes: int,
    cap: FloatArray | None = None,
    weight: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    """Tails and excess of each cell's count with a personal effect of the population's spread.

    Parameters
    ----------
    cell : int array, shape (n,)
        The cell (an annotator, or an annotator and a model) of each vote.
    n_cells : int
    u : float array, shape (n,)
        The crowd's logit of each vote's ``y``.
    y : float array, shape (n,)
        What is counted (a win, an agreement, a tie), 0 or 1.
    sd : float or None
        The personal effect's standard deviation (logits); estimated from cells of at least
        ``min_votes`` votes when None (:func:`leaderboard.quality.overdispersion.population_sd`).
    min_votes : int
    cap, weight : float arrays, shape (n,), optional
        Each vote's largest chance of ``y`` (1 when None) and weight in the count (1 when None).

    Returns
    -------
    upper, lower : float arrays, shape (n_cells,), the two one-sided tails of each cell's count
    z : float array, shape (n_cells,), the standardised excess
    sd : float, the standard deviation used
    """
    caps = np.ones(u.size) if cap is None else cap
    if sd is None:
        sd = population_sd(cell, n_cells, u, caps, y, min_votes=min_votes, weight=weight)
    upper, lower, z = random_effect_tails(cell, n_cells, u, caps, y, sd=sd, weight=weight)
    return upper, lower, z, sd


def favourite_model_test(
    group: IntArray,
    n_groups: int,
    ia: IntArray,
    ib: IntArray,
    out: IntArray,
    u: FloatArray,
    decisive_share: FloatArray,
    *,
    n_models: int,
    min_votes: int,
    sd: float | None,
) -> tuple[IntArray, FloatArray, FloatArray, float]:
    """Per annotator, the model whose wins (or losses) need the most unusual personal taste, with p.

    Wins and losses are counted apart, each capped by the annotator's own chance of a decisive vote
    (``decisive_share``, per annotator): a taste changes who wins, not how often this voter calls a tie,
    so a voter who never ties on one model and ties as usual elsewhere is not explained by taste.
    """
    left_won = (out == Outcome.MODEL_A).astype(np.float64)
    right_won = (out == Outcome.MODEL_B).astype(np.float64)
    cell = np.concatenate([group * n_models + ia, group * n_models + ib])
    size = n_groups * n_models
    both_u = np.concatenate([u, -u])
    cap = np.concatenate([decisive_share[group], decisive_share[group]])
    wins, _, z, sd = tails_with_effect(
        cell, size, both_u, np.concatenate([left_won, right_won]), sd, min_votes, cap
    )
    losses, _, _, _ = tails_with_effect(
        cell, size, -both_u, np.concatenate([right_won, left_won]), sd, min_votes, cap
    )
    count = np.bincount(cell, minlength=size).reshape(n_groups, n_models)
    p = np.minimum(1.0, 2.0 * np.minimum(wins, losses)).reshape(n_groups, n_models)
    p = np.where(count >= min_votes, p, np.inf)
    best = np.argmin(p, axis=1)
    tried = (count >= min_votes).sum(axis=1)
    has = tried > 0
    rows = np.arange(n_groups)
    # NaN: not tested, so not counted among the hypotheses Benjamini-Hochberg corrects for.
    pvalue = np.where(has, np.minimum(1.0, p[rows, best] * np.maximum(tried, 1)), np.nan)
    best_z = z.reshape(n_groups, n_models)[rows, best]
    return np.where(has, best, -1).astype(np.int64), np.where(has, best_z, np.nan), pvalue, sd


def skip_test(
    group: IntArray,
    n_groups: int,
    ia: IntArray,
    ib: IntArray,
    skip_group: IntArray,
    skip_a: IntArray,
    skip_b: IntArray,
    n_models: int,
) -> tuple[IntArray, FloatArray]:
    """Fisher's exact test, per annotator and model, of voting on a battle independently of the model."""
    size = n_groups * n_models
    voted_with = np.bincount(
        np.concatenate([group * n_models + ia, group * n_models + ib]), minlength=size
    ).reshape(n_groups, n_models)
    skipped_with = np.bincount(
        np.concatenate([skip_group * n_models + skip_a, skip_group * n_models + skip_b]), minlength=size
    ).reshape(n_groups, n_models)
    n_voted = np.bincount(group, minlength=n_groups)
    n_skipped = np.bincount(skip_group, minlength=n_groups)
    seen = (n_voted + n_skipped)[:, None]
    with_model = voted_with + skipped_with
    drawn = n_voted[:, None]
    upper = stats.hypergeom.sf(voted_with - 1, seen, with_model, drawn)
    lower = stats.hypergeom.cdf(voted_with, seen, with_model, drawn)
    informative = (with_model > 0) & (with_model < seen) & (n_skipped[:, None] > 0) & (drawn > 0)
    p = np.where(informative, two_sided(upper, lower), np.inf)
    best = np.argmin(p, axis=1)
    tried = informative.sum(axis=1)
    rows = np.arange(n_groups)
    pvalue = np.where(tried > 0, np.minimum(1.0, p[rows, best] * np.maximum(tried, 1)), np.nan)
    return np.where(tried > 0, best, -1).astype(np.int64), pvalue
