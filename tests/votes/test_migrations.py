"""The shipped migrations build exactly the schema the models declare, on both backends."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel

from votes.db import make_engine
from votes.migrate import current_revision, head_revision, upgrade_database


def test_migrated_schema_equals_models(db_url: str) -> None:
    assert upgrade_database(db_url) == head_revision()
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(context, SQLModel.metadata)
        assert diff == [], f"models and migrations differ; add a revision: {diff}"
    finally:
        engine.dispose()


def test_upgrade_is_repeatable_and_adopts_create_all_databases(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        SQLModel.metadata.create_all(engine)  # a database made before migrations existed
        assert current_revision(engine) is None
        assert upgrade_database(db_url) == head_revision()
        assert upgrade_database(db_url) == head_revision()
        assert "alembic_version" in inspect(engine).get_table_names()
    finally:
        engine.dispose()
