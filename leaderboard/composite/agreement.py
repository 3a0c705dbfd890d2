"""Agreement between annotators (humans and LLM judges): agreement rates, Cohen's kappa, position
consistency, first-position advantage and self-preference, on the comparisons they share.

A *comparison* is (prompt, unordered model pair). Each vote is turned into a score for the pair's first
model in name order (``+1`` win, ``0`` tie or both bad, ``-1`` loss), whichever side it was shown on. An
annotator's *verdict* on a comparison is the sign of the mean of its scores there, so a judge that
contradicts itself after the position swap counts as a tie, the convention of Zheng et al. (2023),
"Judging LLM-as-a-judge with MT-Bench and Chatbot Arena", Sec. 3.3 and Table 2. Agreement "with ties"
compares the three-way verdicts on every shared comparison; "without ties" only those where neither
side said tie (that paper's "w/o tie" columns).

:func:`agreement_report` is the one report built from these pieces: ``arena agreement`` prints it and a
published snapshot carries it (``metadata.json`` section and ``agreement.csv`` / ``agreement.json``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from leaderboard.battles import Battles
from leaderboard.bt.fit import fit_bt
from leaderboard.bt.request import METHODS
from leaderboard.bt.spec import DisconnectedComparisonError, NonConvergenceError, UnboundedRatingWarning
from leaderboard.composite.agreement_stats import (
    Interval,
    cohen_kappa,
    cohen_kappa_interval,
    item_counts,
    multi_rater,
    rate_interval,
    rate_intervals,
)
from leaderboard.data import Outcome

__all__ = [
    "AGREEMENT_CSV",
    "AGREEMENT_JSON",
    "AgreementReport",
    "AgreementStats",
    "BASELINES",
    "AnnotatorStats",
    "GroupStats",
    "agreement_statistics",
    "majority_hits",
    "JudgeRow",
    "PairAgreement",
    "PositionReport",
    "agreement_report",
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
    kappa_with_ties_low: float = float("nan")
    kappa_with_ties_high: float = float("nan")
    kappa_without_ties_low: float = float("nan")
    kappa_without_ties_high: float = float("nan")


def pair_agreement(
    table: pd.DataFrame, first: object, second: object, names: tuple[str, str]
) -> PairAgreement:
    """Agreement of two columns of a :func:`verdict_table` (``names`` label them in the result)."""
    both = table[[first, second]].dropna()
    x, y = both[first].to_numpy(), both[second].to_numpy()
    decisive = (x != 0) & (y != 0)
    nan = float("nan")
    with_ties = cohen_kappa_interval(x.astype(np.int64), y.astype(np.int64))
    without = cohen_kappa_interval(x[decisive].astype(np.int64), y[decisive].astype(np.int64))
    return PairAgreement(
        first=names[0],
        second=names[1],
        n_with_ties=int(x.size),
        agreement_with_ties=float(np.mean(x == y)) if x.size else nan,
        kappa_with_ties=cohen_kappa(x, y),
        n_without_ties=int(decisive.sum()),
        agreement_without_ties=float(np.mean(x[decisive] == y[decisive])) if decisive.any() else nan,
        kappa_without_ties=cohen_kappa(x[decisive], y[decisive]),
        kappa_with_ties_low=with_ties.low,
        kappa_with_ties_high=with_ties.high,
        kappa_without_ties_low=without.low,
        kappa_without_ties_high=without.high,
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
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnboundedRatingWarning)  # no finite term: say so, no ridge guess
            fit = fit_bt(own.counts(), spec=METHODS["bt-position"])
        position_elo = fit.extras_of(fit.x)["position_advantage_elo"]
    except (DisconnectedComparisonError, NonConvergenceError, UnboundedRatingWarning):
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


#: The report's files in a snapshot: the pairwise table as CSV, the whole report as JSON.
AGREEMENT_CSV = "agreement.csv"
AGREEMENT_JSON = "agreement.json"
_DECIMALS = 6  # as the snapshot's other files: rounded once, so the bytes do not carry float noise
#: The group every human annotator is pooled into (few humans vote twice on the same comparison).
HUMANS = "humans"


@dataclass(frozen=True)
class JudgeRow:
    """One judge's line of the report: its votes, position bias and self-preference."""

    judge: str
    n_votes: int
    n_swapped: int
    position_consistency: float
    first_win_rate: float
    position_elo: float
    own_family: list[str]
    self_reference: str
    n_self: int
    own_score_judge: float
    own_score_reference: float
    self_preference: float


