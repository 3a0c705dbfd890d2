"""Per-annotator statistics and the anomalous-annotator test.

A public arena cannot vet who votes, so it watches how they vote. An honest voter is modelled as the crowd
(the fitted Bradley-Terry ratings) plus a personal taste for each model and a personal side bias, both
drawn from the population with standard deviations estimated from the votes themselves
(:mod:`leaderboard.quality.overdispersion`). Every test asks whether an annotator's votes need a personal
effect far outside that population, so an honest voter with a strong taste is not flagged for having voted a
lot:

* ``side``: the share of decisive votes won by the left answer, against the crowd's own left advantage
  plus a personal side bias (always-left bots);
* ``favours`` / ``opposes``: for each model, the annotator's total score for it (1 win, 1/2 tie, 0 loss)
  against the crowd plus a personal taste for it, two-sided, Bonferroni over the models tried (voters who
  boost a target whenever they recognise it, or vote down its rivals);
* ``disagrees``: a voter who ignores the answers shows it twice, so two tests are combined with Fisher's
  method: on decisive votes, how often the crowd's favourite won (lower tail, with a personal effect on
  agreement), and the share of ties against the typical tie rate plus a personal tie propensity
  (two-sided: a random clicker picks the tie a third of the time, a bot perhaps never);
* ``skips``: given the battles an annotator was shown and did not vote on, whether the voted ones hold a
  model more (or less) often than a vote independent of the models would (Fisher's exact, hypergeometric,
  Bonferroni over models): an account that votes only when it thinks it sees its target;
* ``fast``: the median seconds per vote.

The p-values of every family are adjusted with Benjamini-Hochberg across the annotators it tested (one
with fewer than ``min_model_votes`` votes, or no model seen that often, or no skips, is not a hypothesis
of that family and would only make the correction stricter), and
:func:`flag_annotators` turns them into flags with the thresholds of :class:`FlagRule`. The screens
themselves (each family's tails, the favourite-model and skip tests, the correction) are
:mod:`leaderboard.quality.screens`.
:func:`leaderboard.quality.voter_review.honest_weights` turns the same evidence into a posterior probability
of being honest, for the robust fit that down-weights voters by their evidence instead of cutting at a
threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special, stats

from leaderboard.data import Outcome
from leaderboard.quality.overdispersion import robust_offset
from leaderboard.quality.screens import (
    as_three_way,
    benjamini_hochberg,
    favourite_model_test,
    skip_test,
    tails_with_effect,
    two_sided,
)

__all__ = [
    "AnnotatorStats",
    "FlagRule",
    "annotator_stats",
    "flag_annotators",
    "outcome_probabilities",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Natural-log units per Elo point.
NATS_PER_ELO = math.log(10.0) / 400.0
#: Test families with a p-value per annotator, in the order of ``AnnotatorStats.family_pvalues``.
FAMILIES = ("noise", "model", "side", "skips")
#: An annotator's own tie rate is shrunk towards the crowd's as if this many votes at the crowd's rate
#: came first.
TIE_PRIOR_VOTES = 20.0


@dataclass(frozen=True)
class FlagRule:
    """The documented thresholds for flagging an annotator.

    Attributes
    ----------
    min_votes : int
        No test is decided on fewer votes than this (default 20; the skip test counts battles shown): a
        handful of surprising votes is what honest people produce too.
    alpha : float
        False discovery rate for each test family after Benjamini-Hochberg (default 0.01).
    min_median_seconds : float or None
        Flag annotators whose median time per vote is below this many seconds (default 2.0: reading two
        answers takes longer). ``None`` turns the timing rule off.
    use_side_test : bool
        Flag a significant left/right preference (default True).
    use_favouritism_test : bool
        Flag a significant preference for or against one model beyond the taste of the population
        (default True).
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
    n_seen : int array
        Battles shown: votes plus the battles skipped (equal to ``n_votes`` without skip data).
    left_share : float array
        Share of decisive votes won by the left answer (NaN without decisive votes).
    side_pvalue, side_qvalue : float arrays
        Two-sided test of the left wins against the crowd's left advantage plus a personal side bias.
        In every family, NaN where the annotator was not tested.
    median_seconds : float array
        Median seconds per vote (NaN when unknown).
    agreement_share : float array
        Share of decisive votes won by the crowd's favourite (NaN without decisive votes).
    agreement_pvalue : float array
        Lower tail of the crowd's favourite's wins, with a personal effect on agreement.
    favourite : int array
        Index of the model with the most significant excess (-1 when none has enough votes).
    favouritism_z : float array
        Its standardised excess score: positive for a voter who favours it, negative against it.
    favouritism_pvalue, favouritism_qvalue : float arrays
        Two-sided tail of the model's score with a personal taste, Bonferroni over the models tried.
    tie_share : float array
        Share of ties among the votes.
    tie_pvalue : float array
        Two-sided test of the ties against the typical tie rate plus a personal tie propensity.
    noise_pvalue, noise_qvalue : float arrays
        Fisher's combination of ``agreement_pvalue`` and ``tie_pvalue``; q is BH-adjusted.
    skip_model : int array
        Model whose presence best predicts a vote over a skip (-1 without skips).
    skip_pvalue, skip_qvalue : float arrays
        Fisher's exact test of voting independently of that model, Bonferroni over models.
    left_advantage : float
        The typical annotator's left advantage (logits) the side test was run against.
    tie_rate : float
        The share of ties used in the vote model.
    taste_sd, side_sd, agreement_sd, tie_sd : float
        Population sd (logits) of the personal effects, estimated from the votes or given.
    """

    annotators: IntArray
    n_votes: IntArray
    n_decisive: IntArray
    n_seen: IntArray
    left_share: FloatArray
    side_pvalue: FloatArray
    side_qvalue: FloatArray
    median_seconds: FloatArray
    agreement_share: FloatArray
    agreement_pvalue: FloatArray
    favourite: IntArray
    favouritism_z: FloatArray
    favouritism_pvalue: FloatArray
    favouritism_qvalue: FloatArray
    tie_share: FloatArray
    tie_pvalue: FloatArray
    noise_pvalue: FloatArray
    noise_qvalue: FloatArray
    skip_model: IntArray
    skip_pvalue: FloatArray
    skip_qvalue: FloatArray
    left_advantage: float
    tie_rate: float
    taste_sd: float
    side_sd: float
    agreement_sd: float
    tie_sd: float

    @property
    def population_sds(self) -> dict[str, float]:
        """The crowd's rates and the personal-effect sds: pooled groups are tested against these."""
        return {
            "tie_rate": self.tie_rate,
            "left_advantage": self.left_advantage,
            "taste_sd": self.taste_sd,
            "side_sd": self.side_sd,
            "agreement_sd": self.agreement_sd,
            "tie_sd": self.tie_sd,
        }

    def family_pvalues(self) -> FloatArray:
        """Per annotator and family (:data:`FAMILIES`), the raw p-values, shape (n_annotators, 4)."""
        return np.column_stack(
            [self.noise_pvalue, self.favouritism_pvalue, self.side_pvalue, self.skip_pvalue]
        )


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


