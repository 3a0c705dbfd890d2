"""Schema migrations (Alembic), shipped inside the package so an installed `arena` can upgrade a database.

``upgrade_database(url)`` brings any database to the newest revision; the app calls it on start for the
embedded SQLite default, and ``arena db upgrade`` runs it for PostgreSQL. When a table changes in
:mod:`votes.models`, add a revision::

    .venv/bin/python -m votes.migrate revision -m "what changed"

and check it with ``tests/votes/migrations/test_migrations.py`` (the migrated schema must equal the models).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Engine

from votes.db import make_engine, normalise_url

__all__ = ["MIGRATIONS_DIR", "alembic_config", "current_revision", "head_revision", "upgrade_database"]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str) -> Config:
    """An Alembic configuration for ``url`` without an alembic.ini file."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation: a literal % in a password must be doubled.
    config.set_main_option("sqlalchemy.url", normalise_url(url).replace("%", "%%"))
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    if head is None:
        raise RuntimeError("no migration revisions found")
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade_database(url: str, *, revision: str = "head") -> str:
    """Apply every pending migration to the database at ``url``; returns the revision it is now at.

    A database whose tables were made by ``SQLModel.metadata.create_all`` (no Alembic version yet, but the
    tables exist) is stamped as the first revision and then upgraded, so it joins the migration history.
    """
    engine = make_engine(url)
    try:
        tables = set(inspect(engine).get_table_names())
        config = alembic_config(url)
        if "alembic_version" not in tables and "vote" in tables:
            base = ScriptDirectory.from_config(config).get_base()
            command.stamp(config, base or "head")
        command.upgrade(config, revision)
        return current_revision(engine) or ""
    finally:
        engine.dispose()


def main(argv: list[str] | None = None) -> int:
    """Developer entry point: ``python -m votes.migrate revision -m MESSAGE`` autogenerates a revision
    against a scratch SQLite database upgraded to head."""
    parser = argparse.ArgumentParser(prog="python -m votes.migrate")
    sub = parser.add_subparsers(dest="command", required=True)
    rev = sub.add_parser("revision")
    rev.add_argument("-m", "--message", required=True)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/scratch.db"
        if any((MIGRATIONS_DIR / "versions").glob("*.py")):
            upgrade_database(url)
        command.revision(alembic_config(url), message=args.message, autogenerate=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