@dataclass(frozen=True)
class AgreementReport:
    """Agreement of every two annotator groups (humans pooled, each judge alone) and one row per judge."""

    pairs: tuple[PairAgreement, ...]
    judges: tuple[JudgeRow, ...]
    #: Judges whose votes the board beside this report counts (the caller knows; none by default).
    judges_in_board: tuple[str, ...] = ()
    #: Multi-rater figures with intervals, per slice and per annotator (when asked for).
    stats: AgreementStats | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain values for JSON; NaN (nothing to measure) becomes None."""
        return {
            "agreement": [_plain(asdict(p)) for p in self.pairs],
            "judges": [_plain(asdict(r)) for r in self.judges],
            "judges_in_board": list(self.judges_in_board),
            **({} if self.stats is None else {"statistics": self.stats.as_dict()}),
        }

    def csv_bytes(self) -> bytes:
        """The pairwise table (``first, second`` and the figures), one row per two groups."""
        rows = [asdict(p) for p in self.pairs]
        columns = list(PairAgreement.__dataclass_fields__)
        frame = pd.DataFrame(rows, columns=columns).round(_DECIMALS)
        return frame.to_csv(index=False, lineterminator="\n", na_rep="").encode("utf-8")


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    def one(v: Any) -> Any:
        if isinstance(v, float):
            return None if np.isnan(v) else round(v, _DECIMALS)
        return v

    return {k: one(v) for k, v in row.items()}


def agreement_report(
    battles: Battles,
    labels: Sequence[str],
    *,
    is_judge: Callable[[str], bool],
    family_of: Callable[[str], int | None],
) -> AgreementReport:
    """The agreement report of annotated votes (``battles.annotator`` indexes ``labels``).

    Humans (every label ``is_judge`` refuses) are pooled into one group; each judge is its own group.
    Per judge: position consistency, first-position win rate, the ``bt-position`` term, and
    self-preference on its own family's models (``family_of`` maps a judge label or a model name to a
    family, None for none) against the humans, or against the other judges when there are no humans.
    """
    if battles.annotator is None:
        raise ValueError("agreement needs each vote's annotator and prompt")
    judges = [i for i, label in enumerate(labels) if is_judge(label)]
    humans = [i for i, label in enumerate(labels) if not is_judge(label)]
    group = np.where(np.isin(battles.annotator, humans), -1, battles.annotator)
    pooled = replace(battles, annotator=group)
    scores = vote_scores(pooled)
    table = verdict_table(scores)
    names = {-1: HUMANS, **{i: labels[i] for i in judges}}
    present = set(np.unique(group).tolist())
    columns = [c for c in ([-1] if humans else []) + judges if c in present]
    pairs = tuple(
        pair_agreement(table, x, y, (names[x], names[y]))
        for k, x in enumerate(columns)
        for y in columns[k + 1 :]
    )
    rows = []
    for j in (j for j in judges if j in present):
        position = position_report(pooled, scores, j)
        family = family_of(labels[j])
        own = [m for m, name in enumerate(battles.models) if family is not None and family_of(name) == family]
        reference: list[object] = [-1] if -1 in present else [k for k in judges if k != j and k in present]
        n_self, judge_score, ref_score = self_preference(table, j, own, reference)
        rows.append(
            JudgeRow(
                judge=labels[j],
                n_votes=int((group == j).sum()),
                n_swapped=position.n_swapped,
                position_consistency=position.consistency,
                first_win_rate=position.first_win_rate,
                position_elo=position.position_elo,
                own_family=[battles.models[m] for m in own],
                self_reference=HUMANS if -1 in present else "other judges",
                n_self=n_self,
                own_score_judge=judge_score,
                own_score_reference=ref_score,
                self_preference=judge_score - ref_score,
            )
        )
    return AgreementReport(pairs=pairs, judges=tuple(rows))


def majority_hits(scores: pd.DataFrame) -> npt.NDArray[np.float64]:
    """Per vote: agreement with the majority of the *other* annotators' votes on its item (its own
    annotator's votes there left out); a tied majority scores the vote's share of the modal classes
    (1/2 when it is one of two), NaN when no other annotator voted on the item."""
    item = scores.groupby(["prompt", "lo", "hi"], sort=False).ngroup().to_numpy()
    own = scores.groupby(["prompt", "lo", "hi", "annotator"], sort=False).ngroup().to_numpy()
    label = scores["score"].to_numpy().astype(np.int64) + 1
    n_item, n_own = int(item.max()) + 1, int(own.max()) + 1
    per_item = np.bincount(item * 3 + label, minlength=n_item * 3).reshape(n_item, 3)
    per_own = np.bincount(own * 3 + label, minlength=n_own * 3).reshape(n_own, 3)
    others = per_item[item] - per_own[own]
    top = others.max(axis=1)
    modal = (others == top[:, None]) & (top[:, None] > 0)
    n_modal = modal.sum(axis=1)
    hit = modal[np.arange(len(label)), label] / np.maximum(n_modal, 1)
    return np.where(n_modal > 0, hit, np.nan)


@dataclass(frozen=True)
class AnnotatorStats:
    """One annotator against the others' majority, and its leanings (shares of its decisive votes)."""

    annotator: str
    n_votes: int
    vs_majority: Interval
    prefer_first: Interval
    prefer_longer: Interval


