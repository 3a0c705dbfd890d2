"""Admin review of annotators over the store: anomalous annotators and the flags on ``Annotator``.

The math lives in :mod:`leaderboard.quality.voter_review` and, for gold battles,
:mod:`leaderboard.quality.gold` (via :mod:`votes.review.gold_review`); this module reads the votes (with the
battles each annotator was shown and did not vote on, and the keyed address hash of each vote), runs both, and
(on request) writes the flags and retires the golds good annotators keep missing. Each annotator also gets its
discrimination from the rater-ability model (:mod:`leaderboard.quality.rater_ability`, every vote in one fit):
near 1 an ordinary annotator, near 0 one whose votes barely follow the ratings (noise, or a contrarian), above
1 a sharp one. One list, one reason per annotator: a gold flag's reason comes first, being the most direct
evidence. Self-agreement on repeat battles (:mod:`votes.voting.repeat_votes`: an own earlier battle shown
again with the sides swapped) joins each row; it is a reason only with at least 10 repeats and a 95% Wilson
upper bound below 60% (:class:`votes.voting.repeat_votes.SelfAgreementRule`), since a coin agrees with itself
half the time and a voter who always clicks one side never does. A flagged annotator's votes are
shadow-excluded: they stay stored and listed here for the maintainers, but stop counting: the live ratings are
rebuilt without them and published fits leave them out by default (``exclude_flagged``). Identity leaks in
answers are reviewed by :mod:`votes.review.leak_review`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Connection, Engine

from leaderboard.battles import Battles
from leaderboard.data import parse_outcome
from leaderboard.quality.annotators import FlagRule
from leaderboard.quality.presence import PresenceStats, presence_asymmetry
from leaderboard.quality.rater_ability import fit_rater_ability
from leaderboard.quality.voter_review import review_voters
from votes.review.gold_review import AnnotatorGold, annotator_gold_accuracy, retire_missed_golds
from votes.tables import annotator_t, battle_t, model_t, vote_t
from votes.voting.annotators import APART_SOURCES
from votes.voting.live import LiveConfig
from votes.voting.ratings import rebuild_live_ratings
from votes.voting.repeat_votes import SelfAgreement, SelfAgreementRule, annotator_self_agreement

__all__ = [
    "AUTO_FLAG_PREFIX",
    "AnnotatorRow",
    "review_annotators",
]

log = logging.getLogger(__name__)

#: ``flag_reason`` of flags set by the review, so a later review can tell them from an admin's own.
AUTO_FLAG_PREFIX = "auto: "


@dataclass(frozen=True)
class AnnotatorRow:
    """One annotator in the review (statistics from :func:`leaderboard.quality.annotators.annotator_stats`).

    ``agreement_q`` is the q-value of the ``disagrees`` test (agreement with the crowd and tie share),
    ``favouritism_q`` that of the per-model test (``favourite``: the model, ``favours`` > 0 for it, < 0
    against it), ``skip_q`` that of the skip test. ``honest_weight`` is the weight of the robust fit.
    """

    annotator_id: int
    kind: str
    label: str | None
    n_votes: int
    left_share: float
    median_seconds: float
    agreement_q: float
    favouritism_q: float
    favourite: str | None
    side_q: float
    flagged: bool
    flag_reason: str | None
    suspicious: bool
    reason: str | None
    # Annotators (this one included) joined to this one through shared networks (by the votes' keyed
    # address hash): many cookie-fresh annotators behind one address show up here, and are also tested
    # pooled as one group.
    address_group: int = 1
    # The rater-ability model's discrimination (NaN when the votes give no fit); shrunk towards 1 for
    # annotators with few votes.
    discrimination: float = math.nan
    n_seen: int = 0
    skip_q: float = 1.0
    favours: float = float("nan")
    tie_share: float = float("nan")
    agreement_share: float = float("nan")
    honest_weight: float = 1.0
    # The model most over-represented among this annotator's votes against everyone else's (a voter who
    # skips battles without it, where skips leave no row), its share of their votes, the share expected,
    # and the adjusted p-value.
    on_screen: str | None = None
    on_screen_share: float = float("nan")
    on_screen_expected: float = float("nan")
    on_screen_q: float = 1.0
    # Gold battles: voted, voted right, accuracy and its 95% Wilson interval (NaN without golds).
    n_gold: int = 0
    gold_right: int = 0
    gold_accuracy: float = float("nan")
    gold_low: float = float("nan")
    gold_high: float = float("nan")
    # Repeat battles: voted, agreeing with the first vote, the share and its 95% Wilson interval.
    n_repeat: int = 0
    repeat_agreed: int = 0
    self_agreement: float = float("nan")
    self_agreement_low: float = float("nan")
    self_agreement_high: float = float("nan")


def review_annotators(
    engine: Engine,
    *,
    rule: FlagRule | None = None,
    apply: bool = False,
    elo_config: LiveConfig | None = None,
    repeat_rule: SelfAgreementRule | None = None,
) -> list[AnnotatorRow]:
    """Review every annotator with votes (:func:`leaderboard.quality.voter_review.review_voters`); optionally
    flag.

    The first fit uses the counted votes (not already flagged). With ``apply``, annotators the review marks
    are flagged with reason ``"auto: ..."``, every reviewed annotator's ``honest_weight`` is stored (what
    the robust fit weighs its votes by) and the live ratings are rebuilt, in one transaction. Flags are
    only added, never cleared (an admin clears them). Returns one row per annotator with votes, suspicious
    ones first. A low self-agreement on repeat battles (``repeat_rule``) makes a row suspicious too.
    """
    rule = rule or FlagRule()
    with engine.begin() as conn:
        rows = conn.execute(
            select(
                battle_t.c.annotator_id,
                battle_t.c.model_a_id,
                battle_t.c.model_b_id,
                vote_t.c.winner,
                vote_t.c.seconds_to_vote,
                annotator_t.c.flagged,
                vote_t.c.address_hash,
            )
            .select_from(vote_t)
            .join(battle_t, vote_t.c.battle_id == battle_t.c.id)
            .join(annotator_t, annotator_t.c.id == battle_t.c.annotator_id)
            .order_by(vote_t.c.id)
        ).all()
        golds = annotator_gold_accuracy(conn)
        repeats = annotator_self_agreement(conn)
        if not rows and not golds:
            return []
        stat_rows = _stat_rows(conn, rows, rule) if rows else []
        gold_only = sorted(set(golds) - {r.annotator_id for r in stat_rows})
        info = _annotator_info(conn, gold_only)
        stat_rows += [
            AnnotatorRow(
                annotator_id=a,
                kind=info[a][0],
                label=info[a][1],
                n_votes=0,
                left_share=float("nan"),
                median_seconds=float("nan"),
                agreement_q=float("nan"),
                favouritism_q=float("nan"),
                favourite=None,
                side_q=float("nan"),
                flagged=bool(info[a][2]),
                flag_reason=info[a][3],
                suspicious=False,
                reason=None,
            )
            for a in gold_only
        ]
        out: list[AnnotatorRow] = []
        newly: list[tuple[int, str]] = []
        for row in stat_rows:
            row = _with_gold(row, golds.get(row.annotator_id))
            row = _with_repeats(row, repeats.get(row.annotator_id), repeat_rule)
            if apply and row.suspicious and not row.flagged and row.reason is not None:
                reason = AUTO_FLAG_PREFIX + row.reason
                newly.append((row.annotator_id, reason))
                row = replace(row, flagged=True, flag_reason=reason)
            out.append(row)
        if apply:
            for gold, why in retire_missed_golds(conn):
                log.warning("retired gold %d: %s", gold, why)
        for annotator_id, reason in newly:
            conn.execute(
                update(annotator_t)
                .where(annotator_t.c.id == annotator_id)
                .values(flagged=True, flag_reason=reason)
            )
        if apply and out:  # every reviewed annotator's weight, for the robust fit (``--robust``)
            conn.execute(
                update(annotator_t)
                .where(annotator_t.c.id == bindparam("reviewed"))
                .values(honest_weight=bindparam("weight")),
                [{"reviewed": r.annotator_id, "weight": r.honest_weight} for r in out],
            )
        if newly:
            rebuild_live_ratings(conn, config=elo_config)
    return sorted(out, key=_review_order)


def _review_order(r: AnnotatorRow) -> tuple[bool, bool, float, int]:
    """Suspicious first, then flagged, then by agreement q-value (annotators without one last)."""
    q = r.agreement_q if r.agreement_q == r.agreement_q else float("inf")
    return (not r.suspicious, not r.flagged, q, r.annotator_id)


def _with_gold(row: AnnotatorRow, gold: AnnotatorGold | None) -> AnnotatorRow:
    """The row with the annotator's gold record; a gold flag makes it suspicious, with the gold reason.

    The honest weight is multiplied by the gold record's posterior of honesty: a guesser the flag rule
    has not caught yet (too few golds) already weighs little in the robust fit and the down-weighted
    board (``scripts/gold_sim.py``: at 20 golds per annotator, the rating error with flagged votes
    removed is 1.077 times a clean crowd's, and 1.016 times with the rest weighted so)."""
    if gold is None:
        return row
    row = replace(
        row,
        honest_weight=row.honest_weight * gold.posterior,
        n_gold=gold.n_gold,
        gold_right=gold.n_right,
        gold_accuracy=gold.accuracy,
        gold_low=gold.low,
        gold_high=gold.high,
    )
    return replace(row, suspicious=True, reason=gold.reason()) if gold.flagged else row


def _with_repeats(
    row: AnnotatorRow, repeats: SelfAgreement | None, rule: SelfAgreementRule | None
) -> AnnotatorRow:
    """The row with the annotator's self-agreement; a low one (enough repeats, :meth:`SelfAgreement.is_low`)
    makes it suspicious, its reason added after any other."""
    if repeats is None:
        return row
    row = replace(
        row,
        n_repeat=repeats.n_repeat,
        repeat_agreed=repeats.n_agreed,
        self_agreement=repeats.share,
        self_agreement_low=repeats.low,
        self_agreement_high=repeats.high,
    )
    if not repeats.is_low(rule):
        return row
    reason = repeats.reason() if row.reason is None else f"{row.reason}; {repeats.reason()}"
    return replace(row, suspicious=True, reason=reason)


def _annotator_info(conn: Connection, ids: list[int]) -> dict[int, tuple[str, str | None, bool, str | None]]:
    """(kind, label, flagged, flag reason) of these annotators."""
    if not ids:
        return {}
    stmt = select(
        annotator_t.c.id,
        annotator_t.c.kind,
        annotator_t.c.label,
        annotator_t.c.flagged,
        annotator_t.c.flag_reason,
    ).where(annotator_t.c.id.in_(ids))
    return {int(r[0]): (r[1], r[2], bool(r[3]), r[4]) for r in conn.execute(stmt).all()}


def _stat_rows(conn: Connection, rows: Sequence[Any], rule: FlagRule) -> list[AnnotatorRow]:
    """The vote statistics of every annotator with counted-table votes (before gold records are joined)."""
    # Battles shown and not voted on (live battles are stored when issued; a site battle only with
    # its vote, so its skips leave no row).
    skipped_rows = conn.execute(
        select(battle_t.c.annotator_id, battle_t.c.model_a_id, battle_t.c.model_b_id)
        .select_from(battle_t.outerjoin(vote_t, vote_t.c.battle_id == battle_t.c.id))
        .where(
            vote_t.c.id.is_(None),
            battle_t.c.annotator_id.is_not(None),
            battle_t.c.source.not_in(APART_SOURCES),  # a gold's or repeat's vote is stored apart: no skip
        )
    ).all()
    model_ids = sorted({r[1] for r in rows} | {r[2] for r in rows})
    names = dict(conn.execute(select(model_t.c.id, model_t.c.name).where(model_t.c.id.in_(model_ids))).all())
    index = {m: i for i, m in enumerate(model_ids)}
    skipped_rows = [r for r in skipped_rows if r[1] in index and r[2] in index]
    who = np.array([r[0] for r in rows], dtype=np.int64)
    a = np.array([index[r[1]] for r in rows], dtype=np.int64)
    b = np.array([index[r[2]] for r in rows], dtype=np.int64)
    outcome = np.array([int(parse_outcome(r[3])) for r in rows], dtype=np.int64)
    seconds = np.array([np.nan if r[4] is None else float(r[4]) for r in rows])
    counted = np.array([not r[5] for r in rows], dtype=bool)
    codes: dict[str, int] = {}
    address = np.array(
        [-1 if r[6] is None else codes.setdefault(r[6], len(codes)) for r in rows], dtype=np.int64
    )
    skipped = (
        np.array([r[0] for r in skipped_rows], dtype=np.int64),
        np.array([index[r[1]] for r in skipped_rows], dtype=np.int64),
        np.array([index[r[2]] for r in skipped_rows], dtype=np.int64),
    )
    review = review_voters(
        who,
        a,
        b,
        outcome,
        len(model_ids),
        counted=counted,
        seconds=seconds,
        skipped=skipped,
        address=address,
        rule=rule,
    )
    s = review.stats
    presence = presence_asymmetry(who, a, b, len(model_ids), min_votes=rule.min_votes)
    flagged_by_review, reasons = _with_presence(
        s.annotators, review.flagged, review.reasons, presence, names, model_ids, rule
    )
    info = _annotator_info(conn, s.annotators.tolist())
    discrimination = _discriminations(a, b, outcome, who, len(model_ids))
    rows_out: list[AnnotatorRow] = []
    for g, annotator_id in enumerate(s.annotators.tolist()):
        kind, label, flagged, flag_reason = info[annotator_id]
        reason = reasons[g]
        suspicious = bool(flagged_by_review[g])
        rows_out.append(
            AnnotatorRow(
                annotator_id=annotator_id,
                kind=kind,
                label=label,
                n_votes=int(s.n_votes[g]),
                left_share=float(s.left_share[g]),
                median_seconds=float(s.median_seconds[g]),
                agreement_q=float(s.noise_qvalue[g]),
                favouritism_q=float(s.favouritism_qvalue[g]),
                favourite=_model_name(s.favourite[g], names, model_ids),
                side_q=float(s.side_qvalue[g]),
                flagged=bool(flagged),
                flag_reason=flag_reason,
                suspicious=suspicious,
                reason=reason,
                address_group=int(review.group_size[g]),
                n_seen=int(s.n_seen[g]),
                skip_q=float(s.skip_qvalue[g]),
                favours=float(s.favouritism_z[g]),
                tie_share=float(s.tie_share[g]),
                agreement_share=float(s.agreement_share[g]),
                honest_weight=float(review.weights[g]),
                discrimination=discrimination.get(annotator_id, math.nan),
                on_screen=_model_name(presence.model[g], names, model_ids),
                on_screen_share=float(presence.share[g]),
                on_screen_expected=float(presence.expected[g]),
                on_screen_q=float(presence.qvalue[g]),
            )
        )
    return rows_out


def _discriminations(
    a: np.ndarray, b: np.ndarray, outcome: np.ndarray, who: np.ndarray, n_models: int
) -> dict[int, float]:
    """Each annotator's discrimination in one rater-ability fit of every vote (flagged ones too: the
    review is about them); empty when the votes give no fit (one model, a model that only wins)."""
    battles = Battles(
        models=tuple(str(i) for i in range(n_models)), model_a=a, model_b=b, outcome=outcome, annotator=who
    )
    try:
        fit = fit_rater_ability(battles, standard_errors=False)
    except (ValueError, RuntimeError):
        return {}
    return {int(k): float(d) for k, d in zip(fit.annotators, fit.discrimination, strict=True)}


def _with_presence(
    annotators: np.ndarray,
    suspicious: np.ndarray,
    reasons: Sequence[str | None],
    presence: PresenceStats,
    names: dict[int, str],
    model_ids: list[int],
    rule: FlagRule,
) -> tuple[np.ndarray, list[str | None]]:
    """Add the skip-asymmetry finding to the review's verdicts (same false discovery rate as the rest)."""
    if not np.array_equal(annotators, presence.annotators):
        raise ValueError("annotator order differs between the review and the presence test")
    suspicious = suspicious.copy()
    reasons = list(reasons)
    for g in np.flatnonzero(presence.qvalue < rule.alpha):
        name = names[model_ids[int(presence.model[g])]]
        why = (
            f"votes mostly when {name} is on screen ({presence.share[g]:.0%} of votes, "
            f"{presence.expected[g]:.0%} expected)"
        )
        suspicious[g] = True
        reasons[g] = why if reasons[g] is None else f"{reasons[g]}; {why}"
    return suspicious, reasons


def _model_name(index: np.integer | int, names: dict[int, str], model_ids: list[int]) -> str | None:
    return names[model_ids[int(index)]] if index >= 0 else None
