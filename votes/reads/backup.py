"""Backups that restore: a consistent copy of the store and a manifest that says what it holds.

A backup is a folder with two files:

* ``database.sqlite3`` (SQLite, written through the online backup API, so the copy is consistent while
  the site serves and votes arrive) or ``database.pgdump`` (PostgreSQL, ``pg_dump --format=custom``,
  taken inside the same snapshot the manifest is counted in);
* ``manifest.json``: row counts per table, the votes hash that snapshots record
  (:func:`votes.reads.queries.votes_sha256`), the schema revision, the Arena version and the file's sha256.

:func:`verify_backup` checks a backup on its own; :func:`restore_backup` loads it into an empty database
(or, with ``force``, over a non-empty one) and then checks the restored rows against the manifest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess  # nosec B404 # runs pg_dump / pg_restore with arguments we build, never a shell
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alembic.runtime.migration import MigrationContext
from sqlalchemy import func, inspect, select, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlmodel import SQLModel

from leaderboard.snapshot.files import package_version
from votes.db import is_sqlite, make_engine, normalise_url, sqlite_file
from votes.reads.queries import votes_sha256

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
SQLITE_NAME = "database.sqlite3"
PGDUMP_NAME = "database.pgdump"
FORMAT_VERSION = 1
#: Pages copied per step of SQLite's online backup; writers get the lock between steps.
SQLITE_BACKUP_PAGES = 1024


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


def _sqlite_path(url: str) -> Path:
    path = sqlite_file(url)
    if path is None:
        raise BackupError("an in-memory SQLite database cannot be backed up or restored; use a file")
    return path


def _libpq(url: str) -> tuple[str, dict[str, str]]:
    """A libpq connection string for pg_dump / pg_restore, the password handed over in the environment."""
    parsed = make_url(normalise_url(url))
    env = dict(os.environ)
    if parsed.password:
        env["PGPASSWORD"] = str(parsed.password)
    plain = parsed.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), env


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BackupError(
            f"`{name}` is not on PATH: install the PostgreSQL client tools (Debian: postgresql-client, "
            "at least the server's major version)"
        )
    return path


def _run(cmd: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)  # nosec B603
    if done.returncode != 0:
        raise BackupError(f"{Path(cmd[0]).name} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


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
    if is_sqlite(url):
        target = out / SQLITE_NAME
        source = sqlite3.connect(_sqlite_path(url), timeout=30)
        try:
            dest = sqlite3.connect(target)
            try:
                # Step by step: between steps writers may commit, and SQLite restarts the copy of any page
                # changed under it, so the result is the database as of one moment.
                source.backup(dest, pages=SQLITE_BACKUP_PAGES)
            finally:
                dest.close()
        finally:
            source.close()
        copy = make_engine(f"sqlite:///{target}")
        try:
            with copy.connect() as conn:
                counts, digest, revision = _content(conn)
        finally:
            copy.dispose()
        backend = "sqlite"
    else:
        target = out / PGDUMP_NAME
        dsn, env = _libpq(url)
        pg_dump = _tool("pg_dump")
        engine = make_engine(url)
        try:
            with engine.connect() as conn:
                # The manifest is counted in the very snapshot pg_dump then copies: both see one moment.
                conn.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))
                snapshot = conn.execute(text("SELECT pg_export_snapshot()")).scalar_one()
                counts, digest, revision = _content(conn)
                _run(
                    [
                        pg_dump,
                        "--format=custom",
                        f"--snapshot={snapshot}",
                        "--no-owner",
                        f"--file={target}",
                        f"--dbname={dsn}",
                    ],
                    env,
                )
                conn.rollback()
        finally:
            engine.dispose()
        backend = "postgresql"
    manifest = Manifest(
        backend=backend,
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
    if manifest.backend == "sqlite":
        # Checked on a scratch copy: opening the backup itself in WAL mode would change its bytes.
        with tempfile.TemporaryDirectory(prefix="arena-verify-") as tmp:
            scratch = Path(tmp) / SQLITE_NAME
            shutil.copyfile(path, scratch)
            _check_sqlite(scratch, manifest, f"backup {folder}")
    else:
        _run([_tool("pg_restore"), "--list", str(path)], dict(os.environ))
    return manifest


def _check_sqlite(path: Path, manifest: Manifest, what: str) -> None:
    raw = sqlite3.connect(path)
    try:
        verdict = raw.execute("PRAGMA integrity_check").fetchall()
    finally:
        raw.close()
    if verdict != [("ok",)]:
        raise BackupError(f"{what}: integrity check failed: {verdict[:5]}")
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            _compare(manifest, *_content(conn), what)
    finally:
        engine.dispose()


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
    if ("sqlite" if is_sqlite(url) else "postgresql") != manifest.backend:
        raise BackupError(
            f"a {manifest.backend} backup cannot be restored into {make_url(url).get_backend_name()}"
        )
    engine = make_engine(url)
    try:
        if not force and not _is_empty(engine):
            raise BackupError("the target database is not empty; pass --force to replace its content")
    finally:
        engine.dispose()
    source = folder / manifest.file
    if manifest.backend == "sqlite":
        src = sqlite3.connect(source)
        try:
            dest = sqlite3.connect(_sqlite_path(url), timeout=30)
            try:
                src.backup(dest)  # replaces every page of the target, in one step under its write lock
            finally:
                dest.close()
        finally:
            src.close()
    else:
        dsn, env = _libpq(url)
        cmd = [
            _tool("pg_restore"),
            "--no-owner",
            "--exit-on-error",
            "--single-transaction",
            f"--dbname={dsn}",
        ]
        if force:
            cmd[1:1] = ["--clean", "--if-exists"]
        _run([*cmd, str(source)], env)
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            _compare(manifest, *_content(conn), f"restored database {make_url(url).render_as_string()}")
    finally:
        engine.dispose()
    return manifest
