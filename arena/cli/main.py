"""`arena`: the command line. A small registry of command modules, each imported only when one of its
commands runs, so `arena --help` and every command start without the libraries of the others.

To add commands, write ``arena/cli/commands/<name>.py`` with ``register(app: typer.Typer) -> None`` and list
its commands in :data:`COMMANDS` with the first paragraph of their help (what `arena --help` shows without
importing them). A command that needs a heavy library to run (the fitting stack, the LLM client) keeps its
options there and its work in :mod:`arena.cli.commands.runs`, imported when it runs, so its `--help` stays
light. ``tests/arena/cli/test_cli_registry.py`` imports every module and checks that the registry
and the modules agree, and that `arena --help` reads the same as with every module imported.
"""

from __future__ import annotations

import atexit
import difflib
import importlib
import os
import sys
import threading
from functools import cache
from types import ModuleType
from typing import Any

import typer
import typer.main
from typer import _click as click  # typer (0.29+) vendors click: its groups and commands are these classes
from typer.core import TyperCommand, TyperGroup

from arena.cli.frame_stack import call_on_roomy_stack
from arena.cli.options import examples

__all__ = [
    "COMMANDS",
    "COMMAND_MODULES",
    "HELP_LAYOUT",
    "app",
    "build_app",
    "exit_status",
    "load_command_module",
    "main",
]

HELP = "Arena: blind pairwise votes on LLM answers, live Elo, published Bradley-Terry leaderboards."

#: Every top-level command, in the order `arena --help` lists them: its module under ``arena.cli.commands``
#: and the first paragraph of its help.
COMMANDS: dict[str, tuple[str, str]] = {
    "import": (
        "data",
        "Import files, each all-or-nothing in one transaction; importing a file again adds nothing.",
    ),
    "export": (
        "export",
        "Export deterministically (export -> import into an empty store -> export gives the same bytes).",
    ),
    "convert": (
        "convert",
        "Write a battles file as Chatbot Arena battles, weights and unknown sides kept (no database).",
    ),
    "demo": (
        "data",
        "Load the built-in demo catalog (fictional models) and simulate votes from known strengths.",
    ),
    "db": ("data", "Database schema."),
    "serve": ("serve", "Run the voting site."),
    "vote-writer": (
        "serve",
        "Run the shared vote writer: web workers started with ARENA_VOTE_WRITER_SOCKET pointing at SOCKET "
        "hand it their votes, and it commits the votes of all of them together.",
    ),
    "recompute": (
        "recompute",
        "Fit the leaderboard from a battles file or the database and write a snapshot folder (not stored).",
    ),
    "publish": (
        "publish",
        "Recompute from the database and store immutable snapshots: the overall board and one per "
        "category and language, from one read of the votes.",
    ),
    "snapshots": ("snapshots", "Published snapshots: list, show, diff (read only)."),
    "evaluate": (
        "evaluate",
        "Compare every rating system on held-out votes: the batch models and the online raters.",
    ),
    "annotators": (
        "admin",
        "Per-annotator statistics against the current fit; list (with --apply, flag) the outliers.",
    ),
    "gold": ("gold", "Gold battles (the right vote known): add from a file, derive from the catalog, list."),
    "leaks": (
        "admin",
        "Outputs that name their own model or maker: kept out of battles, listed here for review.",
    ),
    "backup": (
        "ops",
        "Back up the store while it serves (SQLite online backup or pg_dump), with a manifest; "
        "or verify one.",
    ),
    "restore": (
        "ops",
        "Restore a backup into the database named by --database-url and check it against the manifest.",
    ),
    "models": (
        "models",
        "Model endpoints (OpenAI-compatible): add, list, show, remove, load; model metadata: set, load.",
    ),
    "generate": (
        "generate",
        "Answer every prompt still without an answer from each selected model; each answer is committed "
        "as it arrives, so an interrupted run is resumed by running it again.",
    ),
    "agreement": (
        "agreement",
        "Agreement between annotators (humans and LLM judges alike), on the store or a battles file, "
        "each figure with a 95% bootstrap interval over items.",
    ),
    "judge": (
        "judge",
        "Judge answer pairs in both orders; each verdict is a vote of `judge:<JUDGE>`, kept out of the live "
        "standings and of boards unless asked for (`arena recompute --annotators judge:<JUDGE>`).",
    ),
    "costs": (
        "costs",
        "Prompt and completion tokens of the stored answers per model and of the stored judgments per judge "
        "(per run with --by-run), with totals. Tokens of failed requests are not stored, so not here.",
    ),
}

#: The command modules, in registry order (names under ``arena.cli.commands``).
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(module for module, _ in COMMANDS.values()))


#: How every command's help is laid out: click's plain text, not rich's boxed panels. The panels cut option
#: names at 80 columns (``--largest-comp…``) and read help as markup (``[families]`` vanished); plain text
#: wraps the help beside the options, keeps every option whole on a line of its own when it is long, and
#: leaves a paragraph whose first line is a lone ``\b`` (a command's Examples) as written. Up to
#: :data:`HELP_WIDTH` columns on a wide terminal.
HELP_WIDTH = 120
HELP_LAYOUT: dict[str, Any] = {
    "rich_markup_mode": None,
    "context_settings": {"max_content_width": HELP_WIDTH},
}

