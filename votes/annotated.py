"""Votes with who cast them and on which prompt, as Battles arrays: the input of agreement reports."""

from __future__ import annotations

import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Connection

from leaderboard.battles import Battles
from leaderboard.data import parse_outcome
from votes.tables import annotator_t, battle_t, model_t, vote_t

__all__ = ["annotated_battles"]


def annotated_battles(conn: Connection) -> tuple[Battles, tuple[str, ...]]:
    """Every vote with an annotator and a prompt, in vote-id order, and the annotators' labels.

    ``Battles.annotator`` indexes into the returned labels (an annotator without a label is
    ``annotator:<id>``); ``Battles.prompt`` holds prompt ids. Models are sorted by name.
    """
    a_model, b_model = model_t.alias("a_model"), model_t.alias("b_model")
    stmt = (
        select(
            a_model.c.name,
            b_model.c.name,
            vote_t.c.winner,
            vote_t.c.annotator_id,
            annotator_t.c.label,
            battle_t.c.prompt_id,
        )
        .select_from(vote_t)
        .join(battle_t, battle_t.c.id == vote_t.c.battle_id)
        .join(annotator_t, annotator_t.c.id == vote_t.c.annotator_id)
        .join(a_model, a_model.c.id == vote_t.c.model_a_id)
        .join(b_model, b_model.c.id == vote_t.c.model_b_id)
        .where(battle_t.c.prompt_id.is_not(None))
        .order_by(vote_t.c.id)
    )
    rows = conn.execute(stmt).all()
    models = tuple(sorted({r[0] for r in rows} | {r[1] for r in rows}))
    model_index = {m: i for i, m in enumerate(models)}
    labels: dict[int, str] = {}
    for r in rows:
        labels.setdefault(r[3], r[4] or f"annotator:{r[3]}")
    order = sorted(labels, key=lambda k: labels[k])
    annotator_index = {k: i for i, k in enumerate(order)}
    battles = Battles(
        models=models,
        model_a=np.array([model_index[r[0]] for r in rows], dtype=np.int64),
        model_b=np.array([model_index[r[1]] for r in rows], dtype=np.int64),
        outcome=np.array([parse_outcome(r[2]) for r in rows], dtype=np.int8),
        annotator=np.array([annotator_index[r[3]] for r in rows], dtype=np.int64),
        prompt=np.array([r[5] for r in rows], dtype=np.int64),
    )
    return battles, tuple(labels[k] for k in order)
