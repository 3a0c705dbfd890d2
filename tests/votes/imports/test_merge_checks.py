"""PostgreSQL's merge steps check their foreign keys once per row referred to, only where the role may
skip the per-row checks and the tables hold exactly the declared keys; SQLite's keep its own per-row
checks. On both a row referred to and gone fails the step, and an import that keeps the per-row checks
gives the same result."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

import votes.imports.files
import votes.imports.merge_checks
import votes.imports.merging
import votes.imports.run_steps
from tests.conftest import schema_engine, scratch_pg_database
from tests.factories import live_ratings, row_counts
from tests.votes.conftest import small_import_steps
from tests.votes.imports.test_import_runs import battles_file
from votes.db import make_engine
from votes.imports.files import import_file
from votes.imports.merge_checks import MergeChecks, merge_checks_for
from votes.models import utcnow
from votes.tables import import_row_t, import_run_t, model_t, vote_t


@pytest.fixture(autouse=True)
def small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    small_import_steps(monkeypatch, batch=40, merge=25, alone=25)


@pytest.fixture
def pg(pg_engine: Engine) -> Engine:
    return pg_engine


PARENTS = {
    "annotator": ("annotator_id",),
    "model": ("model_a_id", "model_b_id"),
    "output": ("output_a_id", "output_b_id"),
    "prompt": ("prompt_id",),
}


@contextmanager
def plain_role(admin: Engine, *, may_skip_checks: bool = False) -> Iterator[Engine]:
    """The database of ``admin`` through a new role that is no superuser and owns nothing, granted the
    tables (and with ``may_skip_checks`` the setting that skips the per-row checks)."""
    name = f"arena_plain_{uuid.uuid4().hex[:10]}"
    with admin.begin() as conn:
        conn.execute(text(f'CREATE ROLE "{name}" LOGIN'))
        conn.execute(text(f'GRANT ALL ON ALL TABLES IN SCHEMA public TO "{name}"'))
        conn.execute(text(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "{name}"'))
        if may_skip_checks:
            conn.execute(text(f'GRANT SET ON PARAMETER session_replication_role TO "{name}"'))
    engine = make_engine(admin.url.set(username=name).render_as_string(hide_password=False))
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.execute(text(f'DROP OWNED BY "{name}"'))
            if may_skip_checks:
                conn.execute(text(f'REVOKE SET ON PARAMETER session_replication_role FROM "{name}"'))
            conn.execute(text(f'DROP ROLE "{name}"'))


def _checks(engine: Engine) -> MergeChecks | None:
    with engine.begin() as conn:
        return merge_checks_for(conn)


@pytest.mark.postgres
def test_a_superuser_gets_one_lock_statement_per_table_referred_to(pg: Engine) -> None:
    checks = _checks(pg)
    assert checks is not None
    assert {parent: columns for parent, _, columns in checks.parents} == PARENTS


@pytest.mark.postgres
def test_a_role_gets_them_only_when_granted_the_setting(pg: Engine) -> None:
    with plain_role(pg) as engine:
        assert _checks(engine) is None
    with plain_role(pg, may_skip_checks=True) as engine:
        assert _checks(engine) is not None


@pytest.mark.postgres
def test_an_import_with_set_wise_checks_equals_one_with_per_row_checks(pg: Engine, tmp_path: Path) -> None:
    path = battles_file(tmp_path / "b.jsonl", 300)
    assert _checks(pg) is not None
    fast = import_file(pg, path)
    with scratch_pg_database() as url, schema_engine(url) as admin, plain_role(admin) as other:
        assert _checks(other) is None
        slow = import_file(other, path)
        assert fast.n_added == slow.n_added == 300
        assert row_counts(pg) == row_counts(other)
        assert live_ratings(pg) == live_ratings(other)
        assert _votes(pg) == _votes(other)


def _votes(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(vote_t.c.battle_id, model_t.c.name, vote_t.c.winner)
            .join(model_t, model_t.c.id == vote_t.c.model_a_id)
            .order_by(vote_t.c.id)
        ).all()
    return [tuple(r) for r in rows]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def both(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An engine with the schema on each backend, whose role may skip PostgreSQL's per-row checks."""
    if request.param == "sqlite":
        with schema_engine(f"sqlite:///{tmp_path}/a.db") as engine:
            yield engine
    else:
        with scratch_pg_database() as url, schema_engine(url) as engine:
            yield engine


