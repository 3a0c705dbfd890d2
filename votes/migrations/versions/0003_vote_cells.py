"""vote carries its battle's model_a_id, model_b_id and annotator_id, with the covering index ix_vote_cells

The fit's GROUP BY (model_a, model_b, winner) then reads one index instead of joining every vote to its
battle and sorting them (10M votes on SQLite: 62 s -> a few seconds). Existing votes are backfilled from
their battles. Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 00:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("model_a_id", "model_b_id", "annotator_id")
_INDEX_COLUMNS = ["model_a_id", "model_b_id", "winner", "annotator_id"]


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    existing = {c["name"] for c in inspector.get_columns("vote")}
    if not set(_COLUMNS) <= existing:
        with op.batch_alter_table("vote", schema=None) as batch_op:
            for name in _COLUMNS:
                batch_op.add_column(sa.Column(name, sa.Integer(), nullable=True))
        # UPDATE ... FROM: PostgreSQL, and SQLite since 3.33.
        op.execute(
            "UPDATE vote SET model_a_id = battle.model_a_id, model_b_id = battle.model_b_id,"
            " annotator_id = battle.annotator_id FROM battle WHERE battle.id = vote.battle_id"
        )
        with op.batch_alter_table("vote", schema=None) as batch_op:
            batch_op.alter_column("model_a_id", existing_type=sa.Integer(), nullable=False)
            batch_op.alter_column("model_b_id", existing_type=sa.Integer(), nullable=False)
            batch_op.create_foreign_key("fk_vote_model_a_id_model", "model", ["model_a_id"], ["id"])
            batch_op.create_foreign_key("fk_vote_model_b_id_model", "model", ["model_b_id"], ["id"])
            batch_op.create_foreign_key(
                "fk_vote_annotator_id_annotator", "annotator", ["annotator_id"], ["id"]
            )
    if "ix_vote_cells" not in {ix["name"] for ix in sa.inspect(bind).get_indexes("vote")}:
        op.create_index("ix_vote_cells", "vote", _INDEX_COLUMNS, unique=False)
    if bind.dialect.name == "postgresql":
        op.execute("ANALYZE vote")


def downgrade() -> None:
    op.drop_index("ix_vote_cells", table_name="vote")
    with op.batch_alter_table("vote", schema=None) as batch_op:
        batch_op.drop_constraint("fk_vote_annotator_id_annotator", type_="foreignkey")
        batch_op.drop_constraint("fk_vote_model_b_id_model", type_="foreignkey")
        batch_op.drop_constraint("fk_vote_model_a_id_model", type_="foreignkey")
        for name in reversed(_COLUMNS):
            batch_op.drop_column(name)
