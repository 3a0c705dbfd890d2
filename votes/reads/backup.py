"""Backups that restore: a consistent copy of the store and a manifest that says what it holds.

A backup is a folder with two files:

* ``database.sqlite3`` (SQLite, written through the online backup API, so the copy is consistent while
  the site serves and votes arrive) or ``database.pgdump`` (PostgreSQL, ``pg_dump --format=custom``,
  taken inside the same snapshot the manifest is counted in): each dialect's
  :meth:`~votes.dialects.Dialect.copy_out`, :meth:`~votes.dialects.Dialect.check_copy` and
  :meth:`~votes.dialects.Dialect.copy_in`;
* ``manifest.json``: row counts per table, the votes hash that snapshots record
  (:func:`votes.reads.exports.votes_sha256`), the schema revision, the Arena version and the file's sha256.

:func:`verify_backup` checks a backup on its own; :func:`restore_backup` loads it into an empty database
(or, with ``force``, over a non-empty one) and then checks the restored rows against the manifest.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alembic.runtime.migration import MigrationContext
from sqlalchemy import func, inspect, select
from sqlalchemy.engine import Connection, Engine, make_url
from sqlmodel import SQLModel

from leaderboard.snapshot.files import package_version
from votes.db import make_engine, normalise_url
from votes.dialects import CopyError, dialect_named, dialect_of
from votes.reads.exports import votes_sha256

__all__ = [
    "MANIFEST_NAME",
    "BackupError",
    "Manifest",
    "backup_database",
    "read_manifest",
    "restore_backup",
    "verify_backup",
]

MANIFEST_NAME = "manifest.json"
FORMAT_VERSION = 1


class BackupError(Exception):
    """A backup that cannot be taken, read, verified or restored; the message says why."""


@dataclass(frozen=True)
class Manifest:
    """What a backup holds: enough to check a restore without trusting the file."""

    backend: str
    file: str
    file_sha256: str
    created_at: str
    schema_revision: str | None
    arena_version: str
    votes_sha256: str
    row_counts: dict[str, int] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _content(conn: Connection) -> tuple[dict[str, int], str, str | None]:
    """Row counts of every table of the schema, the votes hash and the schema revision, in one transaction."""
    tables = sorted(SQLModel.metadata.tables)
    counts = {
        name: int(conn.execute(select(func.count()).select_from(SQLModel.metadata.tables[name])).scalar_one())
        for name in tables
    }
    revision = MigrationContext.configure(conn).get_current_revision()
    return counts, votes_sha256(conn), revision


def backup_database(url: str, out: Path) -> Manifest:
    """Write a consistent backup of the database at ``url`` into the new folder ``out``.

    Raises
    ------
    BackupError
        ``out`` exists and is not an empty folder, the database is in memory, or a PostgreSQL client tool
        is missing or fails.
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BackupError(f"{out} exists and is not an empty folder")
    out.mkdir(parents=True, exist_ok=True)
    dialect = dialect_of(normalise_url(url))
    target = out / dialect.backup_file
    engine = make_engine(url)
    try:
        counts, digest, revision = dialect.copy_out(engine, target, _content)
    except CopyError as exc:
        raise BackupError(str(exc)) from None
    finally:
        engine.dispose()
    manifest = Manifest(
        backend=dialect.name,
        file=target.name,
        file_sha256=_file_sha256(target),
        created_at=datetime.now(UTC).isoformat(),
        schema_revision=revision,
        arena_version=package_version(),
        votes_sha256=digest,
        row_counts=counts,
    )
    (out / MANIFEST_NAME).write_text(manifest.to_json(), encoding="utf-8")
    return manifest


def read_manifest(folder: Path) -> Manifest:
    """The manifest of the backup in ``folder`` (a :class:`BackupError` if it is missing or malformed)."""
    path = folder / MANIFEST_NAME
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return Manifest(**data)
    except (OSError, ValueError, TypeError) as exc:
        raise BackupError(f"{path}: not a readable backup manifest ({exc})") from None


def _compare(
    manifest: Manifest, counts: dict[str, int], digest: str, revision: str | None, what: str
) -> None:
    problems = []
    if counts != manifest.row_counts:
        diff = {
            k: (manifest.row_counts.get(k), counts.get(k))
            for k in set(counts) | set(manifest.row_counts)
            if manifest.row_counts.get(k) != counts.get(k)
        }
        problems.append(f"row counts differ (manifest, found): {diff}")
    if digest != manifest.votes_sha256:
        problems.append(f"votes sha256 {digest} is not the manifest's {manifest.votes_sha256}")
    if revision != manifest.schema_revision:
        problems.append(f"schema revision {revision} is not the manifest's {manifest.schema_revision}")
    if problems:
        raise BackupError(f"{what}: " + "; ".join(problems))


def verify_backup(folder: Path) -> Manifest:
    """Check a backup without restoring it: the file's sha256; for SQLite also ``PRAGMA integrity_check``
    and the row counts, votes hash and revision read back from the copy; for PostgreSQL that
    ``pg_restore --list`` reads the archive. Returns the manifest; raises :class:`BackupError`."""
    manifest = read_manifest(folder)
    path = folder / manifest.file
    if not path.is_file():
        raise BackupError(f"{path} is missing")
    if _file_sha256(path) != manifest.file_sha256:
        raise BackupError(f"{path}: sha256 differs from the manifest (the file changed or is damaged)")
    try:
        dialect = dialect_named(manifest.backend)
    except NotImplementedError as exc:
        raise BackupError(f"{path}: {exc}") from None
    what = f"backup {folder}"
    try:
        dialect.check_copy(path, what, lambda conn: _compare(manifest, *_content(conn), what))
    except CopyError as exc:
        raise BackupError(str(exc)) from None
    return manifest


def _is_empty(engine: Engine) -> bool:
    names = set(inspect(engine).get_table_names())
    if not names:
        return True
    with engine.connect() as conn:
        for name in sorted(names & set(SQLModel.metadata.tables)):
            if conn.execute(select(func.count()).select_from(SQLModel.metadata.tables[name])).scalar_one():
                return False
    return True


def restore_backup(folder: Path, url: str, *, force: bool = False) -> Manifest:
    """Load the backup in ``folder`` into the database at ``url`` and check the result against its manifest.

    A database that holds rows is refused unless ``force`` (its content is then replaced). The backup is
    verified first, so a damaged file never replaces anything.

    Raises
    ------
    BackupError
        The backup fails verification, the target is not empty (without ``force``), the backends differ,
        a PostgreSQL client tool is missing, or the restored rows do not match the manifest.
    """
    manifest = verify_backup(folder)
    target = make_url(normalise_url(url))
    dialect = dialect_of(target)
    if dialect.name != manifest.backend:
        raise BackupError(
            f"a {manifest.backend} backup cannot be restored into {make_url(url).get_backend_name()}"
        )
    engine = make_engine(url)
    try:
        if not force and not _is_empty(engine):
            raise BackupError("the target database is not empty; pass --force to replace its content")
    finally:
        engine.dispose()
    try:
        dialect.copy_in(folder / manifest.file, target, replace=force)
    except CopyError as exc:
        raise BackupError(str(exc)) from None
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            _compare(manifest, *_content(conn), f"restored database {make_url(url).render_as_string()}")
    finally:
        engine.dispose()
    return manifest
