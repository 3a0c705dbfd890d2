"""Agreement between annotators (humans and LLM judges): agreement rates, Cohen's kappa, position
consistency, first-position advantage and self-preference, on the comparisons they share.

A *comparison* is (prompt, unordered model pair). Each vote is turned into a score for the pair's first
model in name order (``+1`` win, ``0`` tie or both bad, ``-1`` loss), whichever side it was shown on. An
annotator's *verdict* on a comparison is the sign of the mean of its scores there, so a judge that
contradicts itself after the position swap counts as a tie, the convention of Zheng et al. (2023),
"Judging LLM-as-a-judge with MT-Bench and Chatbot Arena", Sec. 3.3 and Table 2. Agreement "with ties"
compares the three-way verdicts on every shared comparison; "without ties" only those where neither
side said tie (that paper's "w/o tie" columns).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from leaderboard.battles import Battles
from leaderboard.bt import fit_bt
from leaderboard.compute import METHODS
from leaderboard.data import Outcome
from leaderboard.spec import DisconnectedComparisonError

__all__ = [
    "PairAgreement",
    "PositionReport",
    "cohen_kappa",
    "pair_agreement",
    "position_report",
    "self_preference",
    "verdict_table",
    "vote_scores",
]


def vote_scores(battles: Battles) -> pd.DataFrame:
    """One row per vote: ``annotator, prompt, lo, hi`` (model indices, ``lo < hi``), ``lo_first`` (the
    lower-indexed model was shown first) and ``score`` (+1, 0, -1 for ``lo``).

    Raises
    ------
    ValueError
        ``battles`` lacks annotator or prompt ids.
    """
    if battles.annotator is None or battles.prompt is None:
        raise ValueError("agreement needs each vote's annotator and prompt")
    a, b, outcome = battles.model_a, battles.model_b, battles.outcome
    left_score = np.where(outcome == Outcome.MODEL_A, 1, np.where(outcome == Outcome.MODEL_B, -1, 0))
    lo_first = a < b
    return pd.DataFrame(
        {
            "annotator": battles.annotator,
            "prompt": battles.prompt,
            "lo": np.minimum(a, b),
            "hi": np.maximum(a, b),
            "lo_first": lo_first,
            "score": np.where(lo_first, left_score, -left_score).astype(np.int64),
        }
    )


def verdict_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Comparisons as rows (``prompt, lo, hi``), annotators as columns, verdicts -1/0/+1 (NaN: not judged)."""
    mean = scores.groupby(["prompt", "lo", "hi", "annotator"])["score"].mean()
    table: pd.DataFrame = np.sign(mean).unstack("annotator")
    return table


def cohen_kappa(x: Sequence[int] | np.ndarray, y: Sequence[int] | np.ndarray) -> float:
    """Cohen's kappa of two raters' labels on the same items: ``(p_o - p_e) / (1 - p_e)``.

    ``p_o`` is the observed agreement, ``p_e`` the agreement expected from the raters' marginal label
    rates (Cohen, 1960). NaN for no items, and NaN when ``p_e == 1`` (both always gave one same label).
    """
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
        raise ValueError("both raters need a label for every item")
    if x.size == 0:
        return float("nan")
    p_o = float(np.mean(x == y))
    labels = np.union1d(x, y)
    p_e = float(sum(np.mean(x == k) * np.mean(y == k) for k in labels))
    return float("nan") if p_e == 1.0 else (p_o - p_e) / (1.0 - p_e)


@dataclass(frozen=True)
class PairAgreement:
    """Two annotators on the comparisons both judged."""

    first: str
    second: str
    n_with_ties: int
    agreement_with_ties: float
    kappa_with_ties: float
    n_without_ties: int
    agreement_without_ties: float
    kappa_without_ties: float


