"""Per-annotator statistics and the anomalous-annotator test.

A public arena cannot vet who votes, so it watches how they vote. For each annotator we compute

* the number of votes and of decisive votes (a winner was picked),
* the share of decisive votes that went to the left answer, with a two-sided binomial test against the
  crowd's typical share (an honest crowd has a small left bias of its own, so the null is the median of
  the annotators' shares, which a minority of one-sided voters cannot drag, not one half),
* the median seconds per vote (bots and click-through voters are fast),
* agreement with the current model: each vote gets a p-value, the probability under the fitted
  Bradley-Terry model (with a tie share) of an outcome at least as unlikely as the one observed, and the
  annotator's p-values are combined with Fisher's statistic ``-2 sum log p``. This follows the outlier test
  of the Chatbot Arena paper (Chiang et al., 2024, "Chatbot Arena: an open platform for evaluating LLMs by
  human preference", section 5.2). The p-values of a three-outcome vote are discrete, which makes the
  textbook chi-squared reference very conservative (an honest vote's ``-2 log p`` has a mean well below 2),
  so we refer the statistic to a gamma distribution with its exact null mean and variance instead.
* favouritism: a voter who boosts one model whenever it appears mostly agrees with the model elsewhere,
  which dilutes Fisher's statistic. For each (annotator, model) we add up the model's score in the
  annotator's votes (1 win, 1/2 tie, 0 loss) minus its expectation under the fitted model, standardise it
  with the exact null variance, and keep the annotator's largest one-sided z over models with at least
  ``min_model_votes`` votes, Bonferroni-corrected for the number of models tried.

The p-values of every annotator are adjusted for multiple testing with Benjamini-Hochberg, per test
family, and :func:`flag_annotators` turns them into flags with the thresholds of :class:`FlagRule`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

from leaderboard.data import Outcome

__all__ = [
    "AnnotatorStats",
    "FlagRule",
    "annotator_stats",
    "flag_annotators",
    "outcome_probabilities",
    "vote_pvalues",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Probabilities closer than this count as equal when ranking outcomes by how unlikely they are.
PROBABILITY_TIE_TOLERANCE = 1e-12
#: Keeps ``log`` finite when the model gives an observed outcome (almost) no chance.
MIN_PVALUE = 1e-300


@dataclass(frozen=True)
class FlagRule:
    """The documented thresholds for flagging an annotator.

    Attributes
    ----------
    min_votes : int
        No test is decided on fewer votes than this (default 20): a handful of surprising votes is what
        honest people produce too.
    alpha : float
        False discovery rate for each test family after Benjamini-Hochberg (default 0.01).
    min_median_seconds : float or None
        Flag annotators whose median time per vote is below this many seconds (default 2.0: reading two
        answers takes longer). ``None`` turns the timing rule off.
    use_side_test : bool
        Flag a significant left/right preference (default True).
    use_favouritism_test : bool
        Flag a significant preference for one model beyond its rating (default True).
    """

    min_votes: int = 20
    alpha: float = 0.01
    min_median_seconds: float | None = 2.0
    use_side_test: bool = True
    use_favouritism_test: bool = True


@dataclass(frozen=True)
class AnnotatorStats:
    """Statistics per annotator; every array is aligned with ``annotators``.

    Attributes
    ----------
    annotators : int array
        The annotator ids, sorted.
    n_votes, n_decisive : int arrays
        Votes, and votes with a winner (not a tie).
    left_share : float array
        Share of decisive votes won by the left answer (NaN without decisive votes).
    side_pvalue, side_qvalue : float arrays
        Two-sided binomial test of ``left_share`` against ``left_share_null``; q is BH-adjusted.
    median_seconds : float array
        Median seconds per vote (NaN when unknown).
    agreement_statistic : float array
        Fisher's ``-2 sum log p`` over the annotator's votes.
    agreement_expected : float array
        Its expectation under the model.
    agreement_pvalue, agreement_qvalue : float arrays
        Upper-tail probability of the statistic under the model (gamma with matched moments); q is
        BH-adjusted.
    favourite : int array
        Index of the model the annotator favours most (-1 when none has enough votes).
    favouritism_z : float array
        Its standardised excess score.
    favouritism_pvalue, favouritism_qvalue : float arrays
        One-sided normal tail of ``favouritism_z``, Bonferroni over the models tried; q is BH-adjusted.
    left_share_null : float
        The crowd's left share the side test was run against.
    tie_rate : float
        The share of ties used in the vote model.
    """

    annotators: IntArray
    n_votes: IntArray
    n_decisive: IntArray
    left_share: FloatArray
    side_pvalue: FloatArray
    side_qvalue: FloatArray
    median_seconds: FloatArray
    agreement_statistic: FloatArray
    agreement_expected: FloatArray
    agreement_pvalue: FloatArray
    agreement_qvalue: FloatArray
    favourite: IntArray
    favouritism_z: FloatArray
    favouritism_pvalue: FloatArray
    favouritism_qvalue: FloatArray
    left_share_null: float
    tie_rate: float


def outcome_probabilities(
    model_a: npt.ArrayLike,
    model_b: npt.ArrayLike,
    ratings: npt.ArrayLike,
    *,
    tie_rate: float,
) -> FloatArray:
    """Probabilities of (left wins, right wins, tie) for each battle under Bradley-Terry with ties.

    The decisive share ``1 - tie_rate`` is split by the Bradley-Terry win probability on the Elo scale,
    ``P(a beats b) = 1 / (1 + 10 ** ((R_b - R_a) / 400))``.

    Parameters
    ----------
    model_a, model_b : int arrays, shape (n,)
        Indices into ``ratings`` of the left and right model.
    ratings : float array, shape (n_models,)
        Ratings on the Elo scale.
    tie_rate : float
        Probability of a tie (``tie`` and ``tie (bothbad)`` together), in [0, 1).

    Returns
    -------
    float array, shape (n, 3)
    """
    if not 0.0 <= tie_rate < 1.0:
        raise ValueError("tie_rate must be in [0, 1)")
    r = np.asarray(ratings, dtype=np.float64)
    ia = np.asarray(model_a, dtype=np.int64)
    ib = np.asarray(model_b, dtype=np.int64)
    p_a = 1.0 / (1.0 + 10.0 ** ((r[ib] - r[ia]) / 400.0))
    decisive = 1.0 - tie_rate
    return np.column_stack([decisive * p_a, decisive * (1.0 - p_a), np.full(p_a.shape, tie_rate)])


def _as_three_way(outcome: npt.ArrayLike) -> IntArray:
    codes = np.asarray(outcome, dtype=np.int64)
    if codes.size and (codes.min() < 0 or codes.max() > int(Outcome.BOTHBAD)):
        raise ValueError("outcome codes must be between 0 and 3")
    return np.where(codes == Outcome.BOTHBAD, int(Outcome.TIE), codes)


def _pvalues_from_probabilities(probs: FloatArray, observed: IntArray) -> FloatArray:
    # p = total probability of the outcomes no more likely than the observed one.
    p_obs = probs[np.arange(probs.shape[0]), observed]
    no_more_likely = probs <= p_obs[:, None] + PROBABILITY_TIE_TOLERANCE
    pvalues: FloatArray = np.clip((probs * no_more_likely).sum(axis=1), MIN_PVALUE, 1.0)
    return pvalues


def vote_pvalues(
    model_a: npt.ArrayLike,
    model_b: npt.ArrayLike,
    outcome: npt.ArrayLike,
    ratings: npt.ArrayLike,
    *,
    tie_rate: float,
) -> FloatArray:
    """Per-vote p-value: the model's probability of an outcome at least as unlikely as the observed one.

    Parameters
    ----------
    model_a, model_b : int arrays, shape (n,)
        Indices into ``ratings``.
    outcome : int array, shape (n,)
        :class:`~leaderboard.data.Outcome` codes; ``tie (bothbad)`` counts as a tie.
    ratings : float array, shape (n_models,)
        Ratings on the Elo scale (a fitted Bradley-Terry model).
    tie_rate : float
        Probability of a tie.

    Returns
    -------
    float array, shape (n,)
        Values in (0, 1]; 1 for the most likely outcome.
    """
    probs = outcome_probabilities(model_a, model_b, ratings, tie_rate=tie_rate)
    return _pvalues_from_probabilities(probs, _as_three_way(outcome))


def _fisher_null_moments(probs: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Exact mean and variance of ``-2 log p`` for each vote when the vote follows the model."""
    n = probs.shape[0]
    scores = np.empty_like(probs)
    for k in range(3):
        scores[:, k] = -2.0 * np.log(_pvalues_from_probabilities(probs, np.full(n, k, dtype=np.int64)))
    mean = (probs * scores).sum(axis=1)
    var = (probs * scores**2).sum(axis=1) - mean**2
    return mean, np.maximum(var, 0.0)


