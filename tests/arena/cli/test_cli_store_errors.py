"""A store that is not there, or cannot be reached, is one line and exit status 1, and nothing is made.

A mistyped SQLite path used to be answered with a new, empty database ("no votes to fit"); a missing
folder or an unreachable PostgreSQL with a traceback.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena.cli.main import build_app
from tests.real_data import VICUNA_CATALOG


def run(*args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(build_app(), list(args))
    return result.exit_code, [line for line in result.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize(
    "command",
    [
        ("recompute", "--out", "board"),
        ("publish",),
        ("evaluate",),
        ("export", "votes", "--out", "votes.jsonl"),
        ("annotators",),
        ("leaks",),
        ("snapshots", "list"),
        ("models", "list"),
        ("costs",),
    ],
    ids=lambda c: c[0] + ("-" + c[1] if len(c) > 1 and not c[1].startswith("-") else ""),
)
def test_a_reading_command_on_a_missing_sqlite_file_says_so_and_makes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "typo" / "aerna.db"
    missing.parent.mkdir()
    code, err = run(*command, "--database-url", f"sqlite:///{missing}")
    assert code == 1
    errors = [line for line in err if line.startswith("error:")]
    assert errors == [err[-1]] and f"no database at {missing}" in errors[0], err
    assert "arena db upgrade" in errors[0]
    assert list(missing.parent.iterdir()) == []  # no database, no log files


def test_an_import_makes_the_database_but_not_a_missing_folder(tmp_path: Path) -> None:
    target = tmp_path / "no" / "a.db"
    code, err = run("import", str(VICUNA_CATALOG), "--database-url", f"sqlite:///{target}")
    assert code == 1
    assert err == [f"error: no folder {target.parent} for the database {target}: create it or check the path"]
    assert not (tmp_path / "no").exists()
    code, err = run("import", str(VICUNA_CATALOG), "--database-url", f"sqlite:///{tmp_path / 'a.db'}")
    assert code == 0, err
    assert (tmp_path / "a.db").is_file()


@pytest.mark.parametrize("command", [("publish",), ("export", "votes", "--out", "v.jsonl"), ("evaluate",)])
def test_an_unreachable_postgresql_is_one_line_with_the_password_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    monkeypatch.chdir(tmp_path)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql+psycopg://arena:s3cret-pw@127.0.0.1:{port}/arena"
    code, err = run(*command, "--database-url", url)
    assert code == 1
    assert len(err) == 1 and err[0].startswith("error: cannot reach the database"), err
    assert "Connection refused" in err[0] and "s3cret-pw" not in err[0] and "Traceback" not in err[0]
    assert list(tmp_path.iterdir()) == []
