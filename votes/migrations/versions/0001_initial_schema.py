"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-21 23:15:29.180016
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "annotator",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("token_hash", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("flagged", sa.Boolean(), nullable=False),
        sa.Column("flag_reason", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    with op.batch_alter_table("annotator", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_annotator_flagged"), ["flagged"], unique=False)
        batch_op.create_index(batch_op.f("ix_annotator_label"), ["label"], unique=False)

    op.create_table(
        "model",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("organisation", sa.String(length=200), nullable=True),
        sa.Column("licence", sa.String(length=100), nullable=True),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("model", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_model_name"), ["name"], unique=True)

    op.create_table(
        "prompt",
        sa.Column("external_id", sa.String(length=200), nullable=True),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("conversation", sa.JSON(), nullable=True),
        sa.Column("category", sa.String(length=100), nullable=True),
        sa.Column("language", sa.String(length=50), nullable=True),
        sa.Column("source", sa.String(length=200), nullable=True),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("prompt", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_prompt_category"), ["category"], unique=False)
        batch_op.create_index(batch_op.f("ix_prompt_external_id"), ["external_id"], unique=True)
        batch_op.create_index(batch_op.f("ix_prompt_language"), ["language"], unique=False)

    op.create_table(
        "snapshot",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("method", sa.String(length=50), nullable=False),
        sa.Column("parameters", sa.JSON(), nullable=True),
        sa.Column("slice", sa.String(length=200), nullable=False),
        sa.Column("n_votes", sa.Integer(), nullable=False),
        sa.Column("votes_sha256", sa.String(length=64), nullable=False),
        sa.Column("files", sa.JSON(), nullable=True),
        sa.Column("path", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("snapshot", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_snapshot_slice"), ["slice"], unique=False)

    op.create_table(
        "liverating",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("rating", sa.Float(), nullable=False),
        sa.Column("games", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["model.id"],
        ),
        sa.PrimaryKeyConstraint("model_id"),
    )
    op.create_table(
        "output",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("prompt_id", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("conversation", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["model.id"],
        ),
        sa.ForeignKeyConstraint(
            ["prompt_id"],
            ["prompt.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("prompt_id", "model_id", name="uq_output_prompt_model"),
    )
    with op.batch_alter_table("output", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_output_model_id"), ["model_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_output_prompt_id"), ["prompt_id"], unique=False)

    op.create_table(
        "battle",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("prompt_id", sa.Integer(), nullable=True),
        sa.Column("output_a_id", sa.Integer(), nullable=True),
        sa.Column("output_b_id", sa.Integer(), nullable=True),
        sa.Column("model_a_id", sa.Integer(), nullable=False),
        sa.Column("model_b_id", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), nullable=True),
        sa.Column("issued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pair_probability", sa.Float(), nullable=True),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("import_key", sa.String(length=80), nullable=True),
        sa.Column("token_id", sa.String(length=64), nullable=True),
        sa.Column("language", sa.String(length=50), nullable=True),
        sa.Column("extra", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["annotator_id"],
            ["annotator.id"],
        ),
        sa.ForeignKeyConstraint(
            ["model_a_id"],
            ["model.id"],
        ),
        sa.ForeignKeyConstraint(
            ["model_b_id"],
            ["model.id"],
        ),
        sa.ForeignKeyConstraint(
            ["output_a_id"],
            ["output.id"],
        ),
        sa.ForeignKeyConstraint(
            ["output_b_id"],
            ["output.id"],
        ),
        sa.ForeignKeyConstraint(
            ["prompt_id"],
            ["prompt.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("import_key"),
        sa.UniqueConstraint("token_id"),
    )
    with op.batch_alter_table("battle", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_battle_annotator_id"), ["annotator_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_battle_language"), ["language"], unique=False)
        batch_op.create_index("ix_battle_models", ["model_a_id", "model_b_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_battle_prompt_id"), ["prompt_id"], unique=False)

    op.create_table(
        "vote",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("battle_id", sa.Integer(), nullable=False),
        sa.Column("winner", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seconds_to_vote", sa.Float(), nullable=True),
        sa.Column("client_hash", sa.String(length=64), nullable=True),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("live_elo", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["battle_id"],
            ["battle.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("battle_id"),
        sa.UniqueConstraint("idempotency_key"),
    )
    with op.batch_alter_table("vote", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_vote_created_at"), ["created_at"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("vote", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_vote_created_at"))

    op.drop_table("vote")
    with op.batch_alter_table("battle", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_battle_prompt_id"))
        batch_op.drop_index("ix_battle_models")
        batch_op.drop_index(batch_op.f("ix_battle_language"))
        batch_op.drop_index(batch_op.f("ix_battle_annotator_id"))

    op.drop_table("battle")
    with op.batch_alter_table("output", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_output_prompt_id"))
        batch_op.drop_index(batch_op.f("ix_output_model_id"))

    op.drop_table("output")
    op.drop_table("liverating")
    with op.batch_alter_table("snapshot", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_snapshot_slice"))

    op.drop_table("snapshot")
    with op.batch_alter_table("prompt", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_prompt_language"))
        batch_op.drop_index(batch_op.f("ix_prompt_external_id"))
        batch_op.drop_index(batch_op.f("ix_prompt_category"))

    op.drop_table("prompt")
    with op.batch_alter_table("model", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_model_name"))

    op.drop_table("model")
    with op.batch_alter_table("annotator", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_annotator_label"))
        batch_op.drop_index(batch_op.f("ix_annotator_flagged"))

    op.drop_table("annotator")
