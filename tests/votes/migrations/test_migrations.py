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


def test_model_roles_upgrade_keeps_contestants_and_makes_past_judges_judges(db_url: str) -> None:
    """A store at the revision before: every model stays a contestant, except those that have judged
    (``judgment.judge``): a judge, or both when it also answers catalog prompts (a live battle's prompt
    does not count: a judge answered those only because nothing kept it out)."""
    upgrade_database(db_url, revision="0021_staging_rows_unkeyed")
    engine = make_engine(db_url)
    t = "'2026-12-06 10:00:00'"
    try:
        with engine.begin() as conn:
            for i, name in enumerate(["alpha", "J", "K", "L"], start=1):
                conn.execute(
                    text(
                        f"INSERT INTO model (id, name, active, created_at) VALUES ({i}, '{name}', true, {t})"
                    )
                )
            conn.execute(text(f"INSERT INTO prompt (id, text, created_at) VALUES (1, 'catalog', {t})"))
            conn.execute(
                text(f"INSERT INTO prompt (id, text, source, created_at) VALUES (2, 'mine', 'live', {t})")
            )
            # alpha and K answer the catalog; L answered a live battle only; J answers nothing.
            for out, prompt, model in ((1, 1, 1), (2, 1, 3), (3, 2, 4), (4, 2, 1)):
                conn.execute(
                    text(
                        "INSERT INTO output (id, prompt_id, model_id, sample, text, created_at)"
                        f" VALUES ({out}, {prompt}, {model}, 0, 'x', {t})"
                    )
                )
            for judge in ("J", "K", "L", "gone"):  # a judge whose model row is no more is left alone
                conn.execute(
                    text(
                        "INSERT INTO judgment (prompt_id, output_a_id, output_b_id, judge, template,"
                        " template_sha256, raw_text, n_votes, n_attempts, latency_s, run_id, created_at)"
                        f" VALUES (1, 1, 2, '{judge}', 't', 'sha', '[[A]]', 1, 1, 0.1, 'r', {t})"
                    )
                )
        assert upgrade_database(db_url) == head_revision()
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT name, role, active, aliases FROM model ORDER BY id")).all()
        assert [tuple(r) for r in rows] == [
            ("alpha", "contestant", True, None),
            ("J", "judge", True, None),
            ("K", "both", True, None),
            ("L", "judge", True, None),
        ]
        # A model added after the upgrade without saying its role is a contestant (the column's default).
        with engine.begin() as conn:
            conn.execute(
                text(f"INSERT INTO model (id, name, active, created_at) VALUES (5, 'new', true, {t})")
            )
            assert conn.execute(text("SELECT role FROM model WHERE id = 5")).scalar_one() == "contestant"
    finally:
        engine.dispose()
