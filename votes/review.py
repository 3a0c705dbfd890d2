"""Admin review of annotators over the store: anomalous annotators and the flags on ``Annotator``.

The math lives in :mod:`leaderboard.annotators`; this module reads the votes, runs it, and (on request)
writes the flags. Each annotator also gets its discrimination from the rater-ability model
(:mod:`leaderboard.rater_ability`, every vote in one fit): near 1 an ordinary annotator, near 0 one whose
votes barely follow the ratings (noise, or a contrarian), above 1 a sharp one.

A flagged annotator's votes are kept but stop counting: the live ratings are rebuilt without them and
published fits exclude them by default (``exclude_flagged``). Identity leaks in answers are reviewed by
:mod:`votes.leak_review`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from leaderboard.annotators import FlagRule, annotator_stats, flag_annotators
from leaderboard.battles import Battles
from leaderboard.bt import fit_bt
from leaderboard.data import aggregate_codes, parse_outcome
from leaderboard.presence import PresenceStats, presence_asymmetry
from leaderboard.rater_ability import fit_rater_ability
from leaderboard.spec import BTSpec
from votes.live import LiveConfig
from votes.ratings import rebuild_live_ratings
from votes.tables import annotator_t, battle_t, model_t, vote_t

__all__ = [
    "AUTO_FLAG_PREFIX",
    "AnnotatorRow",
    "review_annotators",
]

#: ``flag_reason`` of flags set by the review, so a later review can tell them from an admin's own.
AUTO_FLAG_PREFIX = "auto: "


@dataclass(frozen=True)
class AnnotatorRow:
    """One annotator in the review (statistics from :func:`leaderboard.annotators.annotator_stats`)."""

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
    # Annotators (this one included) that voted from a network this one voted from (by the votes' keyed
    # address hash): many cookie-fresh annotators behind one address show up here.
    address_group: int = 1
    # The rater-ability model's discrimination (NaN when the votes give no fit); shrunk towards 1 for
    # annotators with few votes.
    discrimination: float = math.nan
    # The model most over-represented among this annotator's votes against everyone else's (a voter who
    # skips battles without it), its share of their votes, the share expected, and the adjusted p-value.
    on_screen: str | None = None
    on_screen_share: float = float("nan")
    on_screen_expected: float = float("nan")
    on_screen_q: float = 1.0


def review_annotators(
    engine: Engine,
    *,
    rule: FlagRule | None = None,
    apply: bool = False,
    elo_config: LiveConfig | None = None,
) -> list[AnnotatorRow]:
    """Test every annotator against a Bradley-Terry fit of the counted votes; optionally flag.

    With ``apply``, annotators the rule marks are flagged with reason ``"auto: ..."`` and the live ratings
    are rebuilt, in one transaction. Flags are only added, never cleared (an admin clears them).
    Returns one row per annotator with votes, suspicious ones first.
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
        if not rows:
            return []
        model_ids = sorted({r[1] for r in rows} | {r[2] for r in rows})
        names = dict(
            conn.execute(select(model_t.c.id, model_t.c.name).where(model_t.c.id.in_(model_ids))).all()
        )
        index = {m: i for i, m in enumerate(model_ids)}
        who = np.array([r[0] for r in rows], dtype=np.int64)
        a = np.array([index[r[1]] for r in rows], dtype=np.int64)
        b = np.array([index[r[2]] for r in rows], dtype=np.int64)
        outcome = np.array([int(parse_outcome(r[3])) for r in rows], dtype=np.int64)
        seconds = np.array([np.nan if r[4] is None else float(r[4]) for r in rows])
        counted = np.array([not r[5] for r in rows], dtype=bool)
        ratings = _fit_ratings(a, b, outcome, counted, len(model_ids))
        s = annotator_stats(who, a, b, outcome, ratings, seconds=seconds)
        by_votes, voting_reasons = flag_annotators(s, rule)
        presence = presence_asymmetry(who, a, b, len(model_ids), min_votes=rule.min_votes)
        suspicious, reasons = _with_presence(
            s.annotators, by_votes, voting_reasons, presence, names, model_ids, rule
        )
        groups = _address_groups((r[0], r[6]) for r in rows)
        discrimination = _discriminations(a, b, outcome, who, len(model_ids))
        info = {
            r[0]: r[1:]
            for r in conn.execute(
                select(
                    annotator_t.c.id,
                    annotator_t.c.kind,
                    annotator_t.c.label,
                    annotator_t.c.flagged,
                    annotator_t.c.flag_reason,
                ).where(annotator_t.c.id.in_(s.annotators.tolist()))
            ).all()
        }
        out: list[AnnotatorRow] = []
        newly: list[tuple[int, str]] = []
        for g, annotator_id in enumerate(s.annotators.tolist()):
            kind, label, flagged, flag_reason = info[annotator_id]
            reason = reasons[g]
            if apply and suspicious[g] and not flagged and reason is not None:
                newly.append((annotator_id, AUTO_FLAG_PREFIX + reason))
                flagged, flag_reason = True, AUTO_FLAG_PREFIX + reason
            fav = int(s.favourite[g])
            out.append(
                AnnotatorRow(
                    annotator_id=annotator_id,
                    kind=kind,
                    label=label,
                    n_votes=int(s.n_votes[g]),
                    left_share=float(s.left_share[g]),
                    median_seconds=float(s.median_seconds[g]),
                    agreement_q=float(s.agreement_qvalue[g]),
                    favouritism_q=float(s.favouritism_qvalue[g]),
                    favourite=names[model_ids[fav]] if fav >= 0 else None,
                    side_q=float(s.side_qvalue[g]),
                    flagged=bool(flagged),
                    flag_reason=flag_reason,
                    suspicious=bool(suspicious[g]),
                    reason=reason,
                    address_group=groups.get(annotator_id, 1),
                    discrimination=discrimination.get(annotator_id, math.nan),
                    on_screen=_model_name(presence.model[g], names, model_ids),
                    on_screen_share=float(presence.share[g]),
                    on_screen_expected=float(presence.expected[g]),
                    on_screen_q=float(presence.qvalue[g]),
                )
            )
        for annotator_id, reason in newly:
            conn.execute(
                update(annotator_t)
                .where(annotator_t.c.id == annotator_id)
                .values(flagged=True, flag_reason=reason)
            )
        if newly:
            rebuild_live_ratings(conn, config=elo_config)
    return sorted(out, key=lambda r: (not r.suspicious, not r.flagged, r.agreement_q, r.annotator_id))


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


def _address_groups(pairs: Iterable[tuple[int, str | None]]) -> dict[int, int]:
    """Per annotator, how many annotators share at least one address hash with it (itself included)."""
    by_hash: dict[str, set[int]] = defaultdict(set)
    hashes: dict[int, set[str]] = defaultdict(set)
    for annotator_id, address_hash in pairs:
        if address_hash is not None:
            by_hash[address_hash].add(annotator_id)
            hashes[annotator_id].add(address_hash)
    return {a: len(set().union(*(by_hash[h] for h in hs))) for a, hs in hashes.items()}


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


def _fit_ratings(
    a: np.ndarray, b: np.ndarray, outcome: np.ndarray, counted: np.ndarray, n_models: int
) -> np.ndarray:
    """Plain Bradley-Terry ratings from the counted votes (all models start level if a fit is impossible)."""
    names = tuple(str(i) for i in range(n_models))
    counts = aggregate_codes(a[counted], b[counted], outcome[counted], models=names)
    spec = BTSpec(prior_sd=400.0)  # a weak prior keeps models with few or one-sided votes finite
    try:
        fitted: np.ndarray = fit_bt(counts, spec=spec).rating
    except (ValueError, RuntimeError):
        fitted = np.full(n_models, 1000.0)
    return fitted
