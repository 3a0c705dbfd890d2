"""importrow: no index on (import_id, digest, seq)

An import run now counts repeated rows in memory (``votes.imports.digest_counts``) and reads staged digests by
primary key only; the hash-ordered index cost more disk writes than any other part of an import.
Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0018_importrow_no_digest_index
Revises: 0017_shown_vote_ids
Create Date: 2026-11-25 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_importrow_no_digest_index"
down_revision: str | None = "0017_shown_vote_ids"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEX = "ix_importrow_digest"


def _has_index() -> bool:
    return _INDEX in {i["name"] for i in sa.inspect(op.get_bind()).get_indexes("importrow")}


def upgrade() -> None:
    if _has_index():
        op.drop_index(_INDEX, table_name="importrow")


def downgrade() -> None:
    if not _has_index():
        op.create_index(_INDEX, "importrow", ["import_id", "digest", "seq"])