def pair_agreement(
    table: pd.DataFrame, first: object, second: object, names: tuple[str, str]
) -> PairAgreement:
    """Agreement of two columns of a :func:`verdict_table` (``names`` label them in the result)."""
    both = table[[first, second]].dropna()
    x, y = both[first].to_numpy(), both[second].to_numpy()
    decisive = (x != 0) & (y != 0)
    nan = float("nan")
    return PairAgreement(
        first=names[0],
        second=names[1],
        n_with_ties=int(x.size),
        agreement_with_ties=float(np.mean(x == y)) if x.size else nan,
        kappa_with_ties=cohen_kappa(x, y),
        n_without_ties=int(decisive.sum()),
        agreement_without_ties=float(np.mean(x[decisive] == y[decisive])) if decisive.any() else nan,
        kappa_without_ties=cohen_kappa(x[decisive], y[decisive]),
    )


@dataclass(frozen=True)
class PositionReport:
    """How one annotator's verdicts depend on the order the answers were shown in.

    ``consistency``: share of comparisons judged in both orders whose two scores agree.
    ``first_win_rate``: share of decisive votes won by the answer shown first (0.5 without bias).
    ``position_elo``: the position term of ``bt-position`` fitted to this annotator's votes, in rating
    points for the first (left) side.
    """

    n_swapped: int
    consistency: float
    n_decisive: int
    first_win_rate: float
    position_elo: float


def position_report(battles: Battles, scores: pd.DataFrame, annotator: int) -> PositionReport:
    """Position consistency, first-position win rate and the ``bt-position`` term of one annotator.

    The position term is NaN when the annotator's votes leave its models disconnected or unbounded
    (someone only won or only lost), where no maximum-likelihood term exists.
    """
    mine = scores[scores["annotator"] == annotator]
    by_order = mine.groupby(["prompt", "lo", "hi", "lo_first"])["score"].mean().unstack("lo_first")
    swapped = by_order.dropna() if by_order.shape[1] == 2 else by_order.iloc[0:0]
    n_swapped = len(swapped)
    consistency = float((swapped[True] == swapped[False]).mean()) if n_swapped else float("nan")
    first_score = np.where(mine["lo_first"], mine["score"], -mine["score"])
    decisive = first_score != 0
    own = battles.take(np.flatnonzero(battles.annotator == annotator))
    used, index = np.unique(np.concatenate([own.model_a, own.model_b]), return_inverse=True)
    n = len(own)
    own = replace(own, models=tuple(own.models[i] for i in used), model_a=index[:n], model_b=index[n:])
    try:
        fit = fit_bt(own.counts(), spec=METHODS["bt-position"])
        position_elo = fit.extras_of(fit.x)["position_advantage_elo"]
    except DisconnectedComparisonError:
        position_elo = float("nan")
    return PositionReport(
        n_swapped=n_swapped,
        consistency=consistency,
        n_decisive=int(decisive.sum()),
        first_win_rate=float(np.mean(first_score[decisive] > 0)) if decisive.any() else float("nan"),
        position_elo=position_elo,
    )


def self_preference(
    table: pd.DataFrame, judge: object, family: Collection[int], reference: Sequence[object]
) -> tuple[int, float, float]:
    """How much ``judge`` favours its own family's answers, beyond what ``reference`` annotators give them.

    On comparisons of one family model with an outsider that the judge and at least one reference
    annotator judged, each verdict becomes the family side's score (1 win, 0.5 tie, 0 loss); the
    reference score of a comparison is the mean over the reference annotators who judged it.

    Returns
    -------
    (n_comparisons, judge_score, reference_score)
        Self-preference is ``judge_score - reference_score`` (NaN scores for no comparisons).
    """
    lo = table.index.get_level_values("lo").isin(list(family))
    hi = table.index.get_level_values("hi").isin(list(family))
    mixed = table[lo != hi]
    sign = np.where(mixed.index.get_level_values("lo").isin(list(family)), 1.0, -1.0)
    judge_v = mixed[judge].to_numpy() * sign
    ref_v = mixed[list(reference)].mean(axis=1, skipna=True).to_numpy() * sign
    # A reference mean of several verdicts is a score in [-1, 1] as well.
    keep = ~np.isnan(judge_v) & ~np.isnan(ref_v)
    if not keep.any():
        return 0, float("nan"), float("nan")
    return int(keep.sum()), float(np.mean((judge_v[keep] + 1) / 2)), float(np.mean((ref_v[keep] + 1) / 2))