def _bh(pvalues: FloatArray) -> FloatArray:
    out = np.full(pvalues.shape, np.nan)
    ok = ~np.isnan(pvalues)
    if ok.any():
        out[ok] = stats.false_discovery_control(pvalues[ok], method="bh")
    return out


def _favouritism(
    group: IntArray,
    n_groups: int,
    ia: IntArray,
    ib: IntArray,
    out: IntArray,
    probs: FloatArray,
    *,
    n_models: int,
    min_votes: int,
) -> tuple[IntArray, FloatArray, FloatArray]:
    """Largest standardised excess score of any one model in each annotator's votes."""
    # Score of the left model: 1 win, 1/2 tie, 0 loss; the right model's is one minus it.
    score_a = np.choose(out, [1.0, 0.0, 0.5])
    mean_a = probs[:, 0] + 0.5 * probs[:, 2]
    var_a = probs[:, 0] + 0.25 * probs[:, 2] - mean_a**2
    keys = np.concatenate([group * n_models + ia, group * n_models + ib])
    excess = np.concatenate([score_a - mean_a, mean_a - score_a])
    size = n_groups * n_models
    total = np.bincount(keys, weights=excess, minlength=size).reshape(n_groups, n_models)
    var = np.bincount(keys, weights=np.concatenate([var_a, var_a]), minlength=size).reshape(
        n_groups, n_models
    )
    count = np.bincount(keys, minlength=size).reshape(n_groups, n_models)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where((count >= min_votes) & (var > 0), total / np.sqrt(var), -np.inf)
    best = np.argmax(z, axis=1)
    best_z = z[np.arange(n_groups), best]
    tried = (z > -np.inf).sum(axis=1)
    has = tried > 0
    pvalue = np.ones(n_groups)
    pvalue[has] = np.minimum(1.0, stats.norm.sf(best_z[has]) * tried[has])
    return (
        np.where(has, best, -1).astype(np.int64),
        np.where(has, best_z, np.nan),
        pvalue,
    )


