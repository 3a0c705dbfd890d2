"""goldvote.shown_vote_id and repeatvote.shown_vote_id: the vote id the answer shows, from the votes' own ids

A gold or repeat vote is stored apart from votes, so its own row id counts from 1 while the votes' ids are
far higher: shown to the annotator, it would mark the battle. The id shown is reserved from the vote
table's ids instead (:mod:`votes.voting.apart_votes`) and kept here, so a retry shows it again.
Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0017_shown_vote_ids
Revises: 0016_repeat_battles
Create Date: 2026-11-25 11:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_shown_vote_ids"
down_revision: str | None = "0016_repeat_battles"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


_TABLES = ("goldvote", "repeatvote")


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table in _TABLES:
        if "shown_vote_id" in {c["name"] for c in inspector.get_columns(table)}:
            continue
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("shown_vote_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("shown_vote_id")
