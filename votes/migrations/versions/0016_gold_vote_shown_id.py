"""goldvote.shown_vote_id: the vote id a gold vote's answer shows, taken from the votes' own sequence

A gold vote is stored apart from votes, so its own row id counts from 1 while the votes' ids are far
higher: shown to the annotator, it would mark the battle as a gold. The id shown is reserved from the
vote table's ids instead (:mod:`votes.gold_votes`) and kept here, so a retry shows it again.
Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0016_gold_vote_shown_id
Revises: 0015_honest_weights
Create Date: 2026-11-25 11:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_gold_vote_shown_id"
down_revision: str | None = "0015_honest_weights"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("goldvote")}
    if "shown_vote_id" in columns:
        return
    with op.batch_alter_table("goldvote") as batch:
        batch.add_column(sa.Column("shown_vote_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("goldvote") as batch:
        batch.drop_column("shown_vote_id")
