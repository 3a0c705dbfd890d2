"""`arena`: the command line. A small registry: each module in COMMAND_MODULES adds its own commands.

To add commands, write ``arena/commands/<name>.py`` with ``register(app: typer.Typer) -> None``, import it
here and add it to COMMAND_MODULES. Every command module is imported unconditionally: one that cannot be
imported is an error at start-up, never a silently missing command.
"""

from __future__ import annotations

from types import ModuleType

import typer

from arena.commands import (
    admin,
    agreement,
    data,
    evaluate,
    generate,
    judge,
    leaderboard,
    models,
    ops,
    serve,
    snapshots,
)

__all__ = ["COMMAND_MODULES", "app", "build_app"]

COMMAND_MODULES: tuple[ModuleType, ...] = (
    data,
    serve,
    leaderboard,
    snapshots,
    evaluate,
    admin,
    ops,
    models,
    generate,
    agreement,
    judge,
)


def build_app() -> typer.Typer:
    """A fresh Typer app with every command module registered."""
    cli = typer.Typer(
        name="arena",
        help="Arena: blind pairwise votes on LLM answers, live Elo, published Bradley-Terry leaderboards.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for module in COMMAND_MODULES:
        module.register(cli)
    return cli


app = build_app()

if __name__ == "__main__":
    app()
