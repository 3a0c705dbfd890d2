"""Each model's share of the battles, week by week: the history half of a snapshot's fairness ledger.

The public arenas were criticised for sampling models unequally without saying so; a snapshot therefore
publishes, beside the share of battles so far, how that share moved over time. Counted over the same
votes as the board (the same filter), streamed so memory grows with weeks times models, not with votes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import date, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.engine import Engine

from votes.queries import VoteFilter, filter_votes
from votes.tables import model_t, vote_t

__all__ = ["weekly_battle_shares"]


def _week(moment: datetime) -> date:
    """The Monday (UTC date) that starts the week of ``moment``."""
    day = moment.date()
    return day - timedelta(days=day.weekday())


def weekly_battle_shares(
    engine: Engine, vote_filter: VoteFilter | None = None
) -> dict[str, dict[str, float]]:
    """Per week (its Monday, ISO date), each model's share of that week's battles (a battle counts half
    for each side; the shares of a week sum to one). Weeks without votes are absent."""
    stmt = filter_votes(select(vote_t.c.created_at, vote_t.c.model_a_id, vote_t.c.model_b_id), vote_filter)
    sides: defaultdict[date, Counter[int]] = defaultdict(Counter)
    with engine.connect() as conn:
        names = {int(i): str(n) for i, n in conn.execute(select(model_t.c.id, model_t.c.name))}
        for created_at, a, b in conn.execution_options(yield_per=5000).execute(stmt):
            week = sides[_week(created_at)]
            week[int(a)] += 1
            week[int(b)] += 1
    return {
        week.isoformat(): {
            names.get(m, str(m)): round(n / total, 6)
            for m, n in sorted(counts.items(), key=lambda x: names.get(x[0], ""))
        }
        for week, counts in sorted(sides.items())
        for total in [sum(counts.values())]
    }
