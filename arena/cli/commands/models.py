"""`arena models add|list|show|remove|load|set`: the registry of OpenAI-compatible model endpoints, each
model's role (contestant, judge or both), its retirement and aliases, and the models' metadata
(organisation, licence, link, knowledge cutoff) that published snapshots carry.

Every model name given here passes :func:`votes.names.model_name` first (:func:`_name`), the one rule of
every door that takes a name in, so a name that would be refused on import is refused here too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

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
)
from votes.catalog.model_metadata import ModelMetadata, set_model_metadata
from votes.catalog.roles import (
    ModelChange,
    ModelState,
    UnknownModel,
    change_model,
    model_states,
    retire_model,
)
from votes.models import Model
from votes.names import ModelRole, case_collisions, model_name, model_role

__all__ = ["models_app", "register"]

models_app = typer.Typer(
    help="Model endpoints (OpenAI-compatible): add, list, show, remove, load; model metadata: set, load.",
    epilog=examples("arena models load models.toml", "arena models list"),
    no_args_is_help=True,
)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _name(value: str) -> str:
    """A model name as the store keeps it, or a one-line refusal."""
    try:
        return model_name(value)
    except ValueError as exc:
        raise _fail(f"model name: {exc}") from None


def _role(value: str | None) -> ModelRole | None:
    try:
        return None if value is None else model_role(value)
    except ValueError as exc:
        raise _fail(str(exc)) from None


_ROLES = "/".join(r.value for r in ModelRole)
RoleOption = Annotated[
    str | None,
    typer.Option(
        "--role",
        metavar=_ROLES.upper(),
        help=f"{_ROLES}: a contestant answers in battles; a judge only judges them (`arena judge`), is never "
        "paired, asked in a live battle or listed on a board.",
    ),
]


@models_app.command(
    "add",
    epilog=examples(
        "arena models add llama-8b --base-url http://127.0.0.1:8000/v1 --param seed=1",
        "arena models add J --base-url http://127.0.0.1:8001/v1 --role judge",
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
    role: RoleOption = None,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Register an endpoint (a contestant's unless --role says otherwise; a model's role is kept when its
    endpoint is replaced). The key itself is never stored: only the variable's name."""
    from arena.llm.registry import config_for, parse_params  # openai: only `add` and `load` check a client

    chosen = _role(role)
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
            replaced = add_endpoint(session=session, record=record, replace=replace, role=chosen)
            state = model_states(session)[record.name]
    except EndpointExists as exc:
        raise _fail(str(exc)) from None
    finally:
        engine.dispose()
    for new, existing in case_collisions([record.name], known):
        typer.echo(
            f"warning: model {new!r} differs only in case from the existing model {existing!r}", err=True
        )
    typer.echo(
        f"{'replaced' if replaced else 'added'} {record.name} ({state.role}): {base_url} "
        f"(model {record.served_model})"
    )


