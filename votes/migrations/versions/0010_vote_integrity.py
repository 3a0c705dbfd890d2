"""vote integrity: one judgement per annotator, prompt and pair; annotators written at the first vote;
a salted address hash on each vote

``battle.judgement_key`` ("annotator:prompt:lower model:higher model") is unique, so the store refuses a
second judgement of the same prompt and unordered pair by the same annotator, whatever token it came
with. Existing site battles get the key on the first judgement of each group only (later repeats stay
stored as they were). ``annotator.session_key`` lets an anonymous visitor's row be written at the first
vote instead of the first page view; ``vote.address_hash`` groups annotators by network address in the
review without storing the address. Idempotent, because a database made by ``create_all`` is stamped at
0001 and upgraded.

Revision ID: 0010_vote_integrity
Revises: 0009_vote_weights
Create Date: 2026-11-25 04:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_vote_integrity"
down_revision: str | None = "0009_vote_weights"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_LOW = "CASE WHEN model_a_id < model_b_id THEN model_a_id ELSE model_b_id END"
_HIGH = "CASE WHEN model_a_id < model_b_id THEN model_b_id ELSE model_a_id END"
_KEY = (
    "CAST(annotator_id AS VARCHAR) || ':' || CAST(prompt_id AS VARCHAR) || ':' || "
    f"CAST({_LOW} AS VARCHAR) || ':' || CAST({_HIGH} AS VARCHAR)"
)

# The first site judgement of each (annotator, prompt, pair) gets its key; later repeats keep none.
_BACKFILL = (
    f"UPDATE battle SET judgement_key = {_KEY} WHERE id IN (SELECT MIN(id) FROM battle"  # nosec B608  # constants only
    " WHERE token_id IS NOT NULL AND annotator_id IS NOT NULL AND prompt_id IS NOT NULL"
    f" GROUP BY annotator_id, prompt_id, {_LOW}, {_HIGH})"
)


def _columns(table: str) -> set[str]:
    return {c["name"] for c in sa.inspect(op.get_bind()).get_columns(table)}


def upgrade() -> None:
    # Plain ADD COLUMN and unique indexes: SQLite alters in place (a batch copy of a table that votes
    # refer to would trip the foreign keys).
    if "session_key" not in _columns("annotator"):
        op.add_column("annotator", sa.Column("session_key", sa.String(length=64), nullable=True))
        op.create_index("ix_annotator_session_key", "annotator", ["session_key"], unique=True)
    if "judgement_key" not in _columns("battle"):
        op.add_column("battle", sa.Column("judgement_key", sa.String(length=100), nullable=True))
        op.execute(_BACKFILL)
        op.create_index("ix_battle_judgement_key", "battle", ["judgement_key"], unique=True)
    if "address_hash" not in _columns("vote"):
        op.add_column("vote", sa.Column("address_hash", sa.String(length=32), nullable=True))


def downgrade() -> None:
    op.drop_column("vote", "address_hash")
    op.drop_index("ix_battle_judgement_key", table_name="battle")
    op.drop_column("battle", "judgement_key")
    op.drop_index("ix_annotator_session_key", table_name="annotator")
    op.drop_column("annotator", "session_key")
