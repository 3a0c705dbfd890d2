"""`arena generate`: answers to the catalog's prompts from the registered model endpoints, resumably."""

from __future__ import annotations

# The LLM client (openai) is imported inside the commands: it costs a second at every `arena` start.
import asyncio
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from sqlalchemy.engine import Engine
from sqlmodel import Session

if TYPE_CHECKING:
    from arena.llm.generation import GenerationReport, GenerationTask

from arena.cli.commands.costs import print_run_costs
from arena.cli.options import DatabaseUrlOption, echo_failures, open_store, settings_for
from votes.catalog.endpoints import EndpointRecord, UnknownEndpoint, get_endpoint, list_endpoints

__all__ = ["generate_command", "register"]


def _import_prompts(engine: Engine, path: Path) -> tuple[str, ...]:
    """Import a prompt file into the catalog (all or nothing, as `arena import`); its prompt ids."""
    from votes.files.records import InputError
    from votes.imports.files import import_file

    try:
        report = import_file(engine, path, kind="catalog")
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        typer.echo(f"error: {path}: cannot read ({exc.strerror or exc})", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{path}: {len(report.prompt_ids)} prompt(s), {report.n_prompts_added} new in the catalog")
    return report.prompt_ids


def _records(engine: Engine, names: list[str] | None) -> list[EndpointRecord]:
    with Session(engine) as session:
        if names is None:
            return list_endpoints(session=session)
        return [get_endpoint(session=session, name=n) for n in names]


async def _run_with_progress(
    engine: Engine, records: list[EndpointRecord], tasks: list[GenerationTask], concurrency: int, quiet: bool
) -> GenerationReport:
    from arena.llm.client import EndpointClient
    from arena.llm.generation import run_generation
    from arena.llm.registry import config_for

    async with AsyncExitStack() as stack:
        clients = {r.name: await stack.enter_async_context(EndpointClient(config_for(r))) for r in records}
        with Progress(
            TextColumn("generating"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            disable=quiet,
        ) as progress:
            bar = progress.add_task("answers", total=len(tasks))
            return await run_generation(
                engine,
                tasks,
                clients,
                concurrency=concurrency,
                on_done=lambda _task, _ok: progress.advance(bar),
            )


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
    from arena.llm.client import EndpointError
    from arena.llm.generation import plan_generation

    engine = open_store(settings_for(database_url))
    try:
        prompt_keys = None if prompt_file is None else _import_prompts(engine, prompt_file)
        try:
            records = _records(engine, models.split(",") if models else None)
        except UnknownEndpoint as exc:
            typer.echo(f"error: no endpoint named {exc.args[0]!r} (see `arena models list`)", err=True)
            raise typer.Exit(2) from None
        if not records:
            typer.echo("error: no endpoints registered (`arena models add`)", err=True)
            raise typer.Exit(2)
        tasks = plan_generation(
            engine,
            models=[r.name for r in records],
            category=category,
            prompt_keys=prompt_keys,
            samples=samples,
        )
        typer.echo(f"{len(tasks)} answer(s) missing from {len(records)} model(s)")
        try:
            report = asyncio.run(_run_with_progress(engine, records, tasks, concurrency, quiet))
        except EndpointError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        typer.echo(
            f"run {report.run_id}: {report.n_stored} stored, {report.n_already} stored meanwhile by another "
            f"run, {len(report.failures)} failed ({report.seconds:.2f} s)"
        )
        print_run_costs(engine, kind="answers", names=[r.name for r in records], run_id=report.run_id)
    finally:
        engine.dispose()
    if report.failures:
        echo_failures([(f"{f.model} on {f.prompt_key}", f.reason) for f in report.failures], total=len(tasks))
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("generate")(generate_command)
