"""battle: no index on (model_a_id, model_b_id)

Its one reader, the pairing's votes per model pair, now groups the votes' own copies of the pair
(``ix_vote_cells`` covers them), so the battle index only cost writes: a pair-ordered index rewrites
pages all over itself on every step of a large import (1M battles: about a fifth of the merge).
Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0019_no_battle_pair_index
Revises: 0018_importrow_no_digest_index
Create Date: 2026-11-25 16:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_no_battle_pair_index"
down_revision: str | None = "0018_importrow_no_digest_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEX = "ix_battle_models"


def _has_index() -> bool:
    return _INDEX in {i["name"] for i in sa.inspect(op.get_bind()).get_indexes("battle")}


def upgrade() -> None:
    if _has_index():
        op.drop_index(_INDEX, table_name="battle")


def downgrade() -> None:
    if not _has_index():
        op.create_index(_INDEX, "battle", ["model_a_id", "model_b_id"])
