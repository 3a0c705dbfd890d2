"""Live ratings replayed from the vote log: the check that they equal it, and their rebuild from it.

:func:`replay_live_ratings` is what the live ratings must equal; :func:`rebuild_live_ratings` is the same
replay, written over them (after bulk imports, when flagging an annotator changes which votes count, or
when the live rater changed: :func:`ensure_live_rater`). The Elo lives in :mod:`leaderboard.online.elo`, the
other online raters in :mod:`leaderboard.online.raters`; this module only feeds them the votes in commit (id)
order, with the clock a rater with one needs: the running maximum of the vote times.

An imported vote may carry a weight or have no known side. The Elo scales its step by the weight
(``w K (S - E)``); the other online raters count every vote once. No online rater has a left-side term,
so a vote without a known side is replayed like any other.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from leaderboard.data import OUTCOME_STRINGS, parse_outcome
from leaderboard.online.elo import EloConfig, EloStandings, replay_elo_indices
from leaderboard.online.raters import OnlineRater
from votes.bulk import column_chunks
from votes.db import read_only
from votes.dialects import dialect_of
from votes.models import utcnow
from votes.reads.filters import counted_vote_condition
from votes.tables import annotator_t, liverating_t, model_t, vote_t
from votes.voting.live import LiveConfig, encode_state, has_clock, rater_identity

__all__ = [
    "REPLAY_CHUNK",
    "Replayed",
    "ensure_live_rater",
    "rebuild_live_ratings",
    "rebuild_live_ratings_aside",
    "replay_aside",
    "replay_live_ratings",
    "replay_live_rows",
    "store_replay",
]

#: Votes read and replayed per chunk by :func:`rebuild_live_ratings`.
REPLAY_CHUNK = 100_000


def _models(conn: Connection) -> tuple[list[tuple[int, str]], np.ndarray]:
    """Every model's (id, name) in id order, and each id's position in that list."""
    models = [
        (int(m), str(n))
        for m, n in conn.execute(select(model_t.c.id, model_t.c.name).order_by(model_t.c.id)).all()
    ]
    position = np.full(max((model_id for model_id, _ in models), default=0) + 1, -1, dtype=np.int64)
    for i, (model_id, _) in enumerate(models):
        position[model_id] = i
    return models, position


def _seconds(when: datetime) -> float:
    """A stored vote time as seconds since the epoch (a store without time zones hands back UTC)."""
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()


def _replay(conn: Connection, config: EloConfig) -> tuple[list[int], EloStandings]:
    """Every model's id (in id order) and the Elo replay of all counted votes in vote-id order."""
    models, position = _models(conn)
    names = tuple(name for _, name in models)
    # The vote row carries its battle's models and annotator: no join, read in primary-key order.
    stmt = (
        select(vote_t.c.model_a_id, vote_t.c.model_b_id, vote_t.c.winner, vote_t.c.weight)
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
    for a_ids, b_ids, winners, weights in column_chunks(conn, stmt, size=REPLAY_CHUNK, plain=True):
        n = len(winners)
        for w in set(winners) - codes.keys():
            codes[w] = int(parse_outcome(w))
        standings = replay_elo_indices(
            position[np.array(a_ids, dtype=np.int64)],
            position[np.array(b_ids, dtype=np.int64)],
            np.fromiter(map(codes.__getitem__, winners), dtype=np.int8, count=n),
            models=names,
            config=config,
            start=standings,
            weight=np.array(weights, dtype=np.float64),
        )
    return [model_id for model_id, _ in models], standings


def _replay_rater(conn: Connection, rater: OnlineRater[Any]) -> dict[int, dict[str, Any]]:
    """The rater's replay of all counted votes in vote-id order: {model id: its LiveRating columns}.

    Models without a counted vote are left out. The clock of a rater with one is the running maximum of
    the vote times, as the vote transaction computes it; each row's ``clock`` is its last vote's.
    """
    models, position = _models(conn)
    n = len(models)
    stmt = (
        select(vote_t.c.model_a_id, vote_t.c.model_b_id, vote_t.c.winner, vote_t.c.created_at)
        .where(counted_vote_condition())
        .order_by(vote_t.c.id)
    )
    clocked = has_clock(rater)
    states: list[Any] = [rater.initial() for _ in range(n)]
    games = np.zeros(n, dtype=np.int64)
    last = np.full(n, -np.inf)
    carry = -np.inf
    for rows in conn.execute(stmt, execution_options={"yield_per": REPLAY_CHUNK}).partitions():
        k = len(rows)
        ia = position[np.fromiter((r[0] for r in rows), dtype=np.int64, count=k)]
        ib = position[np.fromiter((r[1] for r in rows), dtype=np.int64, count=k)]
        codes = np.fromiter((int(parse_outcome(r[2])) for r in rows), dtype=np.int64, count=k)
        times = None
        if clocked:
            raw = np.fromiter((_seconds(r[3]) for r in rows), dtype=np.float64, count=k)
            times = np.maximum.accumulate(np.concatenate(([carry], raw)))[1:]
            carry = float(times[-1])
            np.maximum.at(last, ia, times)
            np.maximum.at(last, ib, times)
        states = rater.replay(ia, ib, codes, n_models=n, times=times, start=states)
        games += np.bincount(ia, minlength=n) + np.bincount(ib, minlength=n)
    identity = rater_identity(rater)
    out: dict[int, dict[str, Any]] = {}
    for i, (model_id, _) in enumerate(models):
        if games[i] > 0:
            rating, deviation = rater.shown(states[i])
            out[model_id] = {
                "rating": rating,
                "games": int(games[i]),
                "deviation": deviation,
                "state": encode_state(states[i]),
                "clock": float(last[i]) if clocked else None,
                "rater": identity,
            }
    return out


def replay_live_rows(*, session: Session | Connection, config: LiveConfig) -> dict[str, dict[str, Any]]:
    """Replay the counted votes in vote-id order: {model: the LiveRating columns it must hold}.

    For the plain Elo, rating and games; for another online rater also deviation, state, clock and
    rater. Writes nothing; models without a counted vote are left out.
    """
    conn = session.connection() if isinstance(session, Session) else session
    if isinstance(config, EloConfig):
        return {
            m: {"rating": r, "games": g}
            for m, (r, g) in replay_live_ratings(session=conn, config=config).items()
        }
    names = dict(_models(conn)[0])
    return {names[m]: row for m, row in _replay_rater(conn, config).items()}


def replay_live_ratings(*, session: Session | Connection, config: LiveConfig) -> dict[str, tuple[float, int]]:
    """Replay the counted votes (annotator not flagged) in vote-id order: {model: (rating, games)}.

    Writes nothing; models without a counted vote are left out, as they have no live rating.
    """
    conn = session.connection() if isinstance(session, Session) else session
    if not isinstance(config, EloConfig):
        return {
            m: (row["rating"], row["games"])
            for m, row in replay_live_rows(session=conn, config=config).items()
        }
    _, standings = _replay(conn, config)
    return {
        name: (float(standings.rating[i]), int(standings.games[i]))
        for i, name in enumerate(standings.models)
        if standings.games[i] > 0
    }


def rebuild_live_ratings(conn: Connection, *, config: LiveConfig | None = None) -> EloStandings:
    """Replace every :class:`LiveRating` row by a replay of all counted votes in vote-id order.

    Only models with at least one counted vote get a row. Returns every model's replayed rating (the
    shown rating for a rater other than Elo; the initial one without votes) and games.

    Runs inside the caller's transaction. On PostgreSQL the live-rating table is locked first, so a vote
    committed concurrently cannot slip between the replay and the write.
    """
    dialect_of(conn).lock_tables(conn, ("liverating",), "EXCLUSIVE")
    rows, standings = _replayed_rows(conn, config)
    _write_rows(conn, rows)
    return standings


def rebuild_live_ratings_aside(
    engine: Engine, *, config: LiveConfig | None = None, attempts: int = 3, first: Replayed | None = None
) -> None:
    """:func:`rebuild_live_ratings` with the replay outside the write transaction, for a large store.

    Replaying a million votes takes seconds; inside the write transaction it would hold every live vote
    back (the SQLite writer lock, PostgreSQL's live-rating table lock) that long. Here the replay reads
    first (:func:`replay_aside`), and the short write transaction stores it only if no vote was added
    and no annotator flagged meanwhile (:func:`store_replay`); after ``attempts`` such races the replay
    is done inside the write transaction. ``first``: a replay read already, tried before the others.
    """
    if first is not None and store_replay(engine, first):
        return
    for _ in range(attempts):
        if store_replay(engine, replay_aside(engine, config=config)):
            return
    with engine.begin() as conn:
        rebuild_live_ratings(conn, config=config)


class Replayed(NamedTuple):
    """A replay of the counted votes read from one snapshot, with what it depends on."""

    mark: tuple[Any, ...]
    rows: list[dict[str, Any]]


def replay_aside(engine: Engine, *, config: LiveConfig | None = None) -> Replayed:
    """The live-rating rows of a replay of the counted votes, read in one snapshot without the write
    lock: SQLite's reading runs beside a writer (even in another thread of the same process)."""
    with read_only(engine).connect() as conn:  # one snapshot, no write lock taken on SQLite
        with conn.begin():
            mark = _vote_mark(conn)
            rows, _ = _replayed_rows(conn, config)
    return Replayed(mark, rows)


def store_replay(engine: Engine, replayed: Replayed) -> bool:
    """Store ``replayed`` as the live ratings, in one short write transaction, if no vote was added and
    no annotator flagged since it was read; whether it did."""
    with engine.begin() as conn:
        dialect_of(conn).lock_tables(conn, ("liverating",), "EXCLUSIVE")
        if _vote_mark(conn) != replayed.mark:
            return False
        _write_rows(conn, replayed.rows)
        return True


def _vote_mark(conn: Connection) -> tuple[Any, ...]:
    """What a replay depends on and a live vote or a flag changes: the votes' count and last id, and
    the flagged annotators."""
    votes = conn.execute(select(func.count(), func.max(vote_t.c.id)).select_from(vote_t)).one()
    flagged = conn.execute(
        select(func.count(), func.max(annotator_t.c.id)).where(annotator_t.c.flagged.is_(True))
    ).one()
    return (*votes, *flagged)


def _replayed_rows(conn: Connection, config: LiveConfig | None) -> tuple[list[dict[str, Any]], EloStandings]:
    """The :class:`LiveRating` rows a replay of the counted votes gives, and every model's standing."""
    now = utcnow()
    if config is not None and not isinstance(config, EloConfig):
        replayed = _replay_rater(conn, config)
        rated = [{"model_id": m, **row, "updated_at": now} for m, row in replayed.items()]
        models = _models(conn)[0]
        new = config.shown(config.initial())[0]
        return rated, EloStandings(
            models=tuple(name for _, name in models),
            rating=np.array([replayed[m]["rating"] if m in replayed else new for m, _ in models]),
            games=np.array([replayed[m]["games"] if m in replayed else 0 for m, _ in models], dtype=np.int64),
        )
    model_ids, standings = _replay(conn, config or EloConfig())
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
    return rows_out, standings


def _write_rows(conn: Connection, rows: list[dict[str, Any]]) -> None:
    conn.execute(delete(liverating_t))
    if rows:
        conn.execute(insert(liverating_t), rows)


def ensure_live_rater(engine: Engine, config: LiveConfig) -> bool:
    """Rebuild the live ratings by replay if any row was written by another rater; True if it did.

    Called at start-up, so that switching ``ARENA_LIVE_RATING`` on an existing database takes effect on
    the whole table at once. Plain Elo rows carry no rater; a change of the Elo's own parameters is not
    detected (as before: ``POST /admin/live-ratings/rebuild``).
    """
    want = rater_identity(config)
    with engine.begin() as conn:
        dialect_of(conn).lock_tables(conn, ("liverating",), "EXCLUSIVE")
        found = {r for (r,) in conn.execute(select(liverating_t.c.rater).distinct())}
        if found <= {want}:
            return False
        rebuild_live_ratings(conn, config=config)
        return True