def _staged_run(engine: Engine) -> int:
    """A run in its merge, one staged row referring to a model and to a model that is not stored."""
    with engine.begin() as conn:
        now = utcnow()
        run = conn.execute(
            import_run_t.insert()
            .values(path="f", state="merging", started_at=now, heartbeat_at=now)
            .returning(import_run_t.c.id)
        ).scalar_one()
        model = conn.execute(
            model_t.insert().values(name="m", created_at=now).returning(model_t.c.id)
        ).scalar_one()
        row = {
            "import_id": run,
            "seq": 0,
            "digest": "0" * 40,
            "fresh": True,
            "model_a_id": model,
            "model_b_id": model + 1000,  # no such model
            "issued_at": now,
            "winner": "tie",
            "weight": 1.0,
            "sided": True,
            "import_digest": 7,
            "import_copy": 0,
        }
        conn.execute(import_row_t.insert().values(**row))
    return int(run)


def test_a_row_referred_to_and_gone_fails_the_step_and_adds_nothing(both: Engine) -> None:
    """PostgreSQL's set-wise checks fail the step, naming what is gone; SQLite's own per-row checks (it
    gets no set-wise ones) fail it as well, as PostgreSQL's per-row checks do."""
    run = _staged_run(both)
    checks = _checks(both)
    assert (checks is None) == (both.dialect.name == "sqlite")
    if checks is not None:
        with both.connect() as merger, votes.imports.run_steps.run_step_on(merger) as conn:
            with pytest.raises(IntegrityError, match="1 model row"):
                votes.imports.merging.merge_step(conn, run, 0, 1, checks=checks)
            conn.rollback()
    with both.connect() as conn, conn.begin():  # the same step with the per-row checks fails the same way
        with pytest.raises(IntegrityError):
            votes.imports.merging.merge_step(conn, run, 0, 1, checks=None)
    with both.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(vote_t)) == 0
        assert conn.scalar(text("SELECT count(*) FROM battle")) == 0


def test_a_merge_step_of_a_run_no_longer_recorded_fails(both: Engine) -> None:
    """A merge step checks its run's own row as the row recording the step would refer to it."""
    run = _staged_run(both)
    with both.begin() as conn:
        conn.execute(import_row_t.delete())
        conn.execute(import_run_t.delete())
    with both.connect() as merger, votes.imports.run_steps.run_step_on(merger) as conn:
        with pytest.raises(IntegrityError, match=f"import run {run} is no longer recorded"):
            votes.imports.merging.record_merged(conn, run, 1)
        conn.rollback()


@pytest.mark.postgres
@pytest.mark.parametrize(
    "change",
    [
        [
            "CREATE FUNCTION arena_t() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'",
            "CREATE TRIGGER own BEFORE INSERT ON vote FOR EACH ROW EXECUTE FUNCTION arena_t()",
        ],
        [
            "CREATE TABLE extra (id integer PRIMARY KEY)",
            "ALTER TABLE battle ADD COLUMN extra_id integer REFERENCES extra (id)",
        ],
    ],
    ids=["a trigger of its own", "a foreign key not declared"],
)
def test_a_store_with_more_than_the_declared_keys_keeps_the_per_row_checks(
    pg: Engine, change: list[str]
) -> None:
    assert _checks(pg) is not None
    with pg.begin() as conn:
        for statement in change:
            conn.execute(text(statement))
    assert _checks(pg) is None


def test_an_import_whose_model_is_gone_before_its_merge_fails_and_leaves_nothing(
    both: Engine, tmp_path: Path
) -> None:
    """A model the staged rows refer to, deleted before they merge, fails the whole import on both
    databases (PostgreSQL's set-wise checks, SQLite's own per-row ones) and leaves the store as it was."""
    before = row_counts(both)
    gone: list[int] = []

    def delete_a_model() -> None:
        if gone:
            return
        with both.begin() as conn:
            model = int(conn.scalar(select(import_row_t.c.model_a_id).limit(1)) or 0)
            conn.execute(model_t.delete().where(model_t.c.id == model))
        gone.append(model)

    with pytest.raises(IntegrityError):
        import_file(both, battles_file(tmp_path / "b.jsonl", 300), between_batches=delete_a_model)
    assert gone
    assert row_counts(both) == before
