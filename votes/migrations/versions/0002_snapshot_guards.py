"""published snapshots are immutable: triggers refuse UPDATE and DELETE on snapshot rows

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 23:25:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # imported here: alembic loads every revision file on each upgrade, and this module pulls in the
    # snapshot writer's libraries
    from votes.snapshots import ensure_snapshot_guards

    ensure_snapshot_guards(op.get_bind())


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS snapshot_no_update")
        op.execute("DROP TRIGGER IF EXISTS snapshot_no_delete")
    else:
        op.execute("DROP TRIGGER IF EXISTS snapshot_no_update_delete ON snapshot")
        op.execute("DROP TRIGGER IF EXISTS snapshot_no_truncate ON snapshot")
        op.execute("DROP FUNCTION IF EXISTS arena_snapshot_immutable()")
