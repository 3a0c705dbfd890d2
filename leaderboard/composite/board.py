"""The composite board: human votes and LLM-judge verdicts on one rating scale, and what each judge is worth.

:mod:`leaderboard.composite.fit` is the model (per-source discrimination, position, ties, self-preference,
and each judge's own per-model deviations from the human ratings with their spread ``tau``).
This module turns one-row-per-vote battles with their annotators into its input (humans pooled as
source 0, each judge a source of its own, every vote on one prompt and pair of models one cluster), fits
it into a :class:`~leaderboard.result.Leaderboard` like every other method, and measures the board's
worth in human votes:

- the *effective number of human votes*: how many human votes alone would give the board's ratings the
  same average variance (human-only sandwich variance times the human vote count, over the composite's);
- per judge, *what one verdict is worth*: the effective human votes the judge adds to the human votes
  (a fit of humans plus that judge alone) divided by its verdicts; measured from the two sandwich
  covariances, so the dependence between a verdict and the human votes on the same battle is counted,
  and with the judge's deviations as a random effect, so a judge whose view of the models departs from
  the humans' is worth less (its verdicts pin the ratings only to within its spread ``tau``);
- for ``arena evaluate``, the composite as one more rating system (:func:`composite_score`): fitted on
  the training votes, each test vote forecast as its own source would cast it;
- per judge, its correlation with humans (of the two sides' scores on the battles both saw), and the
  human votes needed for a target interval half-width with and without the judge judging alongside
  (at its present ratio of verdicts to human votes; half-widths shrink as one over the root of the votes).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import norm

from leaderboard.battles import Battles
from leaderboard.bt.compute import assemble_board
from leaderboard.bt.spec import DisconnectedComparisonError
from leaderboard.composite.fit import bootstrap_composite, fit_composite
from leaderboard.composite.model import CompositeData, CompositeFit, CompositeOptions
from leaderboard.composite.ppi import bootstrap_ppi, fit_ppi, ppi_battles
from leaderboard.data import Outcome
from leaderboard.evaluation.held_out import MethodScore
from leaderboard.result import Leaderboard

__all__ = [
    "HUMAN",
    "CompositeBoard",
    "composite_board",
    "composite_data",
    "composite_score",
    "correlation_with_humans",
    "judge_worth",
    "subset_sources",
]

FloatArray = npt.NDArray[np.float64]

#: Name of source 0, every annotator who is not an LLM judge.
HUMAN = "human"
#: Default target half-width (rating points) for "human votes needed".
TARGET_HALF_WIDTH = 10.0


def composite_data(
    battles: Battles,
    labels: tuple[str, ...],
    *,
    judges: Collection[str],
    families: Mapping[str, str] | None = None,
) -> CompositeData:
    """The composite's input from votes with annotators (``battles.annotator`` indexes ``labels``).

    Annotators named in ``judges`` are one source each (in sorted order after ``human``); everyone else
    is the human pool. ``families`` maps model names and judge labels to a family name: a judge with a
    family gets a self-preference term for the models of that family. A vote with a prompt shares its
    cluster with every vote on the same prompt and pair of models (either order); one without is alone.
    """
    if battles.annotator is None:
        raise ValueError("the composite needs who cast each vote")
    families = families or {}
    present = {labels[i] for i in np.unique(battles.annotator)}
    judge_names = sorted(present & set(judges))
    sources = (HUMAN, *judge_names)
    source_of = np.array([sources.index(lab) if lab in judge_names else 0 for lab in labels], dtype=np.int64)
    source = source_of[battles.annotator]
    if not np.any(source == 0):
        raise ValueError("no human votes: the composite puts judges on the human scale, so it needs some")
    outcome = battles.outcome
    tie = (outcome == Outcome.TIE) | (outcome == Outcome.BOTHBAD)
    score = np.where(outcome == Outcome.MODEL_A, 1.0, np.where(outcome == Outcome.MODEL_B, 0.0, 0.5))
    lo = np.minimum(battles.model_a, battles.model_b)
    hi = np.maximum(battles.model_a, battles.model_b)
    if battles.prompt is None:
        battle = np.arange(len(battles), dtype=np.int64)
    else:
        keys = np.stack([battles.prompt, lo, hi], axis=1)
        battle = np.unique(keys, axis=0, return_inverse=True)[1].ravel().astype(np.int64)
    model_family = tuple(families.get(m) for m in battles.models)
    family = {k: families[name] for k, name in enumerate(sources) if k > 0 and name in families}
    return CompositeData(
        models=battles.models,
        sources=sources,
        model_a=battles.model_a,
        model_b=battles.model_b,
        source=source,
        score=score,
        tie=tie,
        weight=battles.weight,
        sided=battles.sided,
        battle=battle,
        family=family,
        model_family=model_family if any(f is not None for f in model_family) else (),
    )


def subset_sources(data: CompositeData, keep: Collection[int]) -> CompositeData:
    """The votes of the sources ``keep`` only (source 0 must be among them), renumbered."""
    kept = sorted(set(keep))
    if kept[0] != 0:
        raise ValueError("the human pool (source 0) must be kept")
    new_index = np.full(len(data.sources), -1, dtype=np.int64)
    new_index[kept] = np.arange(len(kept))
    rows = np.isin(data.source, kept)

    def take(values: Any) -> Any:
        return None if values is None else np.asarray(values)[rows]

    return replace(
        data,
        sources=tuple(data.sources[k] for k in kept),
        model_a=data.model_a[rows],
        model_b=data.model_b[rows],
        source=new_index[data.source[rows]],
        score=data.score[rows],
        tie=data.tie[rows],
        weight=take(data.weight),
        sided=take(data.sided),
        battle=take(data.battle),
        family={int(new_index[k]): f for k, f in data.family.items() if k in kept},
    )


def _mean_variance(fit: CompositeFit) -> float:
    return float(np.mean(np.asarray(fit.rating_se) ** 2))


def _effective(n_human: float, var_human: float, var: float) -> float | None:
    """Human votes alone that give the mean rating variance ``var``; None when a variance is degenerate
    (zero or not finite: a source separated the models perfectly, so its curve's steepness runs away)."""
    if not (np.isfinite(var) and np.isfinite(var_human) and var > 0 and var_human > 0):
        return None
    return n_human * var_human / var


def _human_votes(data: CompositeData) -> float:
    w = np.ones(len(data.source)) if data.weight is None else np.asarray(data.weight)
    return float(w[data.source == 0].sum())


def correlation_with_humans(data: CompositeData, judge: int) -> tuple[float | None, int]:
    """Pearson correlation of the human pool's and the judge's mean score for the lower-indexed model,
    over the battles (clusters) both voted on, and how many such battles there are."""
    if data.battle is None:
        return None, 0
    flip = data.model_a > data.model_b
    score = np.where(flip, 1.0 - data.score, data.score)
    codes, battle = np.unique(data.battle, return_inverse=True)
    means = []
    for s in (0, judge):
        rows = data.source == s
        total = np.bincount(battle[rows], weights=score[rows], minlength=len(codes))
        count = np.bincount(battle[rows], minlength=len(codes)).astype(float)
        means.append(np.divide(total, count, out=np.full(len(codes), np.nan), where=count > 0))
    both = np.isfinite(means[0]) & np.isfinite(means[1])
    n = int(both.sum())
    if n < 3 or np.std(means[0][both]) == 0 or np.std(means[1][both]) == 0:
        return None, n
    return float(np.corrcoef(means[0][both], means[1][both])[0, 1]), n


def judge_worth(
    data: CompositeData,
    options: CompositeOptions,
    *,
    level: float = 0.95,
    target_half_width: float = TARGET_HALF_WIDTH,
    full: CompositeFit | None = None,
) -> dict[str, Any]:
    """The effective number of human votes and, per judge, what it is worth (see the module docstring).

    Returns a dict with ``n_human_votes``, ``effective_human_votes`` (None when the human votes alone do
    not put every model on one scale), ``target_half_width``, and ``judges``: per judge label its
    ``verdicts``, ``correlation_with_humans`` (and ``shared_battles``), ``verdict_worth_in_human_votes``,
    ``human_votes_needed`` ``{"without": n, "with": n}`` for ``target_half_width``, and
    ``deviation_sd_elo`` (the judge's spread of per-model deviations from the human ratings in that fit,
    0: none found) with ``deviation_p_value`` (Cochran's; None when not estimated).
    """
    z = float(norm.ppf(0.5 + level / 2))
    n_human = _human_votes(data)
    out: dict[str, Any] = {"n_human_votes": n_human, "target_half_width": target_half_width, "judges": {}}
    human_options = replace(options, discrimination=False, self_preference=False)
    try:
        human = fit_composite(subset_sources(data, [0]), human_options)
    except DisconnectedComparisonError:
        out["effective_human_votes"] = None
        out["note"] = "the human votes alone leave some models without a common scale"
        return out
    var_human = _mean_variance(human)
    full = fit_composite(data, options) if full is None else full
    out["effective_human_votes"] = _effective(n_human, var_human, _mean_variance(full))
    needed_without = (
        n_human * (z * np.sqrt(var_human) / target_half_width) ** 2 if np.isfinite(var_human) else None
    )
    for k in range(1, len(data.sources)):
        pair = subset_sources(data, [0, k])
        n_judge = float(
            np.sum(pair.source == 1) if pair.weight is None else pair.weight[pair.source == 1].sum()
        )
        with_judge = fit_composite(pair, options)
        effective = _effective(n_human, var_human, _mean_variance(with_judge))
        worth = None if effective is None or not n_judge else (effective - n_human) / n_judge
        ratio = n_judge / n_human if n_human else 0.0
        corr, shared = correlation_with_humans(data, k)
        p_value = float(with_judge.deviation_p_value[1]) if len(with_judge.deviation_p_value) > 1 else None
        out["judges"][data.sources[k]] = {
            "deviation_sd_elo": float(with_judge.deviation_sd[1])
            if len(with_judge.deviation_sd) > 1
            else 0.0,
            "deviation_p_value": p_value if p_value is not None and np.isfinite(p_value) else None,
            "verdicts": n_judge,
            "correlation_with_humans": corr,
            "shared_battles": shared,
            "verdict_worth_in_human_votes": worth,
            "human_votes_needed": {
                "without": needed_without,
                # a judge that hurts (worth below 0) is left out rather than counted against the humans
                "with": None
                if worth is None or needed_without is None
                else needed_without / (1.0 + max(worth, 0.0) * ratio),
            },
        }
    return out


@dataclass(frozen=True)
class CompositeBoard:
    """A composite board and what goes into its snapshot's metadata (``composite``)."""

    board: Leaderboard
    fit: CompositeFit
    metadata: dict[str, Any]


def _terms(fit: CompositeFit, z: float) -> dict[str, dict[str, Any]]:
    """Per source its learned terms with Wald intervals (discrimination on the log scale)."""
    out: dict[str, dict[str, Any]] = {}
    for k, name in enumerate(fit.sources):
        terms: dict[str, Any] = {}
        a, a_se = float(fit.discrimination[k]), float(fit.discrimination_se[k])
        if np.isfinite(a_se):
            spread = np.exp(z * a_se / a)
            terms["discrimination"] = {"value": a, "ci_low": a / spread, "ci_high": a * spread}
        else:
            terms["discrimination"] = {"value": a, "fixed": True}
        for key, value, se in (
            ("position", fit.position[k], fit.position_se[k]),
            ("self_preference", fit.self_preference[k], fit.self_preference_se[k]),
        ):
            if np.isfinite(se):
                terms[key] = {
                    "value": float(value),
                    "ci_low": float(value - z * se),
                    "ci_high": float(value + z * se),
                }
        if name in fit.position_fixed:
            terms["position"] = {"value": 0.0, "fixed": True}
        if fit.nu[k] > 0:
            terms["tie_nu"] = {"value": float(fit.nu[k])}
        if k > 0 and k < len(fit.deviation_sd):
            p_value = float(fit.deviation_p_value[k])
            terms["deviation_sd"] = {
                "value": float(fit.deviation_sd[k]),
                "p_value": p_value if np.isfinite(p_value) else None,
            }
        out[name] = terms
    return out


def composite_board(
    data: CompositeData,
    counts_battles: Battles,
    *,
    interval: str = "sandwich",
    n_rounds: int = 1000,
    level: float = 0.95,
    random_state: int = 0,
    options: CompositeOptions = CompositeOptions(),  # noqa: B008 - frozen
    target_half_width: float = TARGET_HALF_WIDTH,
    rectify: str = "",
) -> CompositeBoard:
    """Fit the composite and fill a :class:`Leaderboard` (battles and win rates of ``counts_battles``).

    ``interval``: ``sandwich`` (battle-clustered), ``bootstrap`` (battles resampled, ``n_rounds``) or
    ``none``. The metadata records the sources and their vote counts, each source's learned terms with
    intervals, the effective number of human votes and what each judge is worth.

    ``rectify="ppi"``: the board's ratings and intervals are PPI++'s instead
    (:mod:`leaderboard.composite.ppi`: the human-only target, judges' verdicts as predictions; ``interval``
    picks the PPI++ sandwich, a bootstrap over battles at the tuned lambda, or none); its tuned lambda and the
    human-only fit beside it go under ``ppi`` in the metadata.
    """
    if interval not in ("bootstrap", "sandwich", "none"):
        raise ValueError("interval must be bootstrap, sandwich or none")
    if rectify not in ("", "ppi"):
        raise ValueError(f"unknown rectification {rectify!r}; available: ppi")
    z = float(norm.ppf(0.5 + level / 2))
    fit = fit_composite(data, options)
    rating = fit.rating
    rounds = None
    if rectify:
        low, high = rating.copy(), rating.copy()  # the rectified fit's intervals replace these below
    elif interval == "bootstrap":
        low, high, rounds = bootstrap_composite(
            data, options, rounds=n_rounds, seed=random_state, level=level
        )
    elif interval == "sandwich":
        low, high = fit.intervals(level)
    else:
        low, high = rating.copy(), rating.copy()
    if rectify == "ppi":
        split = ppi_battles(data)
        rectified = fit_ppi(split, scale=options.scale, base=options.base, initial=options.initial)
        rating = rectified.rating
        rounds = None
        if interval == "bootstrap":
            low, high, rounds = bootstrap_ppi(
                split,
                rectified,
                rounds=n_rounds,
                seed=random_state,
                level=level,
                scale=options.scale,
                base=options.base,
                initial=options.initial,
            )
        elif interval == "sandwich":
            low, high = rectified.intervals(level)
        else:
            low, high = rating.copy(), rating.copy()
    counts = np.bincount(data.source, minlength=len(data.sources))
    metadata: dict[str, Any] = {
        "sources": {name: int(counts[k]) for k, name in enumerate(data.sources)},
        "terms": _terms(fit, z),
        "converged": fit.converged,
        "position_fixed": dict(fit.position_fixed),
        "families": {data.sources[k]: f for k, f in data.family.items()},
        "deviation_note": (
            "terms.<judge>.deviation_sd: the spread (rating points) of the judge's own per-model deviations "
            "from the human ratings, a random effect estimated by moments; the intervals and what a judge "
            "is worth carry it, and a judge's discrimination is its steepness on its own view"
            if options.deviations
            else "judges assumed to see the human ratings exactly (deviations off)"
        ),
        **judge_worth(data, options, level=level, target_half_width=target_half_width, full=fit),
    }
    if rectify == "ppi":
        metadata["ppi"] = rectified.describe(level)
    parameters: dict[str, Any] = {
        "level": level,
        "interval": interval,
        "n_rounds": n_rounds if interval == "bootstrap" else 0,
        "random_state": random_state,
        "anchor": None,
        "sources": list(data.sources),
        "optimiser_iterations": fit.n_iter,
    }
    if rectify:
        parameters["rectify"] = rectify
    board = assemble_board(
        counts_battles.counts(),
        rating,
        low,
        high,
        rounds,
        method="composite",
        level=level,
        interval=interval,
        parameters=parameters,
        fitted={},
    )
    return CompositeBoard(board=board, fit=fit, metadata=metadata)


def composite_score(
    train: Battles,
    test: Battles,
    labels: tuple[str, ...],
    *,
    judges: Collection[str],
    families: Mapping[str, str] | None = None,
    options: CompositeOptions = CompositeOptions(),  # noqa: B008 - frozen
    name: str = "composite",
) -> MethodScore:
    """The composite as a row of the held-out comparison
    (:func:`leaderboard.evaluation.held_out.score_system`).

    Fitted on ``train``; every test vote is forecast as its source would vote (a judge's verdicts with
    that judge's steepness, left-side advantage and tie rate, a human's with the human pool's). A judge
    with no training votes cannot be forecast as itself: its test votes are forecast as the humans'.
    The test votes are those every other row scores (:func:`~leaderboard.evaluation.held_out.drop_unseen`), so
    the paired comparison of the verdict applies. ``battles.annotator`` indexes ``labels``.
    """
    from leaderboard.evaluation.held_out import drop_unseen, forecast_log_likelihood, score_system

    if train.annotator is None or test.annotator is None:
        raise ValueError("the composite needs who cast each vote")
    data = composite_data(train, labels, judges=judges, families=families)
    fit = fit_composite(data, options)
    index = {source: k for k, source in enumerate(data.sources)}
    source_of = np.array([index.get(label, 0) for label in labels], dtype=np.int64)

    def forecast(battles: Battles) -> FloatArray:
        if battles.annotator is None:
            raise ValueError("the composite's forecast needs each vote's annotator")
        src = source_of[battles.annotator]
        out = np.empty((len(battles), 3))
        for k in np.unique(src):
            rows = src == k
            out[rows] = fit.probabilities(battles.model_a[rows], battles.model_b[rows], int(k))
        return out

    scored = drop_unseen(train, test)
    z = float(norm.ppf(0.975))
    return score_system(
        name,
        forecast(scored),
        scored.outcome,
        train_loglik=forecast_log_likelihood(forecast(train), train.outcome),
        n_params=len(fit.x),
        n_train=len(train),
        parameters_fitted={
            f"position_{source}": {
                "value": float(fit.position[k]),
                "ci_low": float(fit.position[k] - z * fit.position_se[k]),
                "ci_high": float(fit.position[k] + z * fit.position_se[k]),
            }
            for k, source in enumerate(data.sources)
            if np.isfinite(fit.position_se[k])
        },
        weight=scored.weight,
    )
