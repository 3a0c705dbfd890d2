"""From registered endpoints to clients: ``--param k=v`` parsing, TOML model files (endpoints, model
metadata, roles and aliases), `EndpointConfig`.

A registered endpoint's ``params`` hold both the sampling parameters and the client's own settings
(``timeout_s``, ``max_retries``, ``max_concurrency``, ``json_schema_mode``, ...): keys that
`EndpointConfig` knows become its fields, every other key goes into the request body as is.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from arena.llm.client import EndpointConfig
from votes.catalog.endpoints import EndpointRecord
from votes.catalog.model_metadata import ModelMetadata, metadata_from_table
from votes.catalog.roles import ModelChange
from votes.names import model_name

__all__ = ["config_for", "parse_params", "read_models_file"]

#: EndpointConfig fields that come from the record itself, never from ``params``.
_FIXED = frozenset({"name", "base_url", "model", "api_key_env", "extra_params"})
_CONFIG_KEYS = frozenset(EndpointConfig.model_fields) - _FIXED


def parse_params(items: Iterable[str]) -> dict[str, Any]:
    """``["temperature=0.7", "stop=[\\"\\\\n\\"]", "system_prompt=Be brief"]`` -> a mapping.

    A value that reads as JSON (numbers, booleans, lists, objects, quoted strings) is taken as JSON;
    anything else is a plain string.

    Raises
    ------
    ValueError
        An item without ``=`` or with an empty key.
    """
    params: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--param takes key=value, got {item!r}")
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw
    return params


def config_for(record: EndpointRecord, **overrides: Any) -> EndpointConfig:
    """The client configuration of a registered endpoint (``overrides`` win over its params).

    Raises
    ------
    pydantic.ValidationError
        A client setting of the wrong type or range.
    """
    params = {**record.params, **overrides}
    known = {k: v for k, v in params.items() if k in _CONFIG_KEYS}
    extra = {k: v for k, v in params.items() if k not in _CONFIG_KEYS and k not in _FIXED}
    return EndpointConfig(
        name=record.name,
        base_url=record.base_url,
        model=record.served_model,
        api_key_env=record.api_key_env,
        extra_params=extra,
        **known,
    )


def _record_from(name: str, table: Mapping[str, Any], path: Path) -> EndpointRecord:
    fields = dict(table)
    base_url = fields.pop("base_url", None)
    if not isinstance(base_url, str):
        raise ValueError(f"{path}: model {name!r} needs base_url")
    served = fields.pop("model", name)
    key_env = fields.pop("api_key_env", None)
    if "api_key" in fields:
        raise ValueError(
            f"{path}: model {name!r} has api_key; name an environment variable with api_key_env instead"
        )
    params = dict(fields.pop("params", {}))
    params.update(fields)  # sampling parameters may also sit at the top level of the table
    record = EndpointRecord(
        name=name, base_url=base_url, served_model=str(served), api_key_env=key_env, params=params
    )
    config_for(record)  # refuse settings the client would refuse, before anything is stored
    return record


def _model_change(name: str, table: dict[str, Any]) -> ModelChange | None:
    """Pop a table's ``role`` and ``aliases`` (what the model does here, its other names) into a change."""
    role, aliases = table.pop("role", None), table.pop("aliases", None)
    if role is None and aliases is None:
        return None
    if aliases is not None and (
        not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases)
    ):
        raise ValueError(f"model {name!r}: aliases must be a list of strings")
    try:
        return ModelChange(role=role, add_aliases=tuple(aliases or ()), clear_aliases=aliases is not None)
    except ValueError as exc:
        raise ValueError(f"model {name!r}: {exc}") from None


def read_models_file(
    path: Path,
) -> tuple[list[EndpointRecord], dict[str, ModelMetadata], dict[str, ModelChange]]:
    """Endpoints, model metadata and models' roles and aliases from a TOML file, one table per model::

        [models.llama-8b]
        base_url = "http://127.0.0.1:8000/v1"
        model = "meta-llama/Meta-Llama-3-8B-Instruct"
        api_key_env = "VLLM_KEY"            # optional: the variable's NAME
        temperature = 0.7                   # any parameter, or inside params = {...}
        max_concurrency = 8
        organisation = "Meta"               # metadata of the model (organization, license also read)
        licence = "llama3"
        link = "https://llama.meta.com/"
        knowledge_cutoff = "2023-03"
        aliases = ["Llama Three"]           # other names the identity-leak filter looks for

        [models.gpt-4]                      # a table without base_url: metadata only
        organisation = "OpenAI"

        [models.judge-70b]
        base_url = "http://127.0.0.1:8001/v1"
        role = "judge"                      # contestant (the default), judge or both

    Raises
    ------
    ValueError
        Not TOML, no ``models`` table, a model without ``base_url``, or a key stored in the file.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not TOML: {exc}") from None
    models = data.get("models")
    if not isinstance(models, dict) or not models:
        raise ValueError(f"{path}: no [models.NAME] tables")
    records: list[EndpointRecord] = []
    metadata: dict[str, ModelMetadata] = {}
    changes: dict[str, ModelChange] = {}
    for key, table in models.items():
        if not isinstance(table, dict):
            raise ValueError(f"{path}: models.{key} is not a table")
        try:
            name = model_name(key)
            info, rest = metadata_from_table(name, table)
            change = _model_change(name, rest)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        if info is not None:
            metadata[name] = info
        if change is not None:
            changes[name] = change
        if rest or (info is None and change is None):
            records.append(_record_from(name, rest, path))
    return records, metadata, changes
