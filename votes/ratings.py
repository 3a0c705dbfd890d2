"""Live ratings replayed from the vote log: the check that they equal it, and their rebuild from it.

:func:`replay_live_ratings` is what the live ratings must equal; :func:`rebuild_live_ratings` is the same
replay, written over them (after bulk imports, or when flagging an annotator changes which votes count).
The Elo itself lives in :mod:`leaderboard.elo`; this module only feeds it the votes in commit (id) order.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import delete, insert, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from leaderboard.data import OUTCOME_STRINGS, parse_outcome
from leaderboard.elo import EloConfig, EloStandings, replay_elo_indices
from votes.models import utcnow
from votes.queries import counted_vote_condition
from votes.tables import liverating_t, model_t, vote_t

__all__ = ["REPLAY_CHUNK", "rebuild_live_ratings", "replay_live_ratings"]

#: Votes read and replayed per chunk by :func:`rebuild_live_ratings`.
REPLAY_CHUNK = 100_000


def _replay(conn: Connection, config: EloConfig) -> tuple[list[int], EloStandings]:
    """Every model's id (in id order) and the Elo replay of all counted votes in vote-id order."""
    models = conn.execute(select(model_t.c.id, model_t.c.name).order_by(model_t.c.id)).all()
    names = tuple(name for _, name in models)
    position = np.full(max((model_id for model_id, _ in models), default=0) + 1, -1, dtype=np.int64)
    for i, (model_id, _) in enumerate(models):
        position[model_id] = i
    # The vote row carries its battle's models and annotator: no join, read in primary-key order.
    stmt = (
        select(vote_t.c.model_a_id, vote_t.c.model_b_id, vote_t.c.winner)
        .where(counted_vote_condition())
        .order_by(vote_t.c.id)
    )
    standings = replay_elo_indices(
        np.zeros(0, dtype=np.int64),
        np.zeros(0, dtype=np.int64),
        np.zeros(0, dtype=np.int8),
        models=names,
        config=config,
    )
    codes = {w: int(parse_outcome(w)) for w in OUTCOME_STRINGS.values()}
    # Streamed in chunks and replayed chunk by chunk: memory stays bounded whatever the number of votes.
    for rows in conn.execute(stmt, execution_options={"yield_per": REPLAY_CHUNK}).partitions():
        n = len(rows)
        standings = replay_elo_indices(
            position[np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)],
            position[np.fromiter((r[1] for r in rows), dtype=np.int64, count=n)],
            np.fromiter((codes.get(r[2]) or int(parse_outcome(r[2])) for r in rows), dtype=np.int8, count=n),
            models=names,
            config=config,
            start=standings,
        )
    return [model_id for model_id, _ in models], standings


def replay_live_ratings(*, session: Session | Connection, config: EloConfig) -> dict[str, tuple[float, int]]:
    """Replay the counted votes (annotator not flagged) in vote-id order: {model: (rating, games)}.

    Writes nothing; models without a counted vote are left out, as they have no live rating.
    """
    conn = session.connection() if isinstance(session, Session) else session
    _, standings = _replay(conn, config)
    return {
        name: (float(standings.rating[i]), int(standings.games[i]))
        for i, name in enumerate(standings.models)
        if standings.games[i] > 0
    }


def rebuild_live_ratings(conn: Connection, *, config: EloConfig | None = None) -> EloStandings:
    """Replace every :class:`LiveRating` row by a replay of all counted votes in vote-id order.

    Only models with at least one counted vote get a row.

    Runs inside the caller's transaction. On PostgreSQL the live-rating table is locked first, so a vote
    committed concurrently cannot slip between the replay and the write.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("LOCK TABLE liverating IN EXCLUSIVE MODE"))
    model_ids, standings = _replay(conn, config or EloConfig())
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
        for i, model_id in enumerate(model_ids)
        if standings.games[i] > 0
    ]
    if rows_out:
        conn.execute(insert(liverating_t), rows_out)
    return standings
