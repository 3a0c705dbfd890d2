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


def test_staging_rows_lose_their_run_key_and_keep_their_rows(db_url: str) -> None:
    """A store at the revision before keeps a run's staged row through the upgrade, and the staging
    table no longer refers to the runs (PostgreSQL checked that key once per staged row)."""
    upgrade_database(db_url, revision="0020_import_slots")
    engine = make_engine(db_url)
    try:
        assert [k["referred_table"] for k in inspect(engine).get_foreign_keys("importrow")] == ["importrun"]
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO importrun (id, path, state, started_at, heartbeat_at)"
                    " VALUES (7, 'battles.parquet', 'staging', '2026-12-06 10:00:00', '2026-12-06 10:00:00')"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO importrow (import_id, seq, digest, model_a_id, model_b_id, issued_at,"
                    " winner, weight, sided) VALUES (7, 0, 'ab', 1, 2, '2026-12-06 10:00:00', 'model_a', 1.0,"
                    " true)"
                )
            )
        assert upgrade_database(db_url) == head_revision()
        inspector = inspect(engine)
        assert inspector.get_foreign_keys("importrow") == []
        assert inspector.get_pk_constraint("importrow")["constrained_columns"] == ["import_id", "seq"]
        with engine.connect() as conn:
            assert conn.execute(text("SELECT import_id, seq, digest FROM importrow")).all() == [(7, 0, "ab")]
    finally:
        engine.dispose()
