"""`arena generate` at work: the answers still missing planned, asked of each endpoint and stored as they
arrive, and the run's tokens.

The command's options and help are :mod:`arena.cli.commands.generate`'s; its function imports this module
when it runs, so the LLM client (openai) is imported here, at the top; the import machinery only for a
``--prompt-file``.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from sqlalchemy.engine import Engine
from sqlmodel import Session

from arena.cli.commands.costs import print_run_costs
from arena.cli.options import echo_failures, file_read_errors, settings_for
from arena.cli.store import open_store
from arena.llm.client import EndpointClient, EndpointError
from arena.llm.generation import GenerationReport, GenerationTask, plan_generation, run_generation
from arena.llm.registry import config_for
from votes.catalog.endpoints import EndpointRecord, UnknownEndpoint, get_endpoint, list_endpoints
from votes.catalog.roles import ModelState, model_states
from votes.names import model_name

__all__ = ["run_generate"]


def _import_prompts(engine: Engine, path: Path) -> tuple[str, ...]:
    """Import a prompt file into the catalog (all or nothing, as `arena import`); its prompt ids."""
    from votes.imports.files import import_file  # the import machinery: only with --prompt-file

    with file_read_errors(path):
        report = import_file(engine, path, kind="catalog")
    typer.echo(f"{path}: {len(report.prompt_ids)} prompt(s), {report.n_prompts_added} new in the catalog")
    return report.prompt_ids


def _records(engine: Engine, names: list[str] | None) -> list[EndpointRecord]:
    """The endpoints to answer with: every contestant's in the arena, or those named (each must be one).

    A judge only answers nowhere, and a retired model is not paired, so answers for either would never be
    shown: left out of the default, refused by name with a line that says what to do.
    """
    with Session(engine) as session:
        states = model_states(session)
        if names is None:
            return [r for r in list_endpoints(session=session) if _competes(states.get(r.name))]
        records = [get_endpoint(session=session, name=n) for n in names]
    for r in records:
        state = states.get(r.name)
        if state is not None and not state.role.competes:
            raise ValueError(
                f"{r.name} is a judge only and answers in no battle "
                f"(`arena models set {r.name} --role both` to make it a contestant too)"
            )
        if state is not None and not state.active:
            raise ValueError(f"{r.name} is retired (`arena models set {r.name} --active` to bring it back)")
    return records


def _competes(state: ModelState | None) -> bool:
    return state is None or (state.active and state.role.competes)


async def _run_with_progress(
    engine: Engine, records: list[EndpointRecord], tasks: list[GenerationTask], concurrency: int, quiet: bool
) -> GenerationReport:
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


def run_generate(
    *,
    models: str | None,
    category: str | None,
    prompt_file: Path | None,
    concurrency: int,
    samples: int,
    quiet: bool,
    database_url: str | None,
) -> None:
    """What `arena generate` does with its options (:func:`arena.cli.commands.generate.generate_command`)."""
    engine = open_store(settings_for(database_url))
    try:
        prompt_keys = None if prompt_file is None else _import_prompts(engine, prompt_file)
        try:
            records = _records(engine, [model_name(n) for n in models.split(",")] if models else None)
        except ValueError as exc:
            typer.echo(f"error: --models: {exc}", err=True)
            raise typer.Exit(2) from None
        except UnknownEndpoint as exc:
            typer.echo(f"error: no endpoint named {exc.args[0]!r} (see `arena models list`)", err=True)
            raise typer.Exit(2) from None
        if not records:
            typer.echo("error: no contestant has an endpoint (see `arena models add`)", err=True)
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
