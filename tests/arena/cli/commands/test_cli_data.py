"""`arena import/export/demo/db upgrade` on both backends, and the command registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena.cli.main import app
from tests.factories import row_counts
from votes.db import is_sqlite, make_engine

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[4]


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=env)
    text = result.output
    try:
        text += result.stderr
    except ValueError:  # older Click mixes stderr into output
        pass
    return result.exit_code, text


def battle(i: int, **changes: object) -> str:
    row = {
        "question_id": f"q{i}",
        "model_a": "alpha",
        "model_b": "beta",
        "winner": "model_a",
        "tstamp": float(i),
    }
    row.update(changes)
    return json.dumps(row)


@pytest.fixture
def url(db_url: str) -> str:
    """A store ready for the CLI: SQLite migrates itself; PostgreSQL needs `arena db upgrade` first."""
    if not is_sqlite(db_url):
        code, out = run("db", "upgrade", "--database-url", db_url)
        assert code == 0 and "revision" in out, out
    return db_url


def counts(url: str) -> dict[str, int]:
    engine = make_engine(url)
    try:
        return row_counts(engine)
    finally:
        engine.dispose()


def test_import_with_one_bad_row_exits_nonzero_names_the_row_and_changes_nothing(
    url: str, tmp_path: Path
) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(battle(i) for i in range(5)) + "\n")
    code, out = run("import", str(good), "--database-url", url)
    assert code == 0, out
    assert "5 added" in out
    before = counts(url)

    bad = tmp_path / "bad.jsonl"
    lines = [battle(i) for i in range(10, 20)]
    lines[6] = battle(16, winner="left")
    bad.write_text("\n".join(lines) + "\n")
    code, out = run("import", str(bad), "--database-url", url)
    assert code == 1
    assert f"{bad}: line 7: unknown winner 'left'" in out
    assert "nothing was imported" in out
    assert counts(url) == before


def test_environment_url_export_import_round_trip(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARENA_DATABASE_URL", url)
    code, out = run("demo", "--votes", "120", "--seed", "1")
    assert code == 0 and "120 new votes" in out, out
    assert counts(url)["vote"] == 120
    for what in ("catalog", "votes"):
        code, out = run("export", what, "--format", "csv", "--out", str(tmp_path / f"{what}.csv"))
        assert code == 0, out
    other = f"sqlite:///{tmp_path}/other.db"
    code, out = run(
        "import", str(tmp_path / "catalog.csv"), str(tmp_path / "votes.csv"), "--database-url", other
    )
    assert code == 0, out
    code, out = run(
        "export", "votes", "--format", "csv", "--out", str(tmp_path / "again.csv"), "--database-url", other
    )
    assert code == 0, out
    assert (tmp_path / "again.csv").read_bytes() == (tmp_path / "votes.csv").read_bytes()
    code, out = run("import", str(tmp_path / "votes.csv"), "--database-url", other)
    assert code == 0 and "0 added, 120 already present" in out


def test_format_and_kind_overrides(url: str, tmp_path: Path) -> None:
    path = tmp_path / "battles.data"
    path.write_text("model_a,model_b,winner\nalpha,beta,tie\n")
    code, out = run("import", str(path), "--format", "csv", "--kind", "battles", "--database-url", url)
    assert code == 0 and "1 added" in out, out
    code, out = run("import", str(tmp_path / "missing.jsonl"), "--database-url", url)
    assert code == 1 and "no such file" in out


def test_postgres_store_must_be_upgraded_first(pg_url: str, tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text(battle(1) + "\n")
    code, out = run("import", str(path), "--database-url", pg_url)
    assert code == 2 and "arena db upgrade" in out


def test_a_command_module_that_cannot_import_is_an_error_not_a_missing_command() -> None:
    # None in sys.modules makes importing that module fail, as a broken or absent module would. The
    # command line imports a command's module only when it runs (tests/arena/cli/test_cli_registry.py checks
    # the registry itself): running the command must then fail loudly, not say "no such command".
    code = (
        "import sys; sys.modules['arena.cli.commands.evaluate'] = None; from arena.cli.main import app; "
        "app(['evaluate', '--help'])"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode != 0
    assert "ModuleNotFoundError" in done.stderr and "arena.cli.commands.evaluate" in done.stderr
    assert "No such command" not in done.stderr


def test_help_lists_the_data_commands() -> None:
    code, out = run("--help")
    assert code == 0
    for command in ("import", "export", "demo", "db"):
        assert command in out


def test_the_written_format_follows_the_file_name(tmp_path: Path) -> None:
    """`arena export votes --out votes.parquet` writes Parquet (it wrote JSON lines under that name, which
    nothing could read back); a name that contradicts the format given, or asks for gzip, is refused."""
    url = f"sqlite:///{tmp_path}/a.db"
    assert run("demo", "--votes", "30", "--database-url", url)[0] == 0
    code, out = run("export", "votes", "--out", str(tmp_path / "votes.parquet"), "--database-url", url)
    assert code == 0 and "30 votes rows (parquet)" in out, out
    assert (tmp_path / "votes.parquet").read_bytes()[:4] == b"PAR1"
    code, out = run("convert", str(tmp_path / "votes.parquet"), "--out", str(tmp_path / "b.csv"))
    assert code == 0 and "(csv)" in out, out
    code, out = run(
        "export", "votes", "--out", str(tmp_path / "v.csv"), "--format", "json", "--database-url", url
    )
    assert code == 2 and "names a csv file, but --format json was given" in out, out
    code, out = run("export", "votes", "--out", str(tmp_path / "v.jsonl.gz"), "--database-url", url)
    assert code == 2 and "written uncompressed" in out, out
    assert not (tmp_path / "v.csv").exists() and not (tmp_path / "v.jsonl.gz").exists()
