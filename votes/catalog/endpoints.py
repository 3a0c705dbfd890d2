"""The endpoint registry: which OpenAI-compatible endpoint answers for which model, and how it samples.

An endpoint is registered under the name of the model whose answers it produces (the `Model` row of
that name is created with it). The API key is never stored: only the name of the environment variable
that holds it. Parameters are a plain mapping (temperature, max_tokens, system_prompt, seed, and any
extra request-body fields), kept as given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, select

from votes.models import Model, ModelEndpoint
from votes.names import ModelRole, model_name

__all__ = [
    "EndpointExists",
    "EndpointRecord",
    "UnknownEndpoint",
    "add_endpoint",
    "get_endpoint",
    "list_endpoints",
    "remove_endpoint",
    "set_endpoint_params",
]

#: What an environment variable's name may look like (so a pasted key is refused, not stored).
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EndpointExists(ValueError):
    """An endpoint of that name is registered already (and ``replace`` was not asked for)."""


class UnknownEndpoint(KeyError):
    """No endpoint of that name is registered."""


@dataclass(frozen=True)
class EndpointRecord:
    """A registered endpoint as the store hands it out."""

    name: str
    base_url: str
    served_model: str
    api_key_env: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("an endpoint needs a name")
        object.__setattr__(self, "name", model_name(self.name))
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"endpoint {self.name!r}: base URL must start with http:// or https://")
        if self.api_key_env is not None and not _ENV_NAME.match(self.api_key_env):
            # Never echo the value: it may be a key pasted by mistake.
            raise ValueError(
                f"endpoint {self.name!r}: --api-key-env takes the NAME of an environment variable "
                "(letters, digits, underscores), not a key"
            )


def _record(row: ModelEndpoint) -> EndpointRecord:
    return EndpointRecord(
        name=row.name,
        base_url=row.base_url,
        served_model=row.served_model,
        api_key_env=row.api_key_env,
        params=dict(row.params or {}),
    )


def add_endpoint(
    *, session: Session, record: EndpointRecord, replace: bool = False, role: ModelRole | str | None = None
) -> bool:
    """Register ``record`` (and its `Model` if new, a contestant unless ``role`` says otherwise); returns
    True when it replaced an existing one. The model is made active (a retired one comes back) and given
    ``role`` when one is given, in the same transaction, so a judge is never a contestant for a moment.

    Raises
    ------
    EndpointExists
        The name is taken and ``replace`` is False.
    """
    row = session.exec(select(ModelEndpoint).where(ModelEndpoint.name == record.name)).first()
    replaced = row is not None
    if row is not None and not replace:
        raise EndpointExists(f"endpoint {record.name!r} is registered already (use --replace)")
    if row is None:
        row = ModelEndpoint(name=record.name, base_url=record.base_url, served_model=record.served_model)
    row.base_url = record.base_url
    row.served_model = record.served_model
    row.api_key_env = record.api_key_env
    row.params = dict(record.params)
    session.add(row)
    model = session.exec(select(Model).where(Model.name == record.name)).first()
    if model is None:
        model = Model(name=record.name)
    model.active = True
    if role is not None:
        model.role = ModelRole(role).value
    session.add(model)
    session.commit()
    return replaced


def list_endpoints(*, session: Session) -> list[EndpointRecord]:
    """Every registered endpoint, by name."""
    return [_record(r) for r in session.exec(select(ModelEndpoint).order_by(ModelEndpoint.name))]


def _endpoint_row(session: Session, name: str) -> ModelEndpoint:
    row = session.exec(select(ModelEndpoint).where(ModelEndpoint.name == name)).first()
    if row is None:
        raise UnknownEndpoint(name)
    return row


def get_endpoint(*, session: Session, name: str) -> EndpointRecord:
    """The endpoint registered as ``name``.

    Raises
    ------
    UnknownEndpoint
        None of that name.
    """
    return _record(_endpoint_row(session, name))


def set_endpoint_params(*, session: Session, name: str, params: Mapping[str, Any]) -> EndpointRecord:
    """Set (or replace) some of the endpoint ``name``'s parameters, keeping the others; returns the
    record as stored now (what a command learned of the server, such as the JSON mode it takes).

    Raises
    ------
    UnknownEndpoint
        None of that name.
    """
    row = _endpoint_row(session, name)
    row.params = {**(row.params or {}), **params}
    session.add(row)
    session.commit()
    return _record(row)


def remove_endpoint(*, session: Session, name: str) -> None:
    """Forget the endpoint ``name``; its model, answers and votes stay (retiring the model too is
    :func:`votes.catalog.roles.retire_model`).

    Raises
    ------
    UnknownEndpoint
        None of that name.
    """
    session.delete(_endpoint_row(session, name))
    session.commit()
