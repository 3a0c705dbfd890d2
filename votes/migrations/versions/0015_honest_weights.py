"""annotator.honest_weight: the voter review's weight of each annotator, for the robust fit

``arena annotators --apply`` stores each reviewed annotator's posterior probability of voting honestly;
``arena publish --robust`` multiplies each vote's weight by it instead of leaving flagged annotators out.
Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0015_honest_weights
Revises: 0014_import_batches
Create Date: 2026-11-25 08:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_honest_weights"
down_revision: str | None = "0014_import_batches"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("annotator")}
    if "honest_weight" in columns:
        return
    with op.batch_alter_table("annotator") as batch:
        batch.add_column(
            sa.Column("honest_weight", sa.Float(), nullable=False, server_default=sa.text("1.0"))
        )


def downgrade() -> None:
    with op.batch_alter_table("annotator") as batch:
        batch.drop_column("honest_weight")