#: How the command line itself ends a command: help, a usage error, an exit the command chose.
_COMMAND_LINE_ENDS = (click.ClickException, typer.Exit, typer.Abort)


class _Commands(TyperGroup):
    """Every command: a write that finds no room (full disk, quota, file size limit) is one line and exit
    status 1, never a traceback (:func:`arena.cli.store.failure_line`). Each write is a transaction or a
    temporary file renamed into place, so nothing half-written is left behind. A mistyped command is
    answered with the commands it is close to."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            if close:
                ctx.fail(f"No such command {name!r}. Did you mean {' or '.join(map(repr, close))}?")
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: Any) -> Any:  # typer.Context; its click base is private to typer
        try:
            return super().invoke(ctx)
        except Exception as exc:
            if isinstance(exc, _COMMAND_LINE_ENDS) and exc.__cause__ is None and exc.__context__ is None:
                raise  # `--help`, a usage error, an exit with no error behind it: nothing to look into
            from arena.cli.store import failure_line  # the database stack: only once a command failed

            line = failure_line(exc)
            if line is None:
                raise
            typer.echo(f"error: {line}", err=True)
            raise typer.Exit(1) from None


def load_command_module(name: str) -> ModuleType:
    """``arena.cli.commands.<name>``; an error if it cannot be imported, never a silently missing command."""
    return importlib.import_module(f"arena.cli.commands.{name}")


@cache
def _module_commands(name: str) -> dict[str, click.Command]:
    """The click commands one module registers, built once per process."""
    sub = typer.Typer(add_completion=False, pretty_exceptions_enable=False, **HELP_LAYOUT)
    load_command_module(name).register(sub)
    return dict(typer.main.get_group(sub).commands)


class LazyCommands(_Commands):
    """The top-level group: lists commands from :data:`COMMANDS` and imports a module only to run (or
    describe in detail) one of its commands."""

    listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:  # noqa: ARG002 - click's signature
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:  # noqa: ARG002
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        if self.listing:  # `arena --help`: the name and one paragraph, no import
            return TyperCommand(cmd_name, help=entry[1])
        return _module_commands(entry[0]).get(cmd_name)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False


def _root() -> None:
    """The group itself does nothing; its commands do."""


def build_app(*, lazy: bool = True) -> typer.Typer:
    """A fresh Typer app with every command; ``lazy=False`` imports and registers every module now."""
    options: dict[str, Any] = {
        "name": "arena",
        "help": HELP,
        "epilog": examples("arena demo --database-url sqlite:///demo.db", "arena recompute --help"),
        "no_args_is_help": True,
        "add_completion": False,
        "pretty_exceptions_enable": False,
        **HELP_LAYOUT,
    }
    if not lazy:
        cli = typer.Typer(cls=_Commands, **options)
        for module in COMMAND_MODULES:
            load_command_module(module).register(cli)
        return cli
    cli = typer.Typer(cls=LazyCommands, **options)
    cli.callback()(_root)
    return cli


app = build_app()


def main(args: list[str] | None = None) -> None:
    """The ``arena`` command (the console script): :data:`app`, then an exit that skips tearing down
    the interpreter's modules.

    Once a command is done, CPython still frees every module it loaded and runs a last garbage
    collection before the process ends: half a second after ``publish`` or ``recompute``, with
    scikit-learn, scipy and pandas loaded, for nothing (the operating system reclaims the memory at
    once). So the end does what a normal exit does first, in its order, and then leaves: threading's
    shutdown (executors' idle workers stopped, threads that are not daemons joined), the ``atexit``
    functions (multiprocessing's, logging's flush), the standard streams flushed; only then
    ``os._exit`` with the command's status. Files are written and closed (atomically) by the commands
    themselves, and stores disposed of, before this point. A command that fails with an exception other
    than its exit leaves the ordinary way, traceback and all.

    The command runs on a roomy stretch of the frame stack (:mod:`arena.cli.frame_stack`): before CPython
    3.13.13 and 3.14.4, a loop at the depth where one 16 KiB chunk of frames ends maps and unmaps a chunk
    on every call, which cost ``arena publish`` a second when started as the console script (the module
    says when the workaround can go).
    """
    try:
        call_on_roomy_stack(app, args)  # arena.cli.frame_stack: no hot loop of the command on a chunk edge
        status = 0
    except SystemExit as done:
        status = exit_status(done.code)
    # What the interpreter does first on the way out: threading's own exit functions (idle executor
    # workers told to stop), then the wait for threads that are not daemons; then the atexit functions.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``arena ... | head``): as Python reports it
            status = status or 120
    os._exit(status)


def exit_status(code: object) -> int:
    """The process status ``sys.exit(code)`` gives: 0 for None, the number itself, otherwise the value
    printed to standard error and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code % 256
    print(code, file=sys.stderr)  # noqa: T201 - what Python prints for sys.exit("message")
    return 1


if __name__ == "__main__":
    main()
