"""model endpoints (where generated answers come from) and the provenance of each generated answer

Two new tables: ``modelendpoint`` (an OpenAI-compatible endpoint per model name; the API key is only
ever an environment variable's name) and ``generation`` (endpoint, served model, parameters, tokens,
latency, finish reason and time of each generated output). Idempotent, because a database made by
``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0005_model_endpoints
Revises: 0004_live_rater_state
Create Date: 2026-11-25 02:45:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_model_endpoints"
down_revision: str | None = "0004_live_rater_state"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STR = sa.String


def upgrade() -> None:
    existing = set(sa.inspect(op.get_bind()).get_table_names())
    if "modelendpoint" not in existing:
        op.create_table(
            "modelendpoint",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("name", _STR(length=200), nullable=False),
            sa.Column("base_url", _STR(length=500), nullable=False),
            sa.Column("served_model", _STR(length=200), nullable=False),
            sa.Column("api_key_env", _STR(length=200), nullable=True),
            sa.Column("params", sa.JSON(), nullable=True),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.PrimaryKeyConstraint("id"),
        )
        op.create_index("ix_modelendpoint_name", "modelendpoint", ["name"], unique=True)
    if "generation" not in existing:
        op.create_table(
            "generation",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("output_id", sa.Integer(), nullable=False),
            sa.Column("endpoint", _STR(length=200), nullable=False),
            sa.Column("base_url", _STR(length=500), nullable=False),
            sa.Column("served_model", _STR(length=200), nullable=False),
            sa.Column("params", sa.JSON(), nullable=True),
            sa.Column("prompt_tokens", sa.Integer(), nullable=True),
            sa.Column("completion_tokens", sa.Integer(), nullable=True),
            sa.Column("latency_s", sa.Float(), nullable=False),
            sa.Column("finish_reason", _STR(length=50), nullable=True),
            sa.Column("run_id", _STR(length=64), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.ForeignKeyConstraint(["output_id"], ["output.id"]),
            sa.PrimaryKeyConstraint("id"),
            sa.UniqueConstraint("output_id"),
        )
        op.create_index("ix_generation_run_id", "generation", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_generation_run_id", table_name="generation")
    op.drop_table("generation")
    op.drop_index("ix_modelendpoint_name", table_name="modelendpoint")
    op.drop_table("modelendpoint")
