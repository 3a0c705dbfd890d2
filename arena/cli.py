"""`arena`: the command line. A small registry: each module in COMMAND_MODULES adds its own commands.

To add commands, write ``arena/commands/<name>.py`` with ``register(app: typer.Typer) -> None`` and add
one line to COMMAND_MODULES. A listed module that does not exist (yet) is skipped; an error inside an
existing module is not hidden.
"""

from __future__ import annotations

import importlib

import typer

__all__ = ["COMMAND_MODULES", "app", "build_app"]

COMMAND_MODULES: tuple[str, ...] = (
    "arena.commands.data",
    "arena.commands.serve",
    "arena.commands.leaderboard",
    "arena.commands.evaluate",
    "arena.commands.admin",
)


def build_app() -> typer.Typer:
    """A fresh Typer app with every available command module registered."""
    cli = typer.Typer(
        name="arena",
        help="Arena: blind pairwise votes on LLM answers, live Elo, published Bradley-Terry leaderboards.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(cli)
    return cli


app = build_app()

if __name__ == "__main__":
    app()
