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


# The triggers as they were at this revision (frozen: the live ones, votes.reads.snapshots, may change later
# through a revision of their own).
_MESSAGE = "published snapshots are immutable"
_SQLITE = (
    "CREATE TRIGGER IF NOT EXISTS snapshot_no_update BEFORE UPDATE ON snapshot "
    f"BEGIN SELECT RAISE(ABORT, '{_MESSAGE}'); END",
    "CREATE TRIGGER IF NOT EXISTS snapshot_no_delete BEFORE DELETE ON snapshot "
    f"BEGIN SELECT RAISE(ABORT, '{_MESSAGE}'); END",
)
_POSTGRES = (
    "CREATE OR REPLACE FUNCTION arena_snapshot_immutable() RETURNS trigger LANGUAGE plpgsql AS "
    f"$$ BEGIN RAISE EXCEPTION '{_MESSAGE}' USING ERRCODE = 'restrict_violation'; END $$",
    "CREATE OR REPLACE TRIGGER snapshot_no_update_delete BEFORE UPDATE OR DELETE ON snapshot "
    "FOR EACH ROW EXECUTE FUNCTION arena_snapshot_immutable()",
    "CREATE OR REPLACE TRIGGER snapshot_no_truncate BEFORE TRUNCATE ON snapshot "
    "FOR EACH STATEMENT EXECUTE FUNCTION arena_snapshot_immutable()",
)


def upgrade() -> None:
    bind = op.get_bind()
    statements = {"sqlite": _SQLITE, "postgresql": _POSTGRES}.get(bind.dialect.name)
    if statements is None:
        raise NotImplementedError(f"no snapshot guard for the {bind.dialect.name} dialect")
    for statement in statements:
        bind.exec_driver_sql(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS snapshot_no_update")
        op.execute("DROP TRIGGER IF EXISTS snapshot_no_delete")
    else:
        op.execute("DROP TRIGGER IF EXISTS snapshot_no_update_delete ON snapshot")
        op.execute("DROP TRIGGER IF EXISTS snapshot_no_truncate ON snapshot")
        op.execute("DROP FUNCTION IF EXISTS arena_snapshot_immutable()")