def annotator_stats(
    annotator: npt.ArrayLike,
    model_a: npt.ArrayLike,
    model_b: npt.ArrayLike,
    outcome: npt.ArrayLike,
    ratings: npt.ArrayLike,
    *,
    seconds: npt.ArrayLike | None = None,
    tie_rate: float | None = None,
    left_share_null: float | None = None,
    min_model_votes: int = 10,
) -> AnnotatorStats:
    """Statistics per annotator from vote arrays and a fitted model.

    Parameters
    ----------
    annotator : int array, shape (n,)
        Annotator id of each vote.
    model_a, model_b : int arrays, shape (n,)
        Left and right model of each vote, indices into ``ratings``.
    outcome : int array, shape (n,)
        :class:`~leaderboard.data.Outcome` codes.
    ratings : float array, shape (n_models,)
        The current fitted ratings (Elo scale).
    seconds : float array, shape (n,), optional
        Seconds each vote took; NaN where unknown.
    tie_rate : float, optional
        Probability of a tie in the vote model; by default the share of ties among all votes.
    left_share_null : float, optional
        Null left share of the side test; by default the median of the annotators' left shares.
    min_model_votes : int
        The favouritism test only looks at models in at least this many of the annotator's votes
        (the normal approximation needs a few).

    Returns
    -------
    AnnotatorStats

    Raises
    ------
    ValueError
        If the arrays differ in length or the outcome codes are out of range.
    """
    who = np.asarray(annotator, dtype=np.int64)
    ia = np.asarray(model_a, dtype=np.int64)
    ib = np.asarray(model_b, dtype=np.int64)
    out = _as_three_way(outcome)
    if not (who.shape == ia.shape == ib.shape == out.shape) or who.ndim != 1:
        raise ValueError("annotator, model_a, model_b and outcome must be 1-d arrays of the same length")
    secs = np.full(who.shape, np.nan) if seconds is None else np.asarray(seconds, dtype=np.float64)
    if secs.shape != who.shape:
        raise ValueError("seconds must have one value per vote")

    is_tie = out == Outcome.TIE
    is_left = out == Outcome.MODEL_A
    if tie_rate is None:
        tie_rate = float(is_tie.mean()) if out.size else 0.0
    tie_rate = min(max(tie_rate, 1e-6), 1.0 - 1e-6)

    ids, group = np.unique(who, return_inverse=True)
    n_groups = ids.size
    n_votes = np.bincount(group, minlength=n_groups).astype(np.int64)
    n_decisive = np.bincount(group, weights=~is_tie, minlength=n_groups).astype(np.int64)
    n_left = np.bincount(group, weights=is_left, minlength=n_groups).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        left_share = np.where(n_decisive > 0, n_left / np.maximum(n_decisive, 1), np.nan)

    if left_share_null is None:
        shares = left_share[~np.isnan(left_share)]
        left_share_null = float(np.median(shares)) if shares.size else 0.5
    left_share_null = min(max(left_share_null, 1e-6), 1.0 - 1e-6)

    side_p = np.full(n_groups, np.nan)
    for g in np.flatnonzero(n_decisive > 0):
        side_p[g] = stats.binomtest(int(n_left[g]), int(n_decisive[g]), left_share_null).pvalue

    probs = outcome_probabilities(ia, ib, ratings, tie_rate=tie_rate)
    score = -2.0 * np.log(_pvalues_from_probabilities(probs, out))
    mean, var = _fisher_null_moments(probs)
    statistic = np.bincount(group, weights=score, minlength=n_groups).astype(np.float64)
    expected = np.bincount(group, weights=mean, minlength=n_groups).astype(np.float64)
    variance = np.bincount(group, weights=var, minlength=n_groups)
    agreement_p = np.ones(n_groups)
    ok = (expected > 0) & (variance > 0)
    shape = expected[ok] ** 2 / variance[ok]
    scale = variance[ok] / expected[ok]
    agreement_p[ok] = stats.gamma.sf(statistic[ok], shape, scale=scale)

    favourite, fav_z, fav_p = _favouritism(
        group, n_groups, ia, ib, out, probs, n_models=np.asarray(ratings).size, min_votes=min_model_votes
    )

    median_seconds = np.full(n_groups, np.nan)
    order = np.argsort(group, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(n_votes)])
    sorted_secs = secs[order]
    for k in range(n_groups):
        chunk = sorted_secs[bounds[k] : bounds[k + 1]]
        chunk = chunk[~np.isnan(chunk)]
        if chunk.size:
            median_seconds[k] = float(np.median(chunk))

    return AnnotatorStats(
        annotators=ids.astype(np.int64),
        n_votes=n_votes,
        n_decisive=n_decisive,
        left_share=left_share,
        side_pvalue=side_p,
        side_qvalue=_bh(side_p),
        median_seconds=median_seconds,
        agreement_statistic=statistic,
        agreement_expected=expected,
        agreement_pvalue=agreement_p,
        agreement_qvalue=_bh(agreement_p),
        favourite=favourite,
        favouritism_z=fav_z,
        favouritism_pvalue=fav_p,
        favouritism_qvalue=_bh(fav_p),
        left_share_null=left_share_null,
        tie_rate=tie_rate,
    )


