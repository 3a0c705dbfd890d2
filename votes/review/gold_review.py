"""What the gold votes say: each annotator's accuracy (and the flag rule), each gold's record, retirement.

The statistics are :mod:`leaderboard.quality.gold`'s (Wilson interval, the sequential flag rule); this module
reads the gold votes in time order and hands them over. :func:`annotator_gold_accuracy` feeds the annotator
review (:mod:`votes.review.voters`), so gold accuracy is one more reason in the one list of annotators.
:func:`retire_missed_golds` retires a gold that annotators who are right on the other golds keep missing:
such a gold is more likely wrong (or ambiguous) than they are. :func:`retire_golds` runs it in a
transaction of its own and logs each gold it retires: the live site runs it periodically (with the
pairing catalog's refresh, :class:`arena.voting.pairing_service.PairingService`) and every publish runs it, so
retirement never waits for ``arena annotators --apply``; retired golds are listed, with their reason,
by ``arena gold list`` and the admin API.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

from leaderboard.quality.gold import GoldRule, gold_accuracy, honest_posterior
from votes.tables import goldbattle_t, goldvote_t

__all__ = [
    "AnnotatorGold",
    "GoldItemRow",
    "RetireRule",
    "annotator_gold_accuracy",
    "gold_item_rows",
    "retire_golds",
    "retire_missed_golds",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnnotatorGold:
    """One annotator's gold record: golds voted, right, accuracy with its 95% Wilson interval, the flag,
    and the posterior probability of being honest (:func:`leaderboard.quality.gold.honest_posterior`)."""

    n_gold: int
    n_right: int
    accuracy: float
    low: float
    high: float
    flagged: bool
    posterior: float = 1.0

    def reason(self) -> str:
        return (
            f"gold accuracy {self.n_right} of {self.n_gold} "
            f"({self.accuracy:.0%}, 95% {self.low:.0%}-{self.high:.0%}), below an honest annotator's"
        )


@dataclass(frozen=True)
class GoldItemRow:
    """One gold as `arena gold list` and the admin page show it."""

    gold_id: int
    kind: str
    detail: str | None
    source: str
    right: str
    n_votes: int
    n_right: int
    retired: bool
    retired_reason: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RetireRule:
    """A gold is retired when at least ``min_votes`` good annotators voted on it and more than
    ``max_miss`` of them missed it; a good annotator has ``min_golds`` golds or more and a Wilson lower
    bound of at least ``good_low``."""

    min_golds: int = 5
    good_low: float = 0.6
    min_votes: int = 3
    max_miss: float = 0.5


def _votes(conn: Connection) -> list[tuple[int, int, bool]]:
    """(annotator, gold, right) of every gold vote, in time (id) order."""
    stmt = select(goldvote_t.c.annotator_id, goldvote_t.c.gold_id, goldvote_t.c.correct).order_by(
        goldvote_t.c.id
    )
    return [(int(a), int(g), bool(c)) for a, g, c in conn.execute(stmt).all()]


def annotator_gold_accuracy(conn: Connection, rule: GoldRule | None = None) -> dict[int, AnnotatorGold]:
    """Every annotator with gold votes: their :class:`AnnotatorGold`."""
    rows = _votes(conn)
    if not rows:
        return {}
    ids = sorted({a for a, _, _ in rows})
    index = {a: i for i, a in enumerate(ids)}
    who = np.array([index[a] for a, _, _ in rows], dtype=np.int64)
    right = np.array([c for _, _, c in rows], dtype=bool)
    acc = gold_accuracy(who, right, len(ids), rule)
    posterior = honest_posterior(acc.n_gold, acc.n_right, rule)
    return {
        a: AnnotatorGold(
            int(acc.n_gold[i]),
            int(acc.n_right[i]),
            float(acc.accuracy[i]),
            float(acc.low[i]),
            float(acc.high[i]),
            bool(acc.flagged[i]),
            float(posterior[i]),
        )
        for a, i in index.items()
    }


def retire_missed_golds(conn: Connection, rule: RetireRule | None = None) -> list[tuple[int, str]]:
    """Retire the golds good annotators keep missing (the caller's transaction); returns (gold, reason)."""
    rule = rule or RetireRule()
    accuracy = annotator_gold_accuracy(conn)
    good = {a for a, g in accuracy.items() if g.n_gold >= rule.min_golds and g.low >= rule.good_low}
    tally: dict[int, list[int]] = {}
    for annotator, gold, right in _votes(conn):
        if annotator in good:
            counts = tally.setdefault(gold, [0, 0])
            counts[0] += 1
            counts[1] += not right
    active = set(conn.scalars(select(goldbattle_t.c.id).where(goldbattle_t.c.retired.is_(False))))
    retired: list[tuple[int, str]] = []
    for gold, (n, missed) in sorted(tally.items()):
        if gold in active and n >= rule.min_votes and missed > rule.max_miss * n:
            reason = f"missed by {missed} of {n} good annotators"
            conn.execute(
                update(goldbattle_t)
                .where(goldbattle_t.c.id == gold)
                .values(retired=True, retired_reason=reason)
            )
            retired.append((gold, reason))
    return retired


def retire_golds(engine: Engine, rule: RetireRule | None = None) -> list[tuple[int, str]]:
    """:func:`retire_missed_golds` in a transaction of its own, each retired gold logged with its reason;
    returns (gold, reason) of the golds retired now."""
    with engine.begin() as conn:
        retired = retire_missed_golds(conn, rule)
    for gold, reason in retired:
        log.warning("retired gold %d: %s", gold, reason)
    return retired


def gold_item_rows(session: Session) -> list[GoldItemRow]:
    """Every gold with its votes and how many were right, in id order."""
    conn = session.connection()
    tally: dict[int, list[int]] = {}
    for _, gold, right in _votes(conn):
        counts = tally.setdefault(gold, [0, 0])
        counts[0] += 1
        counts[1] += right
    stmt = select(
        goldbattle_t.c.id,
        goldbattle_t.c.kind,
        goldbattle_t.c.detail,
        goldbattle_t.c.source,
        goldbattle_t.c.right,
        goldbattle_t.c.retired,
        goldbattle_t.c.retired_reason,
    ).order_by(goldbattle_t.c.id)
    out = []
    for gold_id, kind, detail, source, right, retired, reason in conn.execute(stmt).all():
        n, k = tally.get(int(gold_id), [0, 0])
        out.append(GoldItemRow(int(gold_id), kind, detail, source, right, n, k, bool(retired), reason))
    return out
