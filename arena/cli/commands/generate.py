"""`arena generate`: answers to the catalog's prompts from the registered model endpoints, resumably.

Here are its options and help; what it does is :mod:`arena.cli.commands.runs.generate`'s, imported when the
command runs, so `arena generate --help` loads no LLM client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from arena.cli.options import DatabaseUrlOption, examples

__all__ = ["generate_command", "register"]


def generate_command(
    models: Annotated[
        str | None, typer.Option("--models", help="Comma-separated endpoint names (default: all registered).")
    ] = None,
    category: Annotated[str | None, typer.Option(help="Only prompts of this category.")] = None,
    prompt_file: Annotated[
        Path | None,
        typer.Option(
            "--prompt-file",
            exists=True,
            dir_okay=False,
            help="A catalog of prompts (JSONL, JSON, CSV, Parquet, .gz; as `arena import` reads it): "
            "imported, then only its prompts are answered.",
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Requests in flight in all.")] = 8,
    samples: Annotated[
        int,
        typer.Option(
            min=1,
            max=16,
            help="Answers per prompt and model (each with its own seed when the endpoint has one); a battle "
            "shows one, so a reveal names one of several. Needs a temperature above 0 to differ.",
        ),
    ] = 1,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Answer every prompt still without an answer from each selected model; each answer is committed as
    it arrives, so an interrupted run is resumed by running it again."""
    from arena.cli.commands.runs.generate import run_generate  # openai: not for --help

    run_generate(
        models=models,
        category=category,
        prompt_file=prompt_file,
        concurrency=concurrency,
        samples=samples,
        quiet=quiet,
        database_url=database_url,
    )


def register(app: typer.Typer) -> None:
    app.command(
        "generate",
        epilog=examples(
            "arena generate --models llama-8b,gpt-4o-mini --concurrency 8",
            "arena generate --prompt-file new-prompts.jsonl",
        ),
    )(generate_command)
