"""LLM-judge verdicts: one row per judged pair and order, with raw text, template hash and parameters

Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0006_judgments
Revises: 0005_model_endpoints
Create Date: 2026-11-25 03:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_judgments"
down_revision: str | None = "0005_model_endpoints"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STR = sa.String


def upgrade() -> None:
    if "judgment" in set(sa.inspect(op.get_bind()).get_table_names()):
        return
    op.create_table(
        "judgment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("prompt_id", sa.Integer(), nullable=False),
        sa.Column("output_a_id", sa.Integer(), nullable=False),
        sa.Column("output_b_id", sa.Integer(), nullable=False),
        sa.Column("judge", _STR(length=200), nullable=False),
        sa.Column("template", _STR(length=200), nullable=False),
        sa.Column("template_sha256", _STR(length=64), nullable=False),
        sa.Column("params", sa.JSON(), nullable=True),
        sa.Column("raw_text", _STR(), nullable=False),
        sa.Column("verdict", _STR(length=20), nullable=True),
        sa.Column("n_votes", sa.Integer(), nullable=False),
        sa.Column("n_attempts", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("run_id", _STR(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["output_a_id"], ["output.id"]),
        sa.ForeignKeyConstraint(["output_b_id"], ["output.id"]),
        sa.ForeignKeyConstraint(["prompt_id"], ["prompt.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "judge", "template_sha256", "output_a_id", "output_b_id", name="uq_judgment_order"
        ),
    )
    op.create_index("ix_judgment_judge", "judgment", ["judge"], unique=False)
    op.create_index("ix_judgment_prompt_id", "judgment", ["prompt_id"], unique=False)
    op.create_index("ix_judgment_run_id", "judgment", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_judgment_run_id", table_name="judgment")
    op.drop_index("ix_judgment_prompt_id", table_name="judgment")
    op.drop_index("ix_judgment_judge", table_name="judgment")
    op.drop_table("judgment")
