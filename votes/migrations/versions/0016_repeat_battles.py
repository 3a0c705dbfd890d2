"""repeat battles: votes on an annotator's own earlier battle shown again, sides swapped, kept apart

``repeatvote`` holds one row per repeat vote, linked to the vote it repeats (each repeated once) and to the
battle row written with it; whether both votes agree is stored. No fit reads ``repeatvote``.
Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0016_repeat_battles
Revises: 0015_honest_weights
Create Date: 2026-11-25 10:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_repeat_battles"
down_revision: str | None = "0015_honest_weights"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STR = sa.String
_WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    if "repeatvote" in set(sa.inspect(op.get_bind()).get_table_names()):
        return
    op.create_table(
        "repeatvote",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("battle_id", sa.Integer(), nullable=False),
        sa.Column("original_vote_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=False),
        sa.Column("winner", _STR(length=20), nullable=False),
        sa.Column("original_winner", _STR(length=20), nullable=False),
        sa.Column("agreed", sa.Boolean(), nullable=False),
        sa.Column("created_at", _WHEN, nullable=False),
        sa.Column("seconds_to_vote", sa.Float(), nullable=True),
        sa.Column("client_hash", _STR(length=64), nullable=True),
        sa.Column("address_hash", _STR(length=32), nullable=True),
        sa.Column("idempotency_key", _STR(length=200), nullable=True),
        sa.Column("live_elo", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["battle_id"], ["battle.id"]),
        sa.ForeignKeyConstraint(["original_vote_id"], ["vote.id"]),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("battle_id"),
        sa.UniqueConstraint("original_vote_id"),
        sa.UniqueConstraint("idempotency_key"),
    )
    op.create_index("ix_repeatvote_annotator_id", "repeatvote", ["annotator_id"], unique=False)
    op.create_index("ix_repeatvote_created_at", "repeatvote", ["created_at"], unique=False)


def downgrade() -> None:
    op.drop_table("repeatvote")
