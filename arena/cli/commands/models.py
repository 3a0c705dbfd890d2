"""`arena models add|list|show|remove|load|set`: the registry of OpenAI-compatible model endpoints, and
the models' metadata (organisation, licence, link, knowledge cutoff) that published snapshots carry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from sqlmodel import Session, select

from arena.cli.commands.board_output import print_whole, whole_row, whole_table
from arena.cli.options import DatabaseUrlOption, examples, settings_for
from arena.cli.store import open_store
from votes.catalog.endpoints import (
    EndpointExists,
    EndpointRecord,
    UnknownEndpoint,
    add_endpoint,
    get_endpoint,
    list_endpoints,
    remove_endpoint,
)
from votes.catalog.model_metadata import ModelMetadata, set_model_metadata
from votes.models import Model
from votes.names import case_collisions

__all__ = ["models_app", "register"]

models_app = typer.Typer(
    help="Model endpoints (OpenAI-compatible): add, list, show, remove, load; model metadata: set, load.",
    epilog=examples("arena models load models.toml", "arena models list"),
    no_args_is_help=True,
)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


@models_app.command(
    "add",
    epilog=examples(
        "arena models add llama-8b --base-url http://127.0.0.1:8000/v1 --param seed=1",
        "arena models add gpt-4o --base-url https://api.openai.com/v1 \\",
        "    --api-key-env OPENAI_API_KEY",
    ),
)
def add_command(
    name: Annotated[str, typer.Argument(help="Arena's name of the model (its answers are stored under it).")],
    base_url: Annotated[str, typer.Option("--base-url", help="e.g. http://127.0.0.1:8000/v1")],
    model: Annotated[
        str | None, typer.Option("--model", help="The id the server serves (default: NAME).")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option("--api-key-env", help="NAME of the environment variable holding the API key."),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", help="k=v, repeatable: temperature, max_tokens, system_prompt, seed, ..."),
    ] = None,
    replace: Annotated[bool, typer.Option(help="Replace an endpoint of the same name.")] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Register an endpoint. The key itself is never stored: only the variable's name."""
    from arena.llm.registry import config_for, parse_params  # openai: only `add` and `load` check a client

    try:
        record = EndpointRecord(
            name=name,
            base_url=base_url,
            served_model=model or name,
            api_key_env=api_key_env,
            params=parse_params(param or []),
        )
        config_for(record)
    except (ValueError, ValidationError) as exc:
        raise _fail(str(exc)) from None
    engine = open_store(settings_for(database_url), create=True)
    try:
        with Session(engine) as session:
            known = [str(n) for n in session.exec(select(Model.name)).all()]
            replaced = add_endpoint(session=session, record=record, replace=replace)
    except EndpointExists as exc:
        raise _fail(str(exc)) from None
    finally:
        engine.dispose()
    for new, existing in case_collisions([record.name], known):
        typer.echo(
            f"warning: model {new!r} differs only in case from the existing model {existing!r}", err=True
        )
    typer.echo(
        f"{'replaced' if replaced else 'added'} {record.name}: {base_url} (model {record.served_model})"
    )


