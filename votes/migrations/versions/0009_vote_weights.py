"""vote.weight (default 1) and vote.sided (default true), in the covering index ix_vote_cells

Imported battle files may weight a battle (soft labels, strong verdicts) or not know which answer was
shown first (AlpacaEval). Existing votes count 1 and are sided. The index is rebuilt with both columns
so the fit's aggregate still reads the index alone. Idempotent, because a database made by
``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0009_vote_weights
Revises: 0008_model_metadata
Create Date: 2026-11-25 04:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_vote_weights"
down_revision: str | None = "0008_model_metadata"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_INDEX = ["model_a_id", "model_b_id", "winner", "annotator_id"]
_NEW_INDEX = [*_OLD_INDEX, "weight", "sided"]


def _index_columns(bind: sa.engine.Connection) -> list[str] | None:
    for ix in sa.inspect(bind).get_indexes("vote"):
        if ix["name"] == "ix_vote_cells":
            return [str(c) for c in ix["column_names"]]
    return None


def upgrade() -> None:
    bind = op.get_bind()
    existing = {c["name"] for c in sa.inspect(bind).get_columns("vote")}
    with op.batch_alter_table("vote", schema=None) as batch_op:
        if "weight" not in existing:
            batch_op.add_column(
                sa.Column("weight", sa.Float(), nullable=False, server_default=sa.text("1.0"))
            )
        if "sided" not in existing:
            batch_op.add_column(sa.Column("sided", sa.Boolean(), nullable=False, server_default=sa.true()))
    columns = _index_columns(bind)
    if columns != _NEW_INDEX:
        if columns is not None:
            op.drop_index("ix_vote_cells", table_name="vote")
        op.create_index("ix_vote_cells", "vote", _NEW_INDEX, unique=False)
    if bind.dialect.name == "postgresql":
        op.execute("ANALYZE vote")


def downgrade() -> None:
    op.drop_index("ix_vote_cells", table_name="vote")
    op.create_index("ix_vote_cells", "vote", _OLD_INDEX, unique=False)
    with op.batch_alter_table("vote", schema=None) as batch_op:
        batch_op.drop_column("sided")
        batch_op.drop_column("weight")
