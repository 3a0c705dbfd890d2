"""Shared fixtures: a fresh database per test on SQLite and on PostgreSQL; real LLM servers per session.

PostgreSQL tests get a database of their own (created from the `test` database and dropped after), so
no test sees another's rows. Under `CI=true` a PostgreSQL that cannot be reached fails the run, and so
does an LLM server (`tests/llm_servers.py`) that cannot start.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

import votes.models  # noqa: F401  (registers the tables)
from tests.factories import seed_catalog
from tests.llm_servers import LlamaServer, LlamaServers
from votes.db import make_engine

PG_ADMIN_URL = os.environ.get("ARENA_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def _pg_admin() -> Engine | None:
    engine = make_engine(PG_ADMIN_URL)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - any connection failure means "not reachable"
        engine.dispose()
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL at {PG_ADMIN_URL} is not reachable under CI: {exc}")
        return None
    return engine


@contextmanager
def scratch_pg_database() -> Iterator[str]:
    """URL of a fresh, empty PostgreSQL database, dropped on exit (a skip, or under CI a failure, when
    no server answers)."""
    admin = _pg_admin()
    if admin is None:
        pytest.skip("PostgreSQL is not reachable (set CI=true to make this a failure)")
    name = f"arena_test_{uuid.uuid4().hex[:12]}"
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin.url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """URL of a fresh, empty PostgreSQL database, dropped after the test."""
    with scratch_pg_database() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """A fresh, empty database URL on each backend (a file SQLite, so WAL and locking are real)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/arena.db"
    url: str = request.getfixturevalue("pg_url")
    return url


@contextmanager
def schema_engine(url: str) -> Iterator[Engine]:
    """An engine on the database at ``url`` with the schema created, disposed of on exit."""
    eng = make_engine(url)
    SQLModel.metadata.create_all(eng)
    try:
        yield eng
    finally:
        eng.dispose()


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """An engine on a fresh database of each backend with the schema created."""
    with schema_engine(db_url) as eng:
        yield eng


@pytest.fixture
def pg_engine(pg_url: str) -> Iterator[Engine]:
    """An engine on a fresh PostgreSQL database with the schema created."""
    with schema_engine(pg_url) as eng:
        yield eng


@pytest.fixture(scope="session")
def llm_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServers]:
    """Real llama.cpp servers of tiny random models, one per seed, started on first use and stopped at
    the end of the session (a skip, or under CI a failure, when none can start)."""
    servers = LlamaServers(tmp_path_factory.mktemp("llm-servers"))
    try:
        yield servers
    finally:
        servers.close()


@pytest.fixture(scope="session")
def llm_server(llm_servers: LlamaServers) -> LlamaServer:
    """The tiny model of seed 1 behind a real OpenAI-compatible server."""
    return llm_servers.get(seed=1)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def seeded(engine: Engine) -> Engine:
    """An engine of each backend whose catalog is :func:`tests.factories.seed_catalog`'s."""
    seed_catalog(engine)
    return engine
