"""Imports flow one way: leaderboard <- votes <- arena. Parsed from source, so it fails on any new edge."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN: dict[str, set[str]] = {
    "leaderboard": {
        "votes",
        "arena",
        "fastapi",
        "starlette",
        "sqlmodel",
        "sqlalchemy",
        "alembic",
        "psycopg",
        "jinja2",
        "uvicorn",
        "redis",
        "httpx",
        "typer",
    },
    "votes": {"arena", "fastapi", "starlette", "jinja2", "uvicorn", "redis"},
    "arena": set(),
}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_direction(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"package {package} has no modules"
    offenders = {str(f.relative_to(ROOT)): sorted(imported_roots(f) & FORBIDDEN[package]) for f in files}
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, f"forbidden imports: {offenders}"


def test_checker_sees_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from votes.models import Vote\nimport sqlalchemy.orm\n", encoding="utf-8")
    assert imported_roots(bad) & FORBIDDEN["leaderboard"] == {"votes", "sqlalchemy"}
