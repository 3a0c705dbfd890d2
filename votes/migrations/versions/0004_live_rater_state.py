"""liverating keeps any online rater's state: deviation, the state as JSON, the clock and the rater

Elo rows are left as they are (the new columns stay null). Idempotent, like 0003.

Revision ID: 0004_live_rater_state
Revises: 0003
Create Date: 2026-11-25 03:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_live_rater_state"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ("deviation", sa.Float()),
    ("state", sa.JSON()),
    ("clock", sa.Float()),
    ("rater", sa.String(length=200)),
)


def upgrade() -> None:
    existing = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("liverating")}
    missing = [(name, kind) for name, kind in _COLUMNS if name not in existing]
    if missing:
        with op.batch_alter_table("liverating", schema=None) as batch_op:
            for name, kind in missing:
                batch_op.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("liverating", schema=None) as batch_op:
        for name, _kind in reversed(_COLUMNS):
            batch_op.drop_column(name)
