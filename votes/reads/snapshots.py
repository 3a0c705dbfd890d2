"""Published snapshots in the store: insert and read, never change.

There is deliberately no update or delete function here, and the database refuses both on its own:
triggers on the ``snapshot`` table raise on UPDATE and DELETE (and TRUNCATE on PostgreSQL: each
dialect's :meth:`~votes.dialects.Dialect.immutable_guards`), so not even
a hand-written SQL statement or a future bug can rewrite what researchers have already cited. The
triggers are created with the table (``create_all``) and by :func:`ensure_snapshot_guards` (also run by
the Alembic revision), idempotently.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Table, event
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, SQLModel, col, select

from votes.dialects import dialect_of
from votes.models import Snapshot

if TYPE_CHECKING:  # the snapshot writer's libraries (pandas) are not needed to guard or record a row
    from leaderboard.snapshot.folder import SnapshotManifest

__all__ = [
    "AmbiguousSnapshotError",
    "find_snapshot",
    "IMMUTABLE_MESSAGE",
    "ensure_snapshot_guards",
    "get_snapshot",
    "insert_snapshot",
    "latest_snapshot",
    "list_slices",
    "list_snapshots",
    "snapshot_manifest",
]

IMMUTABLE_MESSAGE = "published snapshots are immutable"


def ensure_snapshot_guards(bind: Engine | Connection) -> None:
    """Create the UPDATE/DELETE-refusing triggers on ``snapshot`` if they are missing (idempotent)."""
    if isinstance(bind, Engine):
        with bind.begin() as conn:
            ensure_snapshot_guards(conn)
        return
    for statement in dialect_of(bind).immutable_guards("snapshot", IMMUTABLE_MESSAGE):
        bind.exec_driver_sql(statement)


def _guard_new_table(_table: Table, connection: Connection, **_kw: Any) -> None:
    ensure_snapshot_guards(connection)


# The guards follow the table wherever metadata.create_all() makes it.
event.listen(SQLModel.metadata.tables["snapshot"], "after_create", _guard_new_table)


def insert_snapshot(*, session: Session, manifest: SnapshotManifest) -> Snapshot:
    """Record a written snapshot folder as a published snapshot row (insert only; flushes, no commit)."""
    meta = manifest.metadata
    row = Snapshot(
        id=manifest.id,
        created_at=datetime.fromisoformat(str(meta["created_at"])),
        method=str(meta["method"]),
        parameters={
            "parameters": meta.get("parameters", {}),
            "parameters_fitted": meta.get("parameters_fitted", {}),
            "interval": meta.get("interval"),
            "seed": meta.get("seed"),
            "category": meta.get("category"),
            "language": meta.get("language"),
            "filters": meta.get("filters", {}),
            "package_version": meta.get("package_version"),
            "n_models": meta.get("n_models"),
        },
        slice=str(meta.get("slice", "all")),
        n_votes=int(round(float(meta["n_votes"]))),
        votes_sha256=str(meta["votes_sha256"]),
        files=dict(manifest.files),
        path=str(Path(manifest.path).resolve()),
    )
    session.add(row)
    session.flush()
    return row


def get_snapshot(*, session: Session, snapshot_id: str) -> Snapshot | None:
    return session.get(Snapshot, snapshot_id)


class AmbiguousSnapshotError(ValueError):
    """A snapshot id prefix matches more than one snapshot."""


def find_snapshot(*, session: Session, prefix: str) -> Snapshot | None:
    """The snapshot whose id is ``prefix`` or, failing that, the one snapshot whose id starts with it.

    Raises :class:`AmbiguousSnapshotError` (naming the candidates) when several ids start with it.
    """
    exact = session.get(Snapshot, prefix)
    if exact is not None or not prefix:
        return exact
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    statement = (
        select(Snapshot)
        .where(col(Snapshot.id).like(f"{escaped}%", escape="\\"))
        .order_by(col(Snapshot.id))
        .limit(6)
    )
    found = list(session.exec(statement).all())
    if len(found) > 1:
        shown = ", ".join(row.id for row in found[:5]) + (", ..." if len(found) > 5 else "")
        raise AmbiguousSnapshotError(f"{prefix!r} is the start of several snapshot ids: {shown}")
    return found[0] if found else None


def latest_snapshot(*, session: Session, slice: str = "all") -> Snapshot | None:  # noqa: A002
    """The newest published snapshot of a slice (``all``, ``category=coding``, ...)."""
    statement = (
        select(Snapshot)
        .where(Snapshot.slice == slice)
        .order_by(col(Snapshot.created_at).desc(), col(Snapshot.id).desc())
        .limit(1)
    )
    return session.exec(statement).first()


def list_snapshots(
    *,
    session: Session,
    slice: str | None = None,  # noqa: A002
    method: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> Sequence[Snapshot]:
    """Published snapshots, newest first, optionally for one slice or method."""
    statement = select(Snapshot)
    if slice is not None:
        statement = statement.where(Snapshot.slice == slice)
    if method is not None:
        statement = statement.where(Snapshot.method == method)
    statement = statement.order_by(col(Snapshot.created_at).desc(), col(Snapshot.id).desc()).offset(offset)
    if limit is not None:
        statement = statement.limit(limit)
    return session.exec(statement).all()


def list_slices(*, session: Session) -> list[str]:
    """Slices that have at least one published snapshot, ``all`` first."""
    found = set(session.exec(select(Snapshot.slice).distinct()).all())
    return sorted(found, key=lambda s: (s != "all", s))


def snapshot_manifest(row: Snapshot) -> dict[str, Any]:
    """A JSON-ready description of a snapshot row: identity, input digest, method and file sha256s."""
    return {
        "id": row.id,
        "created_at": row.created_at.isoformat(),
        "slice": row.slice,
        "method": row.method,
        "n_votes": row.n_votes,
        "votes_sha256": row.votes_sha256,
        "parameters": row.parameters,
        "files": dict(sorted(row.files.items())),
    }
