"""Live ratings rebuilt from the vote log, so they always equal a replay of the counted votes.

Used after bulk imports (and by anyone who changes which votes count, e.g. flagging an annotator). The
Elo itself lives in :mod:`leaderboard.elo`; this module only feeds it the votes in commit (id) order.
"""

from __future__ import annotations

from sqlalchemy import delete, insert, or_, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from leaderboard.elo import EloConfig, EloStandings, replay_elo
from votes.models import utcnow
from votes.tables import annotator_t, battle_t, liverating_t, model_t, vote_t

__all__ = ["counted_votes_condition", "rebuild_live_ratings"]


def counted_votes_condition() -> ColumnElement[bool]:
    """Votes count unless their annotator is flagged (votes without an annotator count)."""
    return or_(battle_t.c.annotator_id.is_(None), annotator_t.c.flagged.is_(False))


def rebuild_live_ratings(conn: Connection, *, config: EloConfig | None = None) -> EloStandings:
    """Replace every :class:`LiveRating` row by a replay of all counted votes in vote-id order.

    Only models with at least one counted vote get a row.

    Runs inside the caller's transaction. On PostgreSQL the live-rating table is locked first, so a vote
    committed concurrently cannot slip between the replay and the write.
    """
    config = config or EloConfig()
    if conn.dialect.name == "postgresql":
        conn.execute(text("LOCK TABLE liverating IN EXCLUSIVE MODE"))
    models = conn.execute(select(model_t.c.id, model_t.c.name).order_by(model_t.c.id)).all()
    names = tuple(name for _, name in models)
    name_of = dict(models)
    stmt = (
        select(battle_t.c.model_a_id, battle_t.c.model_b_id, vote_t.c.winner)
        .select_from(vote_t)
        .join(battle_t, vote_t.c.battle_id == battle_t.c.id)
        .outerjoin(annotator_t, battle_t.c.annotator_id == annotator_t.c.id)
        .where(counted_votes_condition())
        .order_by(vote_t.c.id)
    )
    rows = conn.execute(stmt).all()
    standings = replay_elo(
        [name_of[r[0]] for r in rows],
        [name_of[r[1]] for r in rows],
        [r[2] for r in rows],
        config=config,
        models=names,
    )
    conn.execute(delete(liverating_t))
    now = utcnow()
    # Models without a counted vote get no row: the site shows them as unrated.
    rows_out = [
        {
            "model_id": model_id,
            "rating": float(standings.rating[i]),
            "games": int(standings.games[i]),
            "updated_at": now,
        }
        for i, (model_id, _) in enumerate(models)
        if standings.games[i] > 0
    ]
    if rows_out:
        conn.execute(insert(liverating_t), rows_out)
    return standings