@models_app.command("load", epilog=examples("arena models load models.toml --replace"))
def load_command(
    file: Annotated[Path, typer.Argument(help="TOML file with one [models.NAME] table per model.")],
    replace: Annotated[bool, typer.Option(help="Replace endpoints of the same names.")] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Register many endpoints and set models' metadata from a file, all or nothing."""
    from arena.llm.registry import read_models_file  # openai: only `add` and `load` check a client

    try:
        records, metadata = read_models_file(file)
    except (OSError, ValueError, ValidationError) as exc:
        raise _fail(str(exc)) from None
    engine = open_store(settings_for(database_url), create=True)
    try:
        with Session(engine) as session:
            taken = {r.name for r in list_endpoints(session=session)} & {r.name for r in records}
            if taken and not replace:
                raise _fail(f"already registered: {', '.join(sorted(taken))} (use --replace)")
            for record in records:
                add_endpoint(session=session, record=record, replace=replace)
            for name, info in metadata.items():
                set_model_metadata(session, name, info)
            session.commit()
    finally:
        engine.dispose()
    typer.echo(f"{file}: {len(records)} endpoint(s) registered, metadata of {len(metadata)} model(s) set")


@models_app.command(
    "set",
    epilog=examples("arena models set llama-8b --organisation Meta --knowledge-cutoff 2023-03"),
)
def set_command(
    name: Annotated[str, typer.Argument(help="The model's name (created if the store does not know it).")],
    organisation: Annotated[
        str | None, typer.Option("--organisation", "--organization", help="Who made the model.")
    ] = None,
    licence: Annotated[str | None, typer.Option("--licence", "--license", help="e.g. apache-2.0.")] = None,
    link: Annotated[str | None, typer.Option(help="http(s) address of the model's page.")] = None,
    knowledge_cutoff: Annotated[
        str | None, typer.Option("--knowledge-cutoff", help="YYYY-MM or YYYY-MM-DD.")
    ] = None,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Set a model's metadata (published in each snapshot's models.csv); an empty value clears a field.

    The metadata belongs to the model, which needs no endpoint (models known from imported votes too).
    """
    try:
        info = ModelMetadata(
            organisation=organisation, licence=licence, link=link, knowledge_cutoff=knowledge_cutoff
        )
    except ValueError as exc:
        raise _fail(str(exc)) from None
    if not info.changes():
        raise _fail("nothing to set: give --organisation, --licence, --link or --knowledge-cutoff")
    engine = open_store(settings_for(database_url), create=True)
    try:
        with Session(engine) as session:
            created = set_model_metadata(session, name, info)
            session.commit()
    finally:
        engine.dispose()
    said = ", ".join(f"{k}={v or '(cleared)'}" for k, v in info.changes().items())
    typer.echo(f"{name}{' (new model)' if created else ''}: {said}")


@models_app.command("list", epilog=examples("arena models list", "arena models list --json"))
def list_command(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per endpoint.")] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """The registered endpoints."""
    engine = open_store(settings_for(database_url))
    try:
        with Session(engine) as session:
            records = list_endpoints(session=session)
    finally:
        engine.dispose()
    if as_json:
        for r in records:
            typer.echo(json.dumps(_as_dict(r), sort_keys=True))
        return
    columns = ("name", "base URL", "served model", "key from", "params")
    table = whole_table(f"Model endpoints: {len(records)}", columns)
    for r in records:
        params = json.dumps(dict(r.params), sort_keys=True)
        whole_row(table, r.name, r.base_url, r.served_model, r.api_key_env or "-", params)
    print_whole(table)


def _as_dict(record: EndpointRecord) -> dict[str, object]:
    return {
        "name": record.name,
        "base_url": record.base_url,
        "model": record.served_model,
        "api_key_env": record.api_key_env,
        "params": dict(record.params),
    }


@models_app.command("show", epilog=examples("arena models show llama-8b"))
def show_command(name: str, database_url: DatabaseUrlOption = None) -> None:
    """One endpoint as JSON (the key's variable name, never its value)."""
    engine = open_store(settings_for(database_url))
    try:
        with Session(engine) as session:
            record = get_endpoint(session=session, name=name)
    except UnknownEndpoint:
        raise _fail(f"no endpoint named {name!r}") from None
    finally:
        engine.dispose()
    typer.echo(json.dumps(_as_dict(record), indent=2, sort_keys=True))


@models_app.command("remove", epilog=examples("arena models remove llama-8b"))
def remove_command(name: str, database_url: DatabaseUrlOption = None) -> None:
    """Forget an endpoint; the model's answers and votes stay."""
    engine = open_store(settings_for(database_url))
    try:
        with Session(engine) as session:
            remove_endpoint(session=session, name=name)
    except UnknownEndpoint:
        raise _fail(f"no endpoint named {name!r}") from None
    finally:
        engine.dispose()
    typer.echo(f"removed {name}")


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
