"""Admin reviews over the store: anomalous annotators (flags on ``Annotator``) and identity leaks.

The math lives in :mod:`leaderboard.annotators` and the text matching in :mod:`votes.leaks`; this module
reads the votes and outputs, runs them, and (on request) writes the flags. A flagged annotator's votes are
kept but stop counting: the live ratings are rebuilt without them and published fits exclude them by
default (``exclude_flagged``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection, Engine

from leaderboard.annotators import FlagRule, annotator_stats, flag_annotators
from leaderboard.bt import fit_bt
from leaderboard.data import aggregate_codes, parse_outcome
from leaderboard.spec import BTSpec
from votes.leaks import IdentityLeak, LeakDetector
from votes.live import LiveConfig
from votes.ratings import rebuild_live_ratings
from votes.tables import annotator_t, battle_t, model_t, output_t, prompt_t, vote_t

__all__ = [
    "AUTO_FLAG_PREFIX",
    "AnnotatorRow",
    "LeakRow",
    "LeakScanner",
    "find_leaks",
    "review_annotators",
]

#: ``flag_reason`` of flags set by the review, so a later review can tell them from an admin's own.
AUTO_FLAG_PREFIX = "auto: "
_EXCERPT = 60


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
        suspicious, reasons = flag_annotators(s, rule)
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


# ------------------------------------------------------------------------------------ identity leaks


@dataclass(frozen=True)
class LeakRow:
    """An output that names its model or maker, with what was found and how many votes it took part in."""

    output_id: int
    prompt: str | None
    model: str
    aliases: tuple[str, ...]
    self_reference: bool
    excerpt: str
    n_votes: int


def _detector(conn: Connection) -> tuple[LeakDetector, dict[int, str]]:
    models = conn.execute(select(model_t.c.id, model_t.c.name, model_t.c.organisation)).all()
    return LeakDetector({name: org for _, name, org in models}), {i: name for i, name, _ in models}


def _excerpt(text: str, leak: IdentityLeak) -> str:
    start = max(0, leak.start - _EXCERPT)
    end = min(len(text), leak.end + _EXCERPT)
    return ("..." if start else "") + " ".join(text[start:end].split()) + ("..." if end < len(text) else "")


def find_leaks(conn: Connection) -> list[LeakRow]:
    """Every output whose text names its own model or maker (see :mod:`votes.leaks`)."""
    detector, names = _detector(conn)
    rows = conn.execute(
        select(output_t.c.id, output_t.c.model_id, output_t.c.text, prompt_t.c.external_id)
        .join(prompt_t, prompt_t.c.id == output_t.c.prompt_id)
        .order_by(output_t.c.id)
    ).all()
    found: list[tuple[int, str | None, str, list[IdentityLeak], str]] = []
    for output_id, model_id, text, external_id in rows:
        model = names[model_id]
        leaks = detector.find(model, text or "")
        if leaks:
            found.append((output_id, external_id, model, leaks, text))
    votes: dict[int, int] = {}
    if found:
        ids = [f[0] for f in found]
        for column in (battle_t.c.output_a_id, battle_t.c.output_b_id):
            stmt = (
                select(column, func.count())
                .select_from(vote_t)
                .join(battle_t, vote_t.c.battle_id == battle_t.c.id)
                .where(column.in_(ids))
                .group_by(column)
            )
            for output_id, n in conn.execute(stmt).all():
                votes[output_id] = votes.get(output_id, 0) + int(n)
    return [
        LeakRow(
            output_id=output_id,
            prompt=external_id,
            model=model,
            aliases=tuple(dict.fromkeys(leak.alias for leak in leaks)),
            self_reference=any(leak.self_reference for leak in leaks),
            excerpt=_excerpt(text, leaks[0]),
            n_votes=votes.get(output_id, 0),
        )
        for output_id, external_id, model, leaks, text in found
    ]


class LeakScanner:
    """Remembers which outputs leak, scanning only outputs it has not seen (outputs never change).

    Pairing asks :meth:`leaking_output_ids` on every refresh; after the first call it costs one query for
    new output ids.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_id = 0
        self._leaking: set[int] = set()

    def leaking_output_ids(self, conn: Connection) -> frozenset[int]:
        with self._lock:
            rows = conn.execute(
                select(output_t.c.id, output_t.c.model_id, output_t.c.text)
                .where(output_t.c.id > self._last_id)
                .order_by(output_t.c.id)
            ).all()
            if rows:
                detector, names = _detector(conn)
                for output_id, model_id, text in rows:
                    if detector.leaks(names[model_id], text or ""):
                        self._leaking.add(output_id)
                self._last_id = max(r[0] for r in rows)
            return frozenset(self._leaking)
