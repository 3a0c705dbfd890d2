"""pairingweight: each model's share under the pairing policy in force, over time (the ledger's history)

Recorded by the live site when the shares move or an interval passes; published with each snapshot.
Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0011_pairing_weights
Revises: 0010_vote_integrity
Create Date: 2026-11-25 07:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_pairing_weights"
down_revision: str | None = "0010_vote_integrity"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if "pairingweight" in set(sa.inspect(op.get_bind()).get_table_names()):
        return
    op.create_table(
        "pairingweight",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("share", sa.Float(), nullable=False),
        sa.Column("policy", sa.String(length=20), nullable=False),
        sa.ForeignKeyConstraint(["model_id"], ["model.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_pairingweight_recorded_at", "pairingweight", ["recorded_at"], unique=False)
    op.create_index("ix_pairingweight_model_id", "pairingweight", ["model_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_pairingweight_model_id", table_name="pairingweight")
    op.drop_index("ix_pairingweight_recorded_at", table_name="pairingweight")
    op.drop_table("pairingweight")
