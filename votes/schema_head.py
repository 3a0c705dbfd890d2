"""Whether a database's schema is at the newest revision, told without loading Alembic.

Opening the embedded SQLite store ran Alembic's upgrade on every command: importing Alembic and loading
every revision module to find the head cost about half a second of each ``arena publish`` even when
there was nothing to migrate. The head is the newest revision file's name (revision ids are their file
names since revision 0004; ``tests/votes/migrations/test_migrations.py`` checks that this is Alembic's
head), and the database's revision is one row of ``alembic_version``: when they agree there is nothing to
do, and anything else (an older revision, no version table, several rows) goes through Alembic as before.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

__all__ = ["VERSIONS_DIR", "at_newest_revision", "newest_revision_file"]

VERSIONS_DIR = Path(__file__).resolve().parent / "migrations" / "versions"


def newest_revision_file() -> str:
    """The name (without ``.py``) of the highest-numbered revision file: the head's revision id."""
    names = sorted(p.stem for p in VERSIONS_DIR.glob("[0-9][0-9][0-9][0-9]_*.py"))
    if not names:
        raise RuntimeError(f"no migration revisions found in {VERSIONS_DIR}")
    return names[-1]


def at_newest_revision(engine: Engine) -> bool:
    """True when the database records exactly one revision and it is the newest (False when it cannot
    be read: then Alembic decides)."""
    try:
        with engine.connect() as conn:
            stored = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    except SQLAlchemyError:
        return False
    return list(stored) == [newest_revision_file()]
