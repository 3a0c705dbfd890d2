"""Skip asymmetry per model: does an annotator vote only when a certain model is on screen?

Skipped battles are not stored (a battle is written with its vote), so the test reads what a selective
skipper leaves behind in the votes: a voter who skips every battle without model X and votes on those
with it has X in far more of their votes than pairing puts X in front of anyone. For each annotator and
model the count of their votes showing the model is tested (one-sided binomial) against the share of
every *other* annotator's votes that show it, and the p-values of all annotator-model tests are
adjusted together (Benjamini-Hochberg). Pure numpy/scipy: the review in ``votes.review.voters`` feeds it.

What it cannot see: a voter who skips only a little (the excess is then small), and exposure that really
differs between annotators (pairing's design moves with the vote counts, so someone voting in a quiet
week sees a different mix); the leave-one-out share is the expectation, and ``min_votes`` keeps small
samples out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

__all__ = ["PresenceStats", "presence_asymmetry"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PresenceStats:
    """Per annotator (in ``annotators`` order): the model most over-represented in their votes.

    ``model`` is its index (-1 when no test was run), ``share`` the share of the annotator's votes that
    show it, ``expected`` the share of everyone else's votes that do, ``qvalue`` the adjusted p-value
    (1.0 when untested).
    """

    annotators: IntArray
    model: IntArray
    share: FloatArray
    expected: FloatArray
    qvalue: FloatArray


def presence_asymmetry(
    who: IntArray, a: IntArray, b: IntArray, n_models: int, *, min_votes: int = 20
) -> PresenceStats:
    """Test, per annotator and model, votes with the model on screen against the other annotators' rate.

    ``who`` holds each vote's annotator, ``a``/``b`` the two models' indices (0..``n_models``-1).
    Annotators with fewer than ``min_votes`` votes are not tested.
    """
    annotators, g = np.unique(who, return_inverse=True)
    n_groups = len(annotators)
    shown = np.zeros((n_groups, n_models), dtype=np.int64)
    np.add.at(shown, (g, a), 1)
    np.add.at(shown, (g, b), 1)  # a model never meets itself, so each vote counts a model once
    votes = np.bincount(g, minlength=n_groups).astype(np.int64)
    others_votes = votes.sum() - votes
    others_shown = shown.sum(axis=0)[None, :] - shown
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where(others_votes[:, None] > 0, others_shown / others_votes[:, None], np.nan)
        share = shown / np.maximum(votes, 1)[:, None]
    tested = (votes >= min_votes)[:, None] & np.isfinite(expected)
    pvalues = np.full(shown.shape, np.nan)
    k, n, p0 = shown[tested], np.broadcast_to(votes[:, None], shown.shape)[tested], expected[tested]
    pvalues[tested] = stats.binom.sf(k - 1, n, p0)  # P(at least k of n show the model)
    qvalues = np.ones(shown.shape)
    if tested.any():
        qvalues[tested] = stats.false_discovery_control(pvalues[tested], method="bh")
    best = np.where(tested.any(axis=1), np.argmin(np.where(tested, qvalues, np.inf), axis=1), -1)
    rows = np.arange(n_groups)
    pick = np.maximum(best, 0)
    return PresenceStats(
        annotators=annotators.astype(np.int64),
        model=best.astype(np.int64),
        share=np.where(best >= 0, share[rows, pick], np.nan),
        expected=np.where(best >= 0, expected[rows, pick], np.nan),
        qvalue=np.where(best >= 0, qvalues[rows, pick], 1.0),
    )