def flag_annotators(
    annotator_stats: AnnotatorStats, rule: FlagRule | None = None
) -> tuple[npt.NDArray[np.bool_], tuple[str | None, ...]]:
    """Apply a :class:`FlagRule` to annotator statistics.

    An annotator with at least ``rule.min_votes`` votes is flagged when any of these holds:

    * ``disagrees``: the BH-adjusted agreement q-value is below ``rule.alpha``;
    * ``favours``: (if ``rule.use_favouritism_test``) the BH-adjusted favouritism q-value is below
      ``rule.alpha``;
    * ``side``: (if ``rule.use_side_test``) the BH-adjusted side-preference q-value is below ``rule.alpha``;
    * ``fast``: the median seconds per vote is below ``rule.min_median_seconds``.

    Returns
    -------
    flagged : bool array aligned with ``annotator_stats.annotators``
    reasons : tuple of str or None
        For a flagged annotator, the reasons with their numbers (for example
        ``"disagrees(q=3.1e-07); side(left=0.97, q=2.0e-12)"``); None otherwise.
    """
    rule = rule or FlagRule()
    s = annotator_stats
    enough = s.n_votes >= rule.min_votes
    reasons: list[str | None] = []
    for g in range(s.annotators.size):
        parts: list[str] = []
        if enough[g]:
            if s.agreement_qvalue[g] < rule.alpha:
                parts.append(f"disagrees(q={s.agreement_qvalue[g]:.1e})")
            if rule.use_favouritism_test and s.favouritism_qvalue[g] < rule.alpha:
                parts.append(f"favours(model={s.favourite[g]}, z={s.favouritism_z[g]:.1f})")
            if rule.use_side_test and s.side_qvalue[g] < rule.alpha:
                parts.append(f"side(left={s.left_share[g]:.2f}, q={s.side_qvalue[g]:.1e})")
            if rule.min_median_seconds is not None and s.median_seconds[g] < rule.min_median_seconds:
                parts.append(f"fast(median={s.median_seconds[g]:.1f}s)")
        reasons.append("; ".join(parts) if parts else None)
    flagged = np.array([r is not None for r in reasons], dtype=bool)
    return flagged, tuple(reasons)
