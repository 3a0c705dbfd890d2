"""import runs: battles files imported in short batches, staged aside and merged under an import id

``importrun`` holds one row per import (its state and heartbeat), ``importrow`` the validated battles
staged until the run merges them, ``importcreated`` the models, annotators, prompts and outputs a run
created, so that a failed or dead run can be removed row by row without one long transaction holding
the SQLite writer lock. Idempotent, because a database made by ``create_all`` is stamped at 0001 and
upgraded.

Revision ID: 0014_import_batches
Revises: 0013_gold_battles
Create Date: 2026-11-25 08:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_import_batches"
down_revision: str | None = "0013_gold_battles"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    tables = set(sa.inspect(op.get_bind()).get_table_names())
    if "importrun" not in tables:
        op.create_table(
            "importrun",
            sa.Column("id", sa.Integer(), primary_key=True),
            sa.Column("path", sa.String(length=1000), nullable=False),
            sa.Column("state", sa.String(length=20), nullable=False),
            sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        )
    if "importrow" not in tables:
        op.create_table(
            "importrow",
            sa.Column("import_id", sa.Integer(), sa.ForeignKey("importrun.id"), primary_key=True),
            sa.Column("seq", sa.Integer(), primary_key=True),
            sa.Column("digest", sa.String(length=40), nullable=False),
            sa.Column("import_key", sa.String(length=80), nullable=True),
            sa.Column("fresh", sa.Boolean(), nullable=True),
            sa.Column("prompt_id", sa.Integer(), nullable=True),
            sa.Column("output_a_id", sa.Integer(), nullable=True),
            sa.Column("output_b_id", sa.Integer(), nullable=True),
            sa.Column("model_a_id", sa.Integer(), nullable=False),
            sa.Column("model_b_id", sa.Integer(), nullable=False),
            sa.Column("annotator_id", sa.Integer(), nullable=True),
            sa.Column("issued_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("language", sa.String(length=50), nullable=True),
            sa.Column("extra", sa.JSON(), nullable=True),
            sa.Column("winner", sa.String(length=20), nullable=False),
            sa.Column("weight", sa.Float(), nullable=False),
            sa.Column("sided", sa.Boolean(), nullable=False),
        )
        op.create_index("ix_importrow_digest", "importrow", ["import_id", "digest", "seq"])
    if "importcreated" not in tables:
        op.create_table(
            "importcreated",
            sa.Column("import_id", sa.Integer(), sa.ForeignKey("importrun.id"), primary_key=True),
            sa.Column("kind", sa.String(length=20), primary_key=True),
            sa.Column("row_id", sa.Integer(), primary_key=True),
        )


def downgrade() -> None:
    op.drop_table("importcreated")
    op.drop_index("ix_importrow_digest", table_name="importrow")
    op.drop_table("importrow")
    op.drop_table("importrun")
