"""Each model's share of the battles, week by week: the history half of a snapshot's fairness ledger.

The public arenas were criticised for sampling models unequally without saying so; a snapshot therefore
publishes, beside the share of battles so far, how that share moved over time. Counted over the same
votes as the board (the same filter), streamed so memory grows with weeks times models, not with votes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import ColumnElement

from leaderboard.battles import Battles
from votes.bulk import column_chunks
from votes.dialects import dialect_of
from votes.reads.filters import VoteFilter, filter_votes
from votes.reads.scans import seconds_array
from votes.tables import model_t, vote_t

__all__ = ["battle_shares_of", "weekly_battle_shares"]

_DAY = 86_400
#: 1970-01-01 was a Thursday: day ``d`` since the epoch is ``(d + 3) % 7`` days after its Monday.
_THURSDAY = 3
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC).date()
_CHUNK = 100_000
#: Week and model counted as one number, ``monday * _MODEL_SPAN + model id`` (model ids are below it).
_MODEL_SPAN = 1 << 32


def weekly_battle_shares(
    engine: Engine, vote_filter: VoteFilter | None = None
) -> dict[str, dict[str, float]]:
    """Per week (its Monday, ISO date), each model's share of that week's battles (a battle counts half
    for each side; the shares of a week sum to one). Weeks without votes are absent.

    The votes are counted as arrays, chunk by chunk (a week number and a model id per side): a million
    votes read as datetimes and counted one by one took seconds."""
    sides: dict[tuple[int, int], int] = {}
    with engine.connect() as conn:
        names = {int(i): str(n) for i, n in conn.execute(select(model_t.c.id, model_t.c.name))}
        # SQLite's stored text as is, parsed by numpy (see seconds_array); PostgreSQL's day number, which
        # it computes faster than Python converts a million datetimes
        dialect = dialect_of(conn)
        text_times = dialect.times_stored_as_text
        when: ColumnElement[Any] = dialect.stored_time(vote_t.c.created_at)
        if not text_times:
            when = func.floor(func.extract("epoch", vote_t.c.created_at) / _DAY)
        stmt = filter_votes(select(when, vote_t.c.model_a_id, vote_t.c.model_b_id), vote_filter)
        for times, a_ids, b_ids in column_chunks(conn, stmt, size=_CHUNK):
            if text_times:
                day = np.floor_divide(seconds_array(times), _DAY).astype(np.int64)
            else:
                day = np.array(times, dtype=np.float64).astype(np.int64)
            _count_sides(sides, day, np.array(a_ids + b_ids, dtype=np.int64))
    return _shares(sides, names)


def battle_shares_of(battles: Battles) -> dict[str, dict[str, float]]:
    """:func:`weekly_battle_shares` of votes already read (with their times, seconds since the epoch as
    :func:`votes.reads.scans.load_battles` reads them): a publish counts the board's own votes without
    reading them again."""
    if battles.time is None:
        raise ValueError("weekly shares need each vote's time")
    sides: dict[tuple[int, int], int] = {}
    for start in range(0, len(battles.model_a), _CHUNK):
        part = slice(start, start + _CHUNK)
        day = np.floor_divide(battles.time[part], _DAY).astype(np.int64)
        _count_sides(sides, day, np.concatenate([battles.model_a[part], battles.model_b[part]]))
    return _shares(sides, dict(enumerate(battles.models)))


def _count_sides(
    sides: dict[tuple[int, int], int], day: npt.NDArray[np.int64], models: npt.NDArray[np.int64]
) -> None:
    """Add one chunk's sides to ``sides`` (week, model) -> count: ``day`` per vote, ``models`` the votes'
    a sides then their b sides."""
    monday = day - (day + _THURSDAY) % 7
    week_model = np.concatenate([monday, monday]) * _MODEL_SPAN + models
    keys, counts = np.unique(week_model, return_counts=True)
    for key, n in zip(keys.tolist(), counts.tolist(), strict=True):
        sides[divmod(key, _MODEL_SPAN)] = sides.get(divmod(key, _MODEL_SPAN), 0) + n


def _shares(sides: dict[tuple[int, int], int], names: dict[int, str]) -> dict[str, dict[str, float]]:
    by_week: dict[int, dict[int, int]] = {}
    for (week, model), n in sides.items():
        by_week.setdefault(week, {})[model] = n
    return {
        (_EPOCH + timedelta(days=week)).isoformat(): {
            names.get(m, str(m)): round(n / total, 6)
            for m, n in sorted(counts_.items(), key=lambda x: names.get(x[0], ""))
        }
        for week, counts_ in sorted(by_week.items())
        for total in [sum(counts_.values())]
    }