def annotator_stats(
    annotator: npt.ArrayLike,
    model_a: npt.ArrayLike,
    model_b: npt.ArrayLike,
    outcome: npt.ArrayLike,
    ratings: npt.ArrayLike,
    *,
    seconds: npt.ArrayLike | None = None,
    tie_rate: float | None = None,
    skipped: tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike] | None = None,
    min_model_votes: int = 10,
    population: dict[str, float] | None = None,
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
        Probability of a tie in the vote model; by default the typical annotator's (a robust offset).
    skipped : (annotator, model_a, model_b) int arrays, optional
        Battles shown and not voted on; annotators absent from ``annotator`` are ignored.
    min_model_votes : int
        The per-model test only looks at models in at least this many of the annotator's votes, and the
        population sds are estimated from cells with at least this many votes.
    population : dict, optional
        ``AnnotatorStats.population_sds`` of an earlier run: test against those rates and sds instead of
        estimating them (pooled address groups are tested against the individuals' population).

    Returns
    -------
    AnnotatorStats

    Raises
    ------
    ValueError
        If the arrays differ in length, the outcome codes are out of range or a model index is outside
        ``ratings``.
    """
    who = np.asarray(annotator, dtype=np.int64)
    ia = np.asarray(model_a, dtype=np.int64)
    ib = np.asarray(model_b, dtype=np.int64)
    out = as_three_way(outcome)
    r = np.asarray(ratings, dtype=np.float64)
    if not (who.shape == ia.shape == ib.shape == out.shape) or who.ndim != 1:
        raise ValueError("annotator, model_a, model_b and outcome must be 1-d arrays of the same length")
    if ia.size and (min(ia.min(), ib.min()) < 0 or max(ia.max(), ib.max()) >= r.size):
        raise ValueError("model indices must be within the ratings")
    secs = np.full(who.shape, np.nan) if seconds is None else np.asarray(seconds, dtype=np.float64)
    if secs.shape != who.shape:
        raise ValueError("seconds must have one value per vote")
    given = population or {}

    is_tie = out == Outcome.TIE
    is_left = out == Outcome.MODEL_A
    ids, group = np.unique(who, return_inverse=True)
    group = group.astype(np.int64)
    n_groups = ids.size
    if tie_rate is None and "tie_rate" in given:
        tie_rate = given["tie_rate"]
    if tie_rate is None:
        # The typical annotator's tie rate: a pooled share moves with every bot that never (or always) ties.
        zeros = np.zeros(group.size)
        offset = robust_offset(group, n_groups, zeros, is_tie.astype(np.float64), min_votes=min_model_votes)
        tie_rate = float(special.expit(offset)) if out.size else 0.0
    tie_rate = min(max(tie_rate, 1e-6), 1.0 - 1e-6)
    n_votes = np.bincount(group, minlength=n_groups).astype(np.int64)
    n_decisive = np.bincount(group, weights=~is_tie, minlength=n_groups).astype(np.int64)
    n_left = np.bincount(group, weights=is_left, minlength=n_groups)
    n_ties = np.bincount(group, weights=is_tie, minlength=n_groups)
    safe = np.maximum(n_decisive, 1)
    left_share = np.where(n_decisive > 0, n_left / safe, np.nan)
    tie_share = np.where(n_votes > 0, n_ties / np.maximum(n_votes, 1), np.nan)

    u = (r[ia] - r[ib]) * NATS_PER_ELO
    decisive = ~is_tie
    dg, du, left_won = group[decisive], u[decisive], is_left[decisive].astype(np.float64)

    advantage = given.get("left_advantage")
    if advantage is None:
        advantage = robust_offset(dg, n_groups, du, left_won, min_votes=min_model_votes)
    upper, lower, _, side_sd = tails_with_effect(
        dg, n_groups, du + advantage, left_won, given.get("side_sd"), min_model_votes
    )
    side_p = np.where(n_decisive >= min_model_votes, two_sided(upper, lower), np.nan)

    favourite_won = np.where(du >= 0, left_won, 1.0 - left_won)
    # Too few agreements is the lower tail of the favourite's wins, each weighted by the crowd's logit:
    # the score of a likelihood-ratio test of the crowd against a coin, where a lopsided pair says more.
    _, agree_p, _, agreement_sd = tails_with_effect(
        dg, n_groups, np.abs(du), favourite_won, given.get("agreement_sd"), min_model_votes, weight=np.abs(du)
    )
    agreed = np.bincount(dg, weights=favourite_won, minlength=n_groups)
    agreement_share = np.where(n_decisive > 0, agreed / safe, np.nan)

    tie_logit = float(special.logit(tie_rate))
    upper, lower, _, tie_sd = tails_with_effect(
        group,
        n_groups,
        np.full(group.size, tie_logit),
        is_tie.astype(np.float64),
        given.get("tie_sd"),
        min_model_votes,
    )
    tie_p = two_sided(upper, lower)
    fisher = -2.0 * (np.log(np.clip(agree_p, 1e-300, 1.0)) + np.log(np.clip(tie_p, 1e-300, 1.0)))
    noise_p = np.where(n_votes >= min_model_votes, stats.chi2.sf(fisher, 4), np.nan)

    favourite, fav_z, fav_p, taste_sd = favourite_model_test(
        group,
        n_groups,
        ia,
        ib,
        out,
        u,
        1.0 - (n_ties + TIE_PRIOR_VOTES * tie_rate) / (n_votes + TIE_PRIOR_VOTES),
        n_models=r.size,
        min_votes=min_model_votes,
        sd=given.get("taste_sd"),
    )

    n_seen = n_votes.copy()
    skip_model = np.full(n_groups, -1, dtype=np.int64)
    skip_p = np.full(n_groups, np.nan)
    if skipped is not None:
        s_who, s_a, s_b = (np.asarray(x, dtype=np.int64) for x in skipped)
        if not (s_who.shape == s_a.shape == s_b.shape) or s_who.ndim != 1:
            raise ValueError("skipped battles need annotator, model_a and model_b of the same length")
        if s_a.size and (min(s_a.min(), s_b.min()) < 0 or max(s_a.max(), s_b.max()) >= r.size):
            raise ValueError("model indices must be within the ratings")
        pos = np.searchsorted(ids, s_who)
        known = (pos < n_groups) & (ids[np.minimum(pos, n_groups - 1)] == s_who) if n_groups else pos < 0
        s_group = pos[known].astype(np.int64)
        n_seen += np.bincount(s_group, minlength=n_groups)
        skip_model, skip_p = skip_test(group, n_groups, ia, ib, s_group, s_a[known], s_b[known], r.size)

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
        n_seen=n_seen,
        left_share=left_share,
        side_pvalue=side_p,
        side_qvalue=benjamini_hochberg(side_p),
        median_seconds=median_seconds,
        agreement_share=agreement_share,
        agreement_pvalue=agree_p,
        favourite=favourite,
        favouritism_z=fav_z,
        favouritism_pvalue=fav_p,
        favouritism_qvalue=benjamini_hochberg(fav_p),
        tie_share=tie_share,
        tie_pvalue=tie_p,
        noise_pvalue=noise_p,
        noise_qvalue=benjamini_hochberg(noise_p),
        skip_model=skip_model,
        skip_pvalue=skip_p,
        skip_qvalue=benjamini_hochberg(skip_p),
        left_advantage=advantage,
        tie_rate=tie_rate,
        taste_sd=taste_sd,
        side_sd=side_sd,
        agreement_sd=agreement_sd,
        tie_sd=tie_sd,
    )


def flag_annotators(
    annotator_stats: AnnotatorStats, rule: FlagRule | None = None
) -> tuple[npt.NDArray[np.bool_], tuple[str | None, ...]]:
    """Apply a :class:`FlagRule` to annotator statistics.

    An annotator with at least ``rule.min_votes`` votes is flagged when any family's BH-adjusted q-value
    is below ``rule.alpha`` (``disagrees``, ``favours``/``opposes`` if
    ``rule.use_favouritism_test``, ``side`` if ``rule.use_side_test``) or its median seconds per vote is
    below ``rule.min_median_seconds`` (``fast``); one shown at least ``rule.min_votes`` battles is flagged
    when its skip q-value is (``skips``).

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
            if s.noise_qvalue[g] < rule.alpha:
                parts.append(
                    f"disagrees(agree={s.agreement_share[g]:.2f}, ties={s.tie_share[g]:.2f}, "
                    f"q={s.noise_qvalue[g]:.1e})"
                )
            if rule.use_favouritism_test and s.favouritism_qvalue[g] < rule.alpha:
                word = "favours" if s.favouritism_z[g] > 0 else "opposes"
                parts.append(f"{word}(model={s.favourite[g]}, z={s.favouritism_z[g]:.1f})")
            if rule.use_side_test and s.side_qvalue[g] < rule.alpha:
                parts.append(f"side(left={s.left_share[g]:.2f}, q={s.side_qvalue[g]:.1e})")
            if rule.min_median_seconds is not None and s.median_seconds[g] < rule.min_median_seconds:
                parts.append(f"fast(median={s.median_seconds[g]:.1f}s)")
        if s.n_seen[g] >= rule.min_votes and s.skip_qvalue[g] < rule.alpha:
            parts.append(
                f"skips(voted {s.n_votes[g]} of {s.n_seen[g]}, model={s.skip_model[g]}, "
                f"q={s.skip_qvalue[g]:.1e})"
            )
        reasons.append("; ".join(parts) if parts else None)
    flagged = np.array([r is not None for r in reasons], dtype=bool)
    return flagged, tuple(reasons)
