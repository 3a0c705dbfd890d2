"""Live battles: generations, failures and tokens per model and UTC day (availability, daily budget)

Live battles keep their conversations in the existing prompt/output/generation rows and their votes in
the vote table (``battle.source = "live"``); only the usage counts need a table. Idempotent, because a
database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0007_live_usage
Revises: 0006_judgments
Create Date: 2026-11-25 04:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_live_usage"
down_revision: str | None = "0006_judgments"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if "liveusage" in set(sa.inspect(op.get_bind()).get_table_names()):
        return
    op.create_table(
        "liveusage",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("generations", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["model_id"], ["model.id"]),
        sa.PrimaryKeyConstraint("model_id", "day"),
    )


def downgrade() -> None:
    op.drop_table("liveusage")
