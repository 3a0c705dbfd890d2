"""battle: imported keys found by two integers; indexes of mostly empty columns hold only rows that set them

``battle.import_key`` loses its unique constraint (a 42-character text in hash order, the largest cost of
a large import's writes) to ``import_digest`` and ``import_copy``, unique together, filled here from the
stored keys (see :mod:`votes.imports.keys`; the key parsing is frozen here as it was at this revision);
``importrow`` gets the same two columns in place of its key's text (made of its digest and the occurrence
number when it is merged). Keys sharing a digest's first 64 bits keep the slot for the oldest battle; the
others are found by their text (``ix_battle_import_key_apart``). ``token_id`` loses its unique constraint to a
unique index of the rows that have a token; the judgement key, prompt and annotator indexes, and the vote's
network hash index, leave out empty values too.
Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0020_import_slots
Revises: 0019_no_battle_pair_index
Create Date: 2026-11-25 19:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020_import_slots"
down_revision: str | None = "0019_no_battle_pair_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHUNK = 50_000
_APART = "import_key IS NOT NULL AND import_digest IS NULL"
# name, columns, unique, which rows
_INDEXES = (
    ("ix_battle_judgement_key", ["judgement_key"], True, "judgement_key IS NOT NULL"),
    ("ix_battle_token_id", ["token_id"], True, "token_id IS NOT NULL"),
    ("ix_battle_prompt_id", ["prompt_id"], False, "prompt_id IS NOT NULL"),
    ("ix_battle_annotator_id", ["annotator_id"], False, "annotator_id IS NOT NULL"),
    ("ix_battle_import_slot", ["import_digest", "import_copy"], True, "import_digest IS NOT NULL"),
    ("ix_battle_import_key_apart", ["import_key"], True, _APART),
)
_UNIQUE_COLUMNS = ("import_key", "token_id")


#: The lower-case hexadecimal digits of a key's digest.
_HEX = frozenset("0123456789abcdef")


def key_parts(keys: Sequence[str]) -> list[tuple[int, int] | None]:
    """The ``import_digest`` and ``import_copy`` of each key ``"<40 hex digits>-<n>"``: the digest's first
    64 bits as a signed integer, and ``n``; None for any other text. Frozen as the live code had it at this
    revision, so changing the import's code never changes what this migration did."""
    parts: list[tuple[int, int] | None] = []
    for key in keys:
        digest, dash, occurrence = key.partition("-")
        well_formed = (
            len(digest) == 40
            and bool(dash)
            and set(digest) <= _HEX
            and occurrence.isascii()
            and occurrence.isdigit()
            and len(occurrence) <= 9
            and str(int(occurrence)) == occurrence
        )
        if not well_formed:
            parts.append(None)
            continue
        prefix = int(digest[:16], 16)
        parts.append((prefix - (1 << 64) if prefix >= 1 << 63 else prefix, int(occurrence)))
    return parts


def _columns(table: str) -> set[str]:
    return {c["name"] for c in sa.inspect(op.get_bind()).get_columns(table)}


def _unique_on(column: str) -> list[str | None]:
    """The names of ``battle``'s unique constraints on ``column`` alone (None: unnamed, as SQLite's)."""
    found = sa.inspect(op.get_bind()).get_unique_constraints("battle")
    return [u["name"] for u in found if u["column_names"] == [column]]