@models_app.command("load", epilog=examples("arena models load models.toml --replace"))
def load_command(
    file: Annotated[Path, typer.Argument(help="TOML file with one [models.NAME] table per model.")],
    replace: Annotated[bool, typer.Option(help="Replace endpoints of the same names.")] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Register many endpoints and set models' metadata, roles and aliases from a file, all or nothing."""
    from arena.llm.registry import read_models_file  # openai: only `add` and `load` check a client

    try:
        records, metadata, changes = read_models_file(file)
    except (OSError, ValueError, ValidationError) as exc:
        raise _fail(str(exc)) from None
    engine = open_store(settings_for(database_url), create=True)
    try:
        with Session(engine) as session:
            taken = {r.name for r in list_endpoints(session=session)} & {r.name for r in records}
            if taken and not replace:
                raise _fail(f"already registered: {', '.join(sorted(taken))} (use --replace)")
            for record in records:
                change = changes.get(record.name)
                role = None if change is None else change.role
                add_endpoint(session=session, record=record, replace=replace, role=role)
            for name, info in metadata.items():
                set_model_metadata(session, name, info)
            for name, change in changes.items():
                change_model(session, name, change)
            session.commit()
    finally:
        engine.dispose()
    typer.echo(
        f"{file}: {len(records)} endpoint(s) registered, metadata of {len(metadata)} model(s) set, "
        f"role or aliases of {len(changes)}"
    )


@models_app.command(
    "set",
    epilog=examples(
        "arena models set llama-8b --organisation Meta --knowledge-cutoff 2023-03",
        "arena models set J --role judge",
    ),
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
    role: RoleOption = None,
    active: Annotated[
        bool | None,
        typer.Option(
            "--active/--retired",
            help="Bring a retired model back, or retire it: off the home page, the live board and pairing "
            "at once (its endpoint kept; `arena models remove` forgets that too).",
        ),
    ] = None,
    alias: Annotated[
        list[str] | None,
        typer.Option(
            "--alias",
            help="Another name that gives the model away in its answers, for the identity-leak filter "
            "(repeatable; added to those stored).",
        ),
    ] = None,
    clear_aliases: Annotated[
        bool, typer.Option("--clear-aliases", help="Forget the stored aliases first.")
    ] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Set a model's role, status, aliases and metadata (published in each snapshot's models.csv); an empty
    metadata value clears a field.

    They belong to the model, which needs no endpoint (models known from imported votes too).
    """
    name = _name(name)
    try:
        info = ModelMetadata(
            organisation=organisation, licence=licence, link=link, knowledge_cutoff=knowledge_cutoff
        )
        change = ModelChange(
            role=_role(role), active=active, add_aliases=tuple(alias or ()), clear_aliases=clear_aliases
        )
    except ValueError as exc:
        raise _fail(str(exc)) from None
    if not info.changes() and not change:
        raise _fail(
            "nothing to set: give --role, --active/--retired, --alias, --clear-aliases, --organisation, "
            "--licence, --link or --knowledge-cutoff"
        )
    engine = open_store(settings_for(database_url), create=True)
    try:
        with Session(engine) as session:
            created = set_model_metadata(session, name, info)
            change_model(session, name, change)
            session.commit()
            state = model_states(session)[name]
    finally:
        engine.dispose()
    said = [f"{k}={v or '(cleared)'}" for k, v in info.changes().items()]
    if change:
        said.append(_state_words(state))
    typer.echo(f"{name}{' (new model)' if created else ''}: {', '.join(said)}")


def _state_words(state: ModelState) -> str:
    aliases = f", aliases {', '.join(state.aliases)}" if state.aliases else ""
    return f"role={state.role}{'' if state.active else ', retired'}{aliases}"


@models_app.command("list", epilog=examples("arena models list", "arena models list --json"))
def list_command(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per model.")] = False,
    every: Annotated[
        bool, typer.Option("--all", help="Also the models without an endpoint (imported, retired).")
    ] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """The registered endpoints, each with its model's role, status and aliases."""
    engine = open_store(settings_for(database_url))
    try:
        with Session(engine) as session:
            records = {r.name: r for r in list_endpoints(session=session)}
            states = model_states(session)
    finally:
        engine.dispose()
    names = sorted(set(records) | (set(states) if every else set()))
    rows = [_as_dict(records.get(n), states.get(n), n) for n in names]
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row, sort_keys=True))
        return
    title = f"Models: {len(rows)}" if every else f"Model endpoints: {len(rows)}"
    columns = ("name", "role", "status", "base URL", "served model", "key from", "params", "aliases")
    table = whole_table(title, columns)
    for row in rows:
        params = "-" if row["params"] is None else json.dumps(row["params"], sort_keys=True)
        whole_row(
            table,
            str(row["name"]),
            str(row["role"] or "-"),
            "active" if row["active"] is not False else "retired",
            str(row["base_url"] or "-"),
            str(row["model"] or "-"),
            str(row["api_key_env"] or "-"),
            params,
            ", ".join(row["aliases"] or []) or "-",
        )
    print_whole(table)


def _as_dict(record: EndpointRecord | None, state: ModelState | None, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "role": None if state is None else state.role.value,
        "active": None if state is None else state.active,
        "aliases": None if state is None else list(state.aliases),
        "base_url": None if record is None else record.base_url,
        "model": None if record is None else record.served_model,
        "api_key_env": None if record is None else record.api_key_env,
        "params": None if record is None else dict(record.params),
    }


@models_app.command("show", epilog=examples("arena models show llama-8b"))
def show_command(name: str, database_url: DatabaseUrlOption = None) -> None:
    """One model as JSON: its endpoint (the key's variable name, never its value), role, status, aliases."""
    name = _name(name)
    engine = open_store(settings_for(database_url))
    try:
        with Session(engine) as session:
            states = model_states(session)
            try:
                record: EndpointRecord | None = get_endpoint(session=session, name=name)
            except UnknownEndpoint:
                record = None
    finally:
        engine.dispose()
    if record is None and name not in states:
        raise _fail(f"no model or endpoint named {name!r} (see `arena models list --all`)")
    typer.echo(json.dumps(_as_dict(record, states.get(name), name), indent=2, sort_keys=True))


@models_app.command("remove", epilog=examples("arena models remove llama-8b"))
def remove_command(name: str, database_url: DatabaseUrlOption = None) -> None:
    """Retire a model and forget its endpoint: it leaves the home page, the live board, pairing and live
    battles at once. Its answers and votes stay, and so do published snapshots; `arena models set NAME
    --active` brings it back."""
    name = _name(name)
    engine = open_store(settings_for(database_url))
    try:
        with Session(engine) as session:
            forgot = retire_model(session, name)
    except UnknownModel:
        raise _fail(f"no model or endpoint named {name!r} (see `arena models list --all`)") from None
    finally:
        engine.dispose()
    typer.echo(f"removed {name}: retired{', endpoint forgotten' if forgot else ''}")


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
