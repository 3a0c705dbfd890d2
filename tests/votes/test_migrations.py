"""The shipped migrations build exactly the schema the models declare, on both backends."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlmodel import SQLModel

from votes.db import make_engine
from votes.migrate import current_revision, head_revision, upgrade_database
from votes.schema_head import at_newest_revision, newest_revision_file


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


def test_newest_revision_file_is_alembics_head_and_tells_an_up_to_date_store(db_url: str) -> None:
    assert newest_revision_file() == head_revision()  # a revision id must be its file's name
    engine = make_engine(db_url)
    try:
        assert not at_newest_revision(engine)  # no version table yet
        upgrade_database(db_url)
        assert at_newest_revision(engine)
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '0017_shown_vote_ids'"))
        assert not at_newest_revision(engine)
    finally:
        engine.dispose()
