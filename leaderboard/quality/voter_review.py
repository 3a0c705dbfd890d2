"""The whole voter review: test annotators and their address groups, refit without the flagged, test again.

:mod:`leaderboard.quality.annotators` tests one annotator against a fitted crowd. A review needs more around
it:

* the crowd must be fitted without the votes being judged as far as possible, so the review fits all
  counted votes, flags, refits without the flagged votes and tests again against the cleaner ratings,
  with the population of personal tastes measured again on the annotators kept (a crowd of bots that
  all tie a third of the time would otherwise widen the honest population enough to hide in it);
* a manipulator can spread its votes over many fresh accounts, each too small to test. Annotators that
  voted from a common network (connected through any shared address) are pooled into one group and the
  group is tested like an annotator, against the individuals' population of tastes (pooling honest
  strangers averages their tastes away, so the test stays conservative for them); every member of a
  flagged group is flagged;
* the robust fit needs a weight per annotator: :func:`honest_weights`.

Used by the store's review (:mod:`votes.review.voters`) and by ``scripts/sim_manipulation.py``, so the
simulation measures the procedure the maintainers run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from leaderboard.bt.fit import fit_bt
from leaderboard.bt.spec import BTSpec
from leaderboard.data import aggregate_codes
from leaderboard.quality.annotators import AnnotatorStats, FlagRule, annotator_stats, flag_annotators

__all__ = ["VoterReview", "address_components", "fit_ratings", "honest_weights", "review_voters"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: A weak prior keeps models with few or one-sided votes finite in the review's own fits.
_REVIEW_SPEC = BTSpec(prior_sd=400.0)


@dataclass(frozen=True)
class VoterReview:
    """The outcome of :func:`review_voters`; arrays aligned with ``stats.annotators``."""

    stats: AnnotatorStats
    flagged: BoolArray
    reasons: tuple[str | None, ...]
    weights: FloatArray
    ratings: FloatArray
    group_size: IntArray


def fit_ratings(
    model_a: IntArray,
    model_b: IntArray,
    outcome: IntArray,
    n_models: int,
    *,
    weight: FloatArray | None = None,
    spec: BTSpec = _REVIEW_SPEC,
) -> FloatArray:
    """Bradley-Terry ratings (Elo scale) of the given votes; all level when a fit is impossible."""
    names = tuple(str(i) for i in range(n_models))
    counts = aggregate_codes(model_a, model_b, outcome, models=names, weight=weight)
    try:
        fitted: FloatArray = np.asarray(fit_bt(counts, spec=spec).rating, dtype=np.float64)
    except (ValueError, RuntimeError):
        fitted = np.full(n_models, 1000.0)
    return fitted


def address_components(annotator: IntArray, address: IntArray) -> dict[int, int]:
    """Annotator id -> a representative of its component, annotators joined by any shared address code.

    ``address`` holds an integer code per vote, negative when unknown. Union-find, linear in the votes.
    """
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    first_at: dict[int, int] = {}
    for who, where in zip(annotator.tolist(), address.tolist(), strict=True):
        parent.setdefault(who, who)
        if where < 0:
            continue
        other = first_at.setdefault(where, who)
        ra, rb = root(who), root(other)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {a: root(a) for a in parent}


def review_voters(
    annotator: IntArray,
    model_a: IntArray,
    model_b: IntArray,
    outcome: IntArray,
    n_models: int,
    *,
    counted: BoolArray | None = None,
    seconds: FloatArray | None = None,
    skipped: tuple[IntArray, IntArray, IntArray] | None = None,
    address: IntArray | None = None,
    rule: FlagRule | None = None,
    rounds: int = 3,
) -> VoterReview:
    """Test every annotator (and every address group) against the crowd fitted without the flagged.

    Parameters
    ----------
    annotator, model_a, model_b, outcome : int arrays, shape (n,)
        The votes (model indices in ``[0, n_models)``, :class:`~leaderboard.data.Outcome` codes).
    counted : bool array, optional
        Votes the first fit may use (for example: not already flagged by a maintainer); all by default.
    seconds : float array, optional
        Seconds per vote.
    skipped : (annotator, model_a, model_b), optional
        Battles shown and not voted on.
    address : int array, optional
        A network code per vote (negative when unknown), for the pooled group test.
    rounds : int
        Fit-and-test rounds (at least 1); the flags of the last round are returned. Three: a second
        round tests against a crowd and a population measured without the first round's catches, a third
        without the second's (bots missed at first widen the population they are tested against).
    """
    rule = rule or FlagRule()
    keep = np.ones(annotator.size, dtype=bool) if counted is None else counted.copy()
    components = address_components(annotator, address) if address is not None else {}
    reviewed: VoterReview | None = None
    population: dict[str, float] | None = None
    for _ in range(max(rounds, 1)):
        ratings = fit_ratings(model_a[keep], model_b[keep], outcome[keep], n_models)
        if reviewed is not None:
            # The population of honest tastes is measured on the annotators the last round kept.
            population = annotator_stats(
                annotator[keep], model_a[keep], model_b[keep], outcome[keep], ratings
            ).population_sds
        reviewed = _review_once(
            annotator, model_a, model_b, outcome, ratings, seconds, skipped, components, rule, population
        )
        bad = set(reviewed.stats.annotators[reviewed.flagged].tolist())
        keep = ~np.isin(annotator, list(bad)) if bad else np.ones(annotator.size, dtype=bool)
        if counted is not None:
            keep &= counted
    if reviewed is None:  # the loop above runs at least once
        raise RuntimeError("the voter review ran no round")
    return reviewed


def _review_once(
    annotator: IntArray,
    model_a: IntArray,
    model_b: IntArray,
    outcome: IntArray,
    ratings: FloatArray,
    seconds: FloatArray | None,
    skipped: tuple[IntArray, IntArray, IntArray] | None,
    components: dict[int, int],
    rule: FlagRule,
    population: dict[str, float] | None,
) -> VoterReview:
    s = annotator_stats(
        annotator, model_a, model_b, outcome, ratings, seconds=seconds, skipped=skipped, population=population
    )
    flagged, reasons = flag_annotators(s, rule)
    reason_list = list(reasons)
    weights = honest_weights(s)
    ids = s.annotators.tolist()
    rep = np.array([components.get(a, a) for a in ids], dtype=np.int64)
    _, inverse, sizes = np.unique(rep, return_inverse=True, return_counts=True)
    group_size = sizes[inverse].astype(np.int64)
    pooled = {a for a, n in zip(ids, group_size.tolist(), strict=True) if n > 1}
    if pooled:
        to_rep = {a: components.get(a, a) for a in pooled}
        in_vote = np.isin(annotator, list(pooled))
        g_who = np.array([to_rep[a] for a in annotator[in_vote].tolist()], dtype=np.int64)
        g_skipped = None
        if skipped is not None:
            in_skip = np.isin(skipped[0], list(pooled))
            g_skipped = (
                np.array([to_rep[a] for a in skipped[0][in_skip].tolist()], dtype=np.int64),
                skipped[1][in_skip],
                skipped[2][in_skip],
            )
        gs = annotator_stats(
            g_who,
            model_a[in_vote],
            model_b[in_vote],
            outcome[in_vote],
            ratings,
            seconds=None if seconds is None else seconds[in_vote],
            skipped=g_skipped,
            population=s.population_sds,
        )
        g_flagged, g_reasons = flag_annotators(gs, rule)
        g_ids = gs.annotators.tolist()
        group_reason = {int(g): r for g, f, r in zip(g_ids, g_flagged, g_reasons, strict=True) if f}
        group_weight = dict(zip(g_ids, honest_weights(gs).tolist(), strict=True))
        for k, a in enumerate(ids):
            if a not in pooled:
                continue
            # A member weighs no more than its group's evidence allows.
            weights[k] = min(weights[k], group_weight.get(to_rep[a], 1.0))
            if to_rep[a] in group_reason:
                note = f"group of {group_size[k]}: {group_reason[to_rep[a]]}"
                reason_list[k] = note if reason_list[k] is None else f"{reason_list[k]}; {note}"
                flagged[k] = True
    return VoterReview(s, flagged, tuple(reason_list), weights, ratings, group_size)


def honest_weights(annotator_stats: AnnotatorStats, *, prior_honest: float = 0.99) -> FloatArray:
    """Posterior probability that each annotator is honest, from the evidence of every test family.

    The smallest p-value over the families, Bonferroni-corrected for their number, is turned into the
    largest Bayes factor against honesty it can support, ``1 / (-e p ln p)`` for ``p < 1/e`` (Sellke,
    Bayarri and Berger, 2001, "Calibration of p values for testing precise null hypotheses"), and combined
    with ``prior_honest``. A voter with ordinary p-values keeps a weight near 1; one with ``p = 1e-6``
    weighs about 0.004. The weights shrink a voter's influence smoothly with the evidence, with no cut.
    """
    if not 0.0 < prior_honest < 1.0:
        raise ValueError("prior_honest must be in (0, 1)")
    p = annotator_stats.family_pvalues()
    p = np.where(np.isnan(p), 1.0, p)
    p_min = np.clip(p.min(axis=1) * p.shape[1], 1e-300, 1.0)
    small = p_min < 1.0 / math.e
    bayes = np.ones(p_min.size)
    bayes[small] = 1.0 / (-math.e * p_min[small] * np.log(p_min[small]))
    odds = (1.0 - prior_honest) / prior_honest * bayes
    weights: FloatArray = 1.0 / (1.0 + odds)
    return weights
