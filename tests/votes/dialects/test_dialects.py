"""The storage's dialects: one module per database behind one interface, picked from an engine, a
connection, a session or a URL; and no storage module outside them tests the database's name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session

import votes
from votes.dialects import DIALECTS, Dialect, dialect_named, dialect_of, partial_index
from votes.dialects.postgresql import POSTGRESQL
from votes.dialects.sqlite import SQLITE

VOTES = Path(votes.__file__).resolve().parent
#: Where a branch on the database's name belongs: the dialects themselves, and the Alembic revisions
#: (frozen history, see votes.migrations.env).
BRANCHES_ALLOWED = ("dialects/", "migrations/versions/")
#: ``votes.db.is_sqlite``: the site and the command line still ask it (the in-memory and file checks of
#: their own), so it stays, as the one test of the name outside the dialects.
NAME_TEST_KEPT = {"db.py": 1}


def test_each_database_is_one_module_with_one_dialect() -> None:
    assert DIALECTS == {"sqlite": SQLITE, "postgresql": POSTGRESQL}
    for name, dialect in DIALECTS.items():
        assert isinstance(dialect, Dialect)
        assert dialect.name == name
        assert type(dialect).__module__ == f"votes.dialects.{name}"
        assert dialect_named(name) is dialect


def test_the_dialect_of_an_engine_a_connection_a_session_and_a_url(engine: Engine, db_url: str) -> None:
    dialect = dialect_of(engine)
    assert dialect.name == engine.dialect.name
    with engine.connect() as conn:
        assert dialect_of(conn) is dialect
    with Session(engine) as session:
        assert dialect_of(session) is dialect
    assert dialect_of(engine.url) is dialect
    assert dialect_of(engine.url.render_as_string(hide_password=False)) is dialect
    assert dialect_of(make_url(db_url)) is dialect


def test_a_database_without_a_dialect_is_refused_by_name() -> None:
    with pytest.raises(NotImplementedError, match="postgresql, sqlite, not on mysql"):
        dialect_of("mysql://user@host/db")


def test_a_partial_index_names_every_dialect() -> None:
    where = text("x IS NOT NULL")
    assert partial_index(where) == {"sqlite_where": where, "postgresql_where": where}


def _is_backend_name(node: ast.expr) -> bool:
    """``<x>.get_backend_name()``, or the name of a database."""
    if isinstance(node, ast.Constant):
        return node.value in DIALECTS
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get_backend_name"
    )


def _name_tests(path: Path) -> list[int]:
    """Lines of a module that test the database's name: any use of ``<x>.dialect.name`` (a comparison, a
    key of a table), or a comparison with a URL's backend name or the name of a database."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "name"
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "dialect"
        ):
            found.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(map(_is_backend_name, [node.left, *node.comparators])):
            found.append(node.lineno)
    return sorted(set(found))


def test_no_storage_module_branches_on_the_database_name() -> None:
    """A storage module asks its connection's dialect (a capability or a method) instead of testing the
    database's name: a third database is then one more dialect module."""
    found = {}
    for path in sorted(VOTES.rglob("*.py")):
        relative = path.relative_to(VOTES).as_posix()
        if relative.startswith(BRANCHES_ALLOWED):
            continue
        lines = _name_tests(path)
        if len(lines) > NAME_TEST_KEPT.get(relative, 0):
            found[relative] = lines
    assert not found, found


def test_the_name_check_sees_each_kind_of_test(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "a = TABLE[conn.dialect.name]\nb = url.get_backend_name() == c\nd = kind == 'postgresql'\n"
        "e = 'sqlite' != f\ng = f'{url.get_backend_name()}'\n",
        encoding="utf-8",
    )
    assert _name_tests(module) == [1, 2, 3, 4]
