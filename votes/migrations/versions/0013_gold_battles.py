"""gold battles: battles whose right vote is known, and the votes cast on them, kept apart from votes

``goldbattle`` holds the items (from a file or derived from the catalog); ``goldvote`` the votes on them,
one per annotator and gold, each with the battle row written with it. No fit reads ``goldvote``.
Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0013_gold_battles
Revises: 0012_answer_samples
Create Date: 2026-11-25 08:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_gold_battles"
down_revision: str | None = "0012_answer_samples"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STR = sa.String
_WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    tables = set(sa.inspect(op.get_bind()).get_table_names())
    if "goldbattle" not in tables:
        op.create_table(
            "goldbattle",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("kind", _STR(length=20), nullable=False),
            sa.Column("detail", _STR(length=40), nullable=True),
            sa.Column("prompt_id", sa.Integer(), nullable=False),
            sa.Column("text_a", _STR(), nullable=False),
            sa.Column("text_b", _STR(), nullable=False),
            sa.Column("right", _STR(length=10), nullable=False),
            sa.Column("model_a_id", sa.Integer(), nullable=True),
            sa.Column("model_b_id", sa.Integer(), nullable=True),
            sa.Column("output_id", sa.Integer(), nullable=True),
            sa.Column("source", _STR(length=20), nullable=False),
            sa.Column("source_key", _STR(length=64), nullable=False),
            sa.Column("retired", sa.Boolean(), nullable=False),
            sa.Column("retired_reason", _STR(length=200), nullable=True),
            sa.Column("created_at", _WHEN, nullable=False),
            sa.ForeignKeyConstraint(["prompt_id"], ["prompt.id"]),
            sa.ForeignKeyConstraint(["model_a_id"], ["model.id"]),
            sa.ForeignKeyConstraint(["model_b_id"], ["model.id"]),
            sa.ForeignKeyConstraint(["output_id"], ["output.id"]),
            sa.PrimaryKeyConstraint("id"),
            sa.UniqueConstraint("source_key"),
        )
        op.create_index("ix_goldbattle_prompt_id", "goldbattle", ["prompt_id"], unique=False)
        op.create_index("ix_goldbattle_retired", "goldbattle", ["retired"], unique=False)
    if "goldvote" not in tables:
        op.create_table(
            "goldvote",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("battle_id", sa.Integer(), nullable=False),
            sa.Column("gold_id", sa.Integer(), nullable=False),
            sa.Column("annotator_id", sa.Integer(), nullable=False),
            sa.Column("winner", _STR(length=20), nullable=False),
            sa.Column("expected", _STR(length=20), nullable=False),
            sa.Column("correct", sa.Boolean(), nullable=False),
            sa.Column("quiz", sa.Boolean(), nullable=False),
            sa.Column("created_at", _WHEN, nullable=False),
            sa.Column("seconds_to_vote", sa.Float(), nullable=True),
            sa.Column("client_hash", _STR(length=64), nullable=True),
            sa.Column("address_hash", _STR(length=32), nullable=True),
            sa.Column("idempotency_key", _STR(length=200), nullable=True),
            sa.Column("live_elo", sa.JSON(), nullable=True),
            sa.ForeignKeyConstraint(["battle_id"], ["battle.id"]),
            sa.ForeignKeyConstraint(["gold_id"], ["goldbattle.id"]),
            sa.ForeignKeyConstraint(["annotator_id"], ["annotator.id"]),
            sa.PrimaryKeyConstraint("id"),
            sa.UniqueConstraint("battle_id"),
            sa.UniqueConstraint("idempotency_key"),
            sa.UniqueConstraint("annotator_id", "gold_id", name="uq_goldvote_annotator_gold"),
        )
        op.create_index("ix_goldvote_gold_id", "goldvote", ["gold_id"], unique=False)
        op.create_index("ix_goldvote_annotator_id", "goldvote", ["annotator_id"], unique=False)
        op.create_index("ix_goldvote_created_at", "goldvote", ["created_at"], unique=False)


def downgrade() -> None:
    op.drop_table("goldvote")
    op.drop_table("goldbattle")
