"""Model metadata the public boards show: a link and the knowledge cutoff (organisation and licence exist)

Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0008_model_metadata
Revises: 0007_live_usage
Create Date: 2026-11-25 05:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_model_metadata"
down_revision: str | None = "0007_live_usage"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    existing = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("model")}
    with op.batch_alter_table("model") as batch:
        if "link" not in existing:
            batch.add_column(sa.Column("link", sa.String(length=500), nullable=True))
        if "knowledge_cutoff" not in existing:
            batch.add_column(sa.Column("knowledge_cutoff", sa.String(length=10), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model") as batch:
        batch.drop_column("knowledge_cutoff")
        batch.drop_column("link")