def upgrade() -> None:
    bind = op.get_bind()
    if "import_digest" not in _columns("importrow"):
        _add_columns("importrow")
        _fill(bind, "importrow", ("import_id", "seq"))
    if "import_key" in _columns("importrow"):
        with op.batch_alter_table("importrow") as batch:
            batch.drop_column("import_key")
    if "import_digest" not in _columns("battle"):
        _add_columns("battle")
        _fill(bind, "battle", ("id",))
        # Keys that share a slot (two digests with the same first 64 bits): the oldest battle keeps it.
        op.execute(
            "UPDATE battle SET import_digest = NULL WHERE id IN (SELECT id FROM (SELECT id, row_number()"
            " OVER (PARTITION BY import_digest, import_copy ORDER BY id) AS n FROM battle"
            " WHERE import_digest IS NOT NULL) ranked WHERE n > 1)"
        )
    unique = {column: _unique_on(column) for column in _UNIQUE_COLUMNS}
    if any(unique.values()):
        if bind.dialect.name == "sqlite":  # SQLite's table constraints are dropped by rebuilding the table
            convention = {"uq": "uq_%(table_name)s_%(column_0_name)s"}
            with op.batch_alter_table("battle", recreate="always", naming_convention=convention) as batch:
                for column, found in unique.items():
                    if found:
                        batch.drop_constraint(f"uq_battle_{column}", type_="unique")
        else:
            for found in unique.values():
                for name in found:
                    op.drop_constraint(str(name), "battle", type_="unique")
    indexes = {i["name"] for i in sa.inspect(bind).get_indexes("battle")}
    for name, columns, is_unique, where in _INDEXES:
        if name in indexes:
            op.drop_index(name, table_name="battle")
        op.create_index(
            name,
            "battle",
            columns,
            unique=is_unique,
            sqlite_where=sa.text(where),
            postgresql_where=sa.text(where),
        )
    if "ix_vote_address_hash" in {i["name"] for i in sa.inspect(bind).get_indexes("vote")}:
        op.drop_index("ix_vote_address_hash", table_name="vote")
    hashed = sa.text("address_hash IS NOT NULL")
    op.create_index(
        "ix_vote_address_hash", "vote", ["address_hash"], sqlite_where=hashed, postgresql_where=hashed
    )


def _add_columns(table: str) -> None:
    op.add_column(table, sa.Column("import_digest", sa.BigInteger(), nullable=True))
    op.add_column(table, sa.Column("import_copy", sa.Integer(), nullable=True))


def _fill(bind: sa.engine.Connection, table: str, key: tuple[str, ...]) -> None:
    """Each stored key's two integers, read and written in chunks of rows in key order."""
    order = ", ".join(key)
    after: tuple[object, ...] | None = None
    while True:
        since = "" if after is None else f" AND ({order}) > ({', '.join(f':k{i}' for i in range(len(key)))})"
        rows = bind.execute(
            sa.text(
                f"SELECT {order}, import_key FROM {table} WHERE import_key IS NOT NULL{since}"  # nosec B608
                f" ORDER BY {order} LIMIT {_CHUNK}"
            ),
            {} if after is None else {f"k{i}": v for i, v in enumerate(after)},
        ).all()
        if not rows:
            return
        updates = []
        for row, parts in zip(rows, key_parts([str(r[-1]) for r in rows]), strict=True):
            if parts is not None:
                values = {f"k{i}": v for i, v in enumerate(row[:-1])}
                updates.append({**values, "digest": parts[0], "copy": parts[1]})
        if updates:
            match = " AND ".join(f"{k} = :k{i}" for i, k in enumerate(key))
            bind.execute(
                sa.text(
                    f"UPDATE {table} SET import_digest = :digest, import_copy = :copy WHERE {match}"  # nosec B608
                ),
                updates,
            )
        after = tuple(rows[-1][:-1])


def downgrade() -> None:
    bind = op.get_bind()
    op.drop_index("ix_vote_address_hash", table_name="vote")
    op.create_index("ix_vote_address_hash", "vote", ["address_hash"])
    indexes = {i["name"] for i in sa.inspect(bind).get_indexes("battle")}
    for name, columns, is_unique, _ in _INDEXES:
        if name in indexes:
            op.drop_index(name, table_name="battle")
        if name in ("ix_battle_judgement_key", "ix_battle_prompt_id", "ix_battle_annotator_id"):
            op.create_index(name, "battle", columns, unique=is_unique)
    with op.batch_alter_table("battle") as batch:
        for column in _UNIQUE_COLUMNS:
            batch.create_unique_constraint(f"uq_battle_{column}", [column])
        batch.drop_column("import_copy")
        batch.drop_column("import_digest")
    with op.batch_alter_table("importrow") as batch:
        batch.add_column(sa.Column("import_key", sa.String(80), nullable=True))
    op.execute("UPDATE importrow SET import_key = digest || '-' || import_copy WHERE import_copy IS NOT NULL")
    with op.batch_alter_table("importrow") as batch:
        batch.drop_column("import_copy")
        batch.drop_column("import_digest")
