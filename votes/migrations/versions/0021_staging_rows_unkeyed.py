"""importrow: no foreign key to importrun

A staged row's run is written before the row and deleted after it, by the same import code, and a run
that finishes alone empties the whole staging table (:mod:`votes.imports.runs`), so the key only ever
checked what the code already ensures. PostgreSQL checked it once per staged row, a trigger that
locks the run's row: 3 s of server time for a million rows (``COPY`` of 1M rows into the staging table:
5.0-5.6 s with the key, 1.9-2.5 s without), spent on the two cores the merge beside the staging also
needs. Staging tables of bulk loads carry no such keys.

Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0021_staging_rows_unkeyed
Revises: 0020_import_slots
Create Date: 2026-12-06 11:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021_staging_rows_unkeyed"
down_revision: str | None = "0020_import_slots"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NAME = "fk_importrow_import_id_importrun"


def _run_keys() -> list[str | None]:
    """The names of ``importrow``'s foreign keys to ``importrun`` (None: unnamed, as SQLite's)."""
    found = sa.inspect(op.get_bind()).get_foreign_keys("importrow")
    return [key.get("name") for key in found if key["referred_table"] == "importrun"]


def upgrade() -> None:
    names = _run_keys()
    if not names:
        return
    if op.get_bind().dialect.name == "sqlite":  # SQLite's table constraints are dropped by rebuilding it
        convention = {"fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s"}
        with op.batch_alter_table("importrow", recreate="always", naming_convention=convention) as batch:
            batch.drop_constraint(_NAME, type_="foreignkey")
    else:
        for name in names:
            op.drop_constraint(str(name), "importrow", type_="foreignkey")


def downgrade() -> None:
    with op.batch_alter_table("importrow") as batch:
        batch.create_foreign_key(_NAME, "importrun", ["import_id"], ["id"])
