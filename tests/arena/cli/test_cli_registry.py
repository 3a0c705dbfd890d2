"""The lazy `arena` command registry: it agrees with what the command modules register, `arena --help`
imports none of them, a command's help and a command that needs no store or fit load none of their
libraries, and a command runs through it as it did when every module was imported."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import arena
from arena.cli.main import (
    COMMAND_MODULES,
    COMMANDS,
    _module_commands,
    build_app,
    exit_status,
    load_command_module,
)
from tests.real_data import VICUNA_JUDGES


def _first_paragraph(text: str | None) -> str:
    return " ".join((text or "").split("\n\n")[0].split())


def test_the_registry_lists_exactly_what_the_modules_register() -> None:
    registered: dict[str, str] = {}
    for module in COMMAND_MODULES:
        load_command_module(module)  # an import error is a test failure, not a missing command
        for name in _module_commands(module):
            assert name not in registered, f"{name!r} registered by {registered[name]!r} and {module!r}"
            registered[name] = module
    assert registered == {name: module for name, (module, _) in COMMANDS.items()}


def test_the_package_docstring_names_every_command_and_no_other() -> None:
    """``arena/__init__.py`` is where a reader meets the commands: it lists exactly the registry's."""
    named = set(re.findall(r"``([a-z-]+)``", (arena.__doc__ or "").split("The commands", 1)[1]))
    assert named == set(COMMANDS)


def test_the_registry_help_is_each_command_s_first_paragraph() -> None:
    for name, (module, short) in COMMANDS.items():
        assert short == _first_paragraph(_module_commands(module)[name].help), name


def test_top_level_help_lists_every_command_without_importing_a_command_module() -> None:
    code = (
        "import json, sys\n"
        "from typer.testing import CliRunner\n"
        "from arena.cli.main import app\n"
        "out = CliRunner().invoke(app, ['--help'], terminal_width=200).output\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('arena.cli.commands.') or m in "
        "('sqlalchemy', 'pandas', 'numpy', 'pyarrow', 'sqlmodel', 'alembic'))\n"
        "print(loaded)\n"
        "print(out)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded, _, help_text = proc.stdout.partition("\n")
    assert loaded == "[]", loaded
    for name in COMMANDS:
        assert f" {name} " in help_text, name


#: Libraries the commands whose work is in arena.cli.commands.runs load only to run: the fitting stack,
#: the LLM client, and the database stack.
RUN_ONLY = ("sklearn", "scipy", "pandas", "matplotlib", "statsmodels", "openai", "sqlalchemy", "sqlmodel")


def _loaded_by(args: list[str], libraries: tuple[str, ...]) -> list[str]:
    """The ``libraries`` loaded once ``arena ARGS`` ran (through the registry, in a fresh process)."""
    code = (
        "import json, sys\n"
        "from typer.testing import CliRunner\n"
        "from arena.cli.main import app\n"
        "done = CliRunner().invoke(app, sys.argv[2:])\n"
        "assert done.exit_code == 0, done.output\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1].split(',')))))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, ",".join(libraries), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded: list[str] = json.loads(proc.stdout)
    return loaded


@pytest.mark.parametrize("command", ["recompute", "publish", "evaluate", "agreement", "judge", "generate"])
def test_the_help_of_a_command_that_fits_or_asks_a_model_loads_none_of_it(command: str) -> None:
    """`arena recompute --help` reads the options, not the run (arena.cli.commands.runs) that imports the
    fitting stack, the LLM client or the store."""
    assert _loaded_by([command, "--help"], RUN_ONLY) == []


def test_a_recompute_from_a_file_and_a_conversion_load_no_database_library(tmp_path: Path) -> None:
    database = ("sqlalchemy", "sqlmodel", "alembic", "psycopg")
    fit = ["--bootstrap", "0", "--no-plots", "--out", str(tmp_path / "board")]
    assert _loaded_by(["recompute", "--from", str(VICUNA_JUDGES), *fit], database) == []
    convert = ["convert", str(VICUNA_JUDGES), "--out", str(tmp_path / "battles.jsonl")]
    assert _loaded_by(convert, database) == []


def test_a_command_runs_through_the_lazy_registry_as_through_the_eager_app() -> None:
    runner = CliRunner()
    for args in (["recompute", "--help"], ["snapshots", "--help"], ["db", "--help"], ["nonsense"]):
        lazy = runner.invoke(build_app(), args, terminal_width=120)
        eager = runner.invoke(build_app(lazy=False), args, terminal_width=120)
        assert (lazy.exit_code, lazy.output) == (eager.exit_code, eager.output), args


def test_the_import_command_and_the_migrations_load_neither_pandas_nor_scipy() -> None:
    """An import reads through pyarrow and writes through SQLAlchemy; pandas and scipy (half a second of
    start-up together) are imported only by what uses them. The migrations of a new store included."""
    code = (
        "import sys, tempfile, pathlib\n"
        "import arena.cli.commands.data, votes.imports.files, votes.imports.runs\n"
        "from votes.migrate import upgrade_database\n"
        "upgrade_database('sqlite:///' + str(pathlib.Path(tempfile.mkdtemp()) / 'new.db'))\n"
        "heavy = ('pandas', 'scipy', 'sklearn', 'matplotlib')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert proc.stdout.strip() == "[]", proc.stdout


def test_the_console_script_exits_with_the_command_s_status_after_the_exit_functions() -> None:
    """main() leaves without tearing the interpreter down, but only after what a normal exit does first:
    atexit functions run, output flushed, the status the command gave."""
    code = (
        "import atexit, sys\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "atexit.register(lambda: sys.stdout.write('exit functions ran\\n'))\n"
        "pool = ThreadPoolExecutor(1)  # never shut down, as a server's import pool: its idle worker\n"
        "pool.submit(print, 'worker', flush=True).result()  # must not keep the process waiting\n"
        "from arena.cli.main import main\n"
        "main(sys.argv[1:])\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code, "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert "Usage:" in ran.stdout and ran.stdout.endswith("exit functions ran\n")
    refused = subprocess.run(
        [sys.executable, "-c", code, "no-such-command"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode == 2
    assert "No such command" in refused.stderr and "exit functions ran" in refused.stdout


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (3, 3), (256, 0), (-1, 255), ("stopped", 1)])
def test_exit_status_is_what_sys_exit_gives(
    code: object, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_status(code) == status
    assert capsys.readouterr().err == ("stopped\n" if code == "stopped" else "")


def test_a_mistyped_command_is_answered_with_the_commands_it_is_close_to() -> None:
    runner = CliRunner()
    for typed, meant in (("improt", "'import'"), ("pubish", "'publish'"), ("snapshot", "'snapshots'")):
        result = runner.invoke(build_app(), [typed], terminal_width=200)
        assert result.exit_code == 2
        assert f"No such command '{typed}'. Did you mean {meant}" in result.output, result.output
    nothing = runner.invoke(build_app(), ["zzz"], terminal_width=200)
    assert nothing.exit_code == 2 and "Did you mean" not in nothing.output