@dataclass(frozen=True)
class GroupStats:
    """The multi-rater figures of one slice of the votes (``all``, ``category:<c>``, ``language:<l>``)."""

    group: str
    n_votes: int
    n_annotators: int
    figures: dict[str, Interval]


@dataclass(frozen=True)
class AgreementStats:
    """Agreement figures with 95% bootstrap intervals: per slice of the votes and per annotator."""

    groups: tuple[GroupStats, ...]
    annotators: tuple[AnnotatorStats, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "groups": [
                {
                    "group": g.group,
                    "n_votes": g.n_votes,
                    "n_annotators": g.n_annotators,
                    **{k: v.as_dict() for k, v in g.figures.items()},
                }
                for g in self.groups
            ],
            "annotators": [
                {
                    "annotator": a.annotator,
                    "n_votes": a.n_votes,
                    "vs_majority": a.vs_majority.as_dict(),
                    "prefer_first": a.prefer_first.as_dict(),
                    "prefer_longer": a.prefer_longer.as_dict(),
                }
                for a in self.annotators
            ],
        }


#: The figures of a slice beyond :data:`MULTI_RATER`.
BASELINES = ("vs_majority", "prefer_first", "prefer_longer")


def _leanings(
    group: npt.NDArray[np.int64],
    n_groups: int,
    item: npt.NDArray[np.int64],
    scores: pd.DataFrame,
    longer_left: npt.NDArray[np.int64] | None,
    seed: int,
) -> tuple[list[Interval], list[Interval]]:
    """Per group: the share of decisive votes for the answer shown first, and for the longer answer."""
    first = np.where(scores["lo_first"].to_numpy(), scores["score"].to_numpy(), -scores["score"].to_numpy())
    decisive = first != 0
    prefer_first = rate_intervals(group[decisive], item[decisive], first[decisive] > 0, n_groups, seed=seed)
    if longer_left is None:
        return prefer_first, [Interval(float("nan"), float("nan"), float("nan"), 0)] * n_groups
    # the left answer won when first > 0; the longer one when that agrees with longer_left
    known = decisive & (longer_left != 0)
    hit = (first[known] * longer_left[known]) > 0
    return prefer_first, rate_intervals(group[known], item[known], hit, n_groups, seed=seed)


def agreement_statistics(
    battles: Battles,
    labels: Sequence[str],
    *,
    slices: dict[str, npt.NDArray[np.object_]] | None = None,
    longer_left: npt.NDArray[np.int64] | None = None,
    seed: int = 0,
) -> AgreementStats:
    """Every annotator alike (humans and judges; a judge's two orders are two votes): the multi-rater
    figures and baselines of all votes and of each slice (``slices`` maps a name such as ``category`` to
    one value per vote, None for none), and each annotator against the leave-one-out majority.

    ``longer_left`` per vote: +1 the left answer is longer, -1 the right one, 0 equal or unknown (None:
    no texts, no prefer-longer figure).
    """
    scores = vote_scores(battles)
    item = scores.groupby(["prompt", "lo", "hi"], sort=False).ngroup().to_numpy().astype(np.int64)
    hits = majority_hits(scores)
    label = scores["score"].to_numpy()
    annotator = scores["annotator"].to_numpy()

    def one(name: str, mask: npt.NDArray[np.bool_]) -> GroupStats:
        figures = multi_rater(item_counts(item[mask], label[mask]), seed=seed)
        known = mask & ~np.isnan(hits)
        figures["vs_majority"] = rate_interval(item[known], hits[known], seed=seed)
        longer = None if longer_left is None else longer_left[mask]
        zero = np.zeros(int(mask.sum()), dtype=np.int64)
        (first,), (long,) = _leanings(zero, 1, item[mask], scores[mask], longer, seed)
        figures["prefer_first"], figures["prefer_longer"] = first, long
        return GroupStats(name, int(mask.sum()), len(np.unique(annotator[mask])), figures)

    groups = [one("all", np.ones(len(label), dtype=bool))]
    for key, values in (slices or {}).items():
        present = sorted({str(v) for v in values if v is not None})
        for value in present:
            groups.append(
                one(f"{key}:{value}", np.array([v is not None and str(v) == value for v in values]))
            )
    who, index = np.unique(annotator, return_inverse=True)
    index = index.ravel().astype(np.int64)
    known = ~np.isnan(hits)
    vs = rate_intervals(index[known], item[known], hits[known], len(who), seed=seed)
    first, longer = _leanings(index, len(who), item, scores, longer_left, seed)
    counts = np.bincount(index, minlength=len(who))
    people = [
        AnnotatorStats(labels[int(a)], int(counts[k]), vs[k], first[k], longer[k]) for k, a in enumerate(who)
    ]
    return AgreementStats(tuple(groups), tuple(people))
