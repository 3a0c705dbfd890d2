"""answer samples: several answers per (prompt, model); votes indexed by address hash

``output.sample`` numbers a model's answers to one prompt (0 for the answer every existing row is), and
the unique constraint moves from (prompt, model) to (prompt, model, sample): a battle draws one sample,
so a reveal names that one answer and not every answer the model gave. ``vote.address_hash`` is indexed
because pairing reads the answers already revealed to an address, so that a fresh cookie from the same
network is not shown them again.

On SQLite the output table is copied to change its constraint; ``votes/migrations/env.py`` turns foreign
key enforcement off around the migrations (as SQLite's own procedure for table changes says) and checks
every reference afterwards.

Revision ID: 0012_answer_samples
Revises: 0011_pairing_weights
Create Date: 2026-11-25 07:50:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_answer_samples"
down_revision: str | None = "0011_pairing_weights"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _inspector() -> sa.engine.Inspector:
    return sa.inspect(op.get_bind())


def upgrade() -> None:
    inspector = _inspector()
    columns = {c["name"] for c in inspector.get_columns("output")}
    uniques = {u["name"] for u in inspector.get_unique_constraints("output")}
    with op.batch_alter_table("output") as batch:
        if "sample" not in columns:
            batch.add_column(sa.Column("sample", sa.Integer(), nullable=False, server_default=sa.text("0")))
        if "uq_output_prompt_model" in uniques:
            batch.drop_constraint("uq_output_prompt_model", type_="unique")
        if "uq_output_prompt_model_sample" not in uniques:
            batch.create_unique_constraint(
                "uq_output_prompt_model_sample", ["prompt_id", "model_id", "sample"]
            )
    if "ix_vote_address_hash" not in {i["name"] for i in inspector.get_indexes("vote")}:
        op.create_index("ix_vote_address_hash", "vote", ["address_hash"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_vote_address_hash", table_name="vote")
    extra = op.get_bind().execute(sa.text("SELECT COUNT(*) FROM output WHERE sample <> 0")).scalar_one()
    if extra:
        raise RuntimeError(f"{extra} outputs are second or later samples; remove them before downgrading")
    with op.batch_alter_table("output") as batch:
        batch.drop_constraint("uq_output_prompt_model_sample", type_="unique")
        batch.create_unique_constraint("uq_output_prompt_model", ["prompt_id", "model_id"])
        batch.drop_column("sample")
