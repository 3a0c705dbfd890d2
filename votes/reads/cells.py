"""Votes aggregated in SQL into the fit's cells: one row per (model_a, model_b, outcome), not per vote.

:func:`load_pair_counts` runs ``GROUP BY model_a, model_b, winner`` in the database, so its cost follows
the number of model pairs, not the number of votes; unfiltered (or excluding flagged annotators) it is
one scan of the covering index ``ix_vote_cells`` (:func:`pair_counts_statement`). SQLite hands the cells
packed in a few texts (:mod:`votes.reads.packed`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Select, case, func, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from leaderboard.data import PairCounts, parse_outcome
from votes.dialects import Dialect, dialect_of
from votes.reads.filters import (
    VoteFilter,
    check_propensities,
    filter_from,
    filter_votes,
    unit_mean_scale,
    weighted_votes,
)
from votes.reads.packed import packed_cells
from votes.tables import model_t, vote_t

__all__ = ["index_models", "load_pair_counts", "pair_counts_statement"]


def _connection(db: Session | Connection) -> Connection:
    return db.connection() if isinstance(db, Session) else db


def _model_names(conn: Connection, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    stmt = select(model_t.c.id, model_t.c.name).where(model_t.c.id.in_(sorted(ids)))
    return {int(i): str(n) for i, n in conn.execute(stmt)}


def index_models(conn: Connection, ids: set[int]) -> tuple[tuple[str, ...], npt.NDArray[np.int64]]:
    """The models of ``ids`` sorted by name, and a table from a model's id to its place among them."""
    names = _model_names(conn, ids)
    models = tuple(sorted(names.values()))
    lookup = np.zeros(max(names, default=0) + 1, dtype=np.int64)
    for model_id, name in names.items():
        lookup[model_id] = models.index(name)
    return models, lookup


def load_pair_counts(
    db: Session | Connection,
    *,
    category: str | None = None,
    language: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    exclude_flagged: bool = False,
    filters: VoteFilter | None = None,
) -> PairCounts:
    """Selected votes aggregated in SQL by (model_a, model_b, winner): one row per cell, not per vote.

    Weighted votes make ``count`` the summed weights (``votes`` the vote numbers, ``weight_sq`` the
    summed squared weights); votes without a known side go to cells of their own (``sided`` false), as
    :func:`leaderboard.data.aggregate_codes` does.
    """
    conn = _connection(db)
    f = filter_from(filters, category, language, since, until, exclude_flagged)
    check_propensities(conn, f)
    dialect = dialect_of(conn)
    stmt = pair_counts_statement(f, dialect=dialect)
    # SQLite hands whole-number cells packed in a few texts (votes.reads.packed); else a row per cell
    packed = packed_cells(conn, stmt) if dialect.packs_scans else None
    if packed is not None:
        a_ids, b_ids, outcome = packed.model_a, packed.model_b, packed.outcome
        votes = weight = squares = packed.votes.astype(np.float64)
        votes_unsided = weight_unsided = squares_unsided = packed.unsided.astype(np.float64)
    else:
        rows = conn.execute(stmt).all()
        a_ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        b_ids = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
        outcome = np.fromiter((parse_outcome(r[2]) for r in rows), dtype=np.int8, count=len(rows))
        votes = np.fromiter((r[3] for r in rows), dtype=np.float64, count=len(rows))
        weight = np.fromiter((r[4] for r in rows), dtype=np.float64, count=len(rows))
        votes_unsided = np.fromiter((r[5] for r in rows), dtype=np.float64, count=len(rows))
        weight_unsided = np.fromiter((r[6] for r in rows), dtype=np.float64, count=len(rows))
        squares = np.fromiter((r[7] for r in rows), dtype=np.float64, count=len(rows))
        squares_unsided = np.fromiter((r[8] for r in rows), dtype=np.float64, count=len(rows))
    if f.ipw:  # inverse propensities scaled to mean 1 (as load_battles scales the same votes')
        scale = unit_mean_scale(float(votes.sum()), float(weight.sum()))
        weight, weight_unsided = weight * scale, weight_unsided * scale
        squares, squares_unsided = squares * scale**2, squares_unsided * scale**2
    n = len(a_ids)
    models, lookup = index_models(conn, set(np.union1d(a_ids, b_ids).tolist()))
    model_a, model_b = lookup[a_ids], lookup[b_ids]
    sided: npt.NDArray[np.bool_] | None = None
    if np.any(votes_unsided > 0):
        # Each (model_a, model_b, outcome) row splits into its sided and its side-less cell.
        model_a, model_b, outcome = (np.concatenate([x, x]) for x in (model_a, model_b, outcome))
        votes = np.concatenate([votes - votes_unsided, votes_unsided])
        weight = np.concatenate([weight - weight_unsided, weight_unsided])
        squares = np.concatenate([squares - squares_unsided, squares_unsided])
        sided = np.concatenate([np.ones(n, dtype=bool), np.zeros(n, dtype=bool)])
        present = votes > 0
        model_a, model_b, outcome = model_a[present], model_b[present], outcome[present]
        votes, weight, squares, sided = votes[present], weight[present], squares[present], sided[present]
    # The cells are unique already; put them in the (model_a, model_b, outcome, sided) order of
    # aggregate_codes.
    order = np.lexsort((sided if sided is not None else outcome, outcome, model_b, model_a))
    weighted = not np.array_equal(weight, votes)
    return PairCounts(
        models=models,
        model_a=model_a[order],
        model_b=model_b[order],
        outcome=outcome[order],
        count=(weight if weighted else votes)[order],
        votes=votes[order] if weighted else None,
        sided=None if sided is None else sided[order],
        weight_sq=squares[order] if weighted else None,
    )


def pair_counts_statement(filters: VoteFilter | None = None, *, dialect: Dialect) -> Select[Any]:
    """The ``GROUP BY model_a, model_b, winner`` behind :func:`load_pair_counts`, for ``dialect``'s planner.

    Grouped on the vote's own copies of the battle facts: unfiltered, or excluding flagged annotators,
    it is one scan of the covering index ``ix_vote_cells`` in the index's order (no join, no sort).
    Category, language and anonymity filters join the battle and prompt; time filters read the vote rows.
    Columns: the three keys, the number of votes, their summed weight, the number and summed weight
    of the votes without a known side, then the summed squared weights of all and of those (the variance
    of a cell whose votes weigh unequally is a sum over its votes).
    """
    f = filters or VoteFilter()
    keys: list[ColumnElement[Any]] = [vote_t.c.model_a_id, vote_t.c.model_b_id, vote_t.c.winner]
    unsided = vote_t.c.sided.is_(False)
    weight, votes = weighted_votes(f)
    stmt = select(
        *keys,
        func.count(),
        func.sum(weight),
        func.sum(case((unsided, 1), else_=0)),
        func.sum(case((unsided, weight), else_=0.0)),
        func.sum(weight * weight),
        func.sum(case((unsided, weight * weight), else_=0.0)),
    ).select_from(votes)
    if f.since is not None or f.until is not None:
        # Left alone, SQLite walks ix_vote_cells for its order and fetches every vote row at random to
        # test its time (10M votes, half selected: 34 s). Grouping by ``+column`` (SQLite's documented
        # way to keep a term off an index) lets it take the time index's range and sort instead (6.5 s).
        keys = [dialect.unindexed(k) for k in keys]
    return filter_votes(stmt, f).group_by(*keys)
