"""What public boards show about a model: organisation, licence, a link, the knowledge cutoff.

The metadata belongs to the model (the ``model`` row), not to the endpoint that may generate its answers:
a model known only from imported votes has metadata too. Every value is validated here, the one door for
the command line and the TOML file alike: a link must be an http(s) address, a cutoff a date written
``YYYY-MM`` or ``YYYY-MM-DD``. Published snapshots copy it into ``models.csv``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import date
from typing import Any
from urllib.parse import urlsplit

from sqlmodel import Session, select

from votes.models import Model
from votes.names import model_name

__all__ = ["METADATA_KEYS", "ModelMetadata", "metadata_from_table", "model_metadata", "set_model_metadata"]

_CUTOFF = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: TOML keys (and their other spellings) for each field.
METADATA_KEYS: Mapping[str, str] = {
    "organisation": "organisation",
    "organization": "organisation",
    "licence": "licence",
    "license": "licence",
    "link": "link",
    "knowledge_cutoff": "knowledge_cutoff",
    "knowledge-cutoff": "knowledge_cutoff",
}
_LIMITS = {"organisation": 200, "licence": 100, "link": 500, "knowledge_cutoff": 10}


@dataclass(frozen=True)
class ModelMetadata:
    """Values to set; None leaves a field as it is, an empty string clears it."""

    organisation: str | None = None
    licence: str | None = None
    link: str | None = None
    knowledge_cutoff: str | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if not isinstance(value, str):
                raise ValueError(f"{f.name} must be text, got {type(value).__name__}")
            value = value.strip()
            if len(value) > _LIMITS[f.name]:
                raise ValueError(f"{f.name} is longer than {_LIMITS[f.name]} characters")
            if _CONTROL.search(value):
                raise ValueError(f"{f.name} contains a control character")
            if value and f.name == "link":
                _check_link(value)
            if value and f.name == "knowledge_cutoff":
                _check_cutoff(value)
            object.__setattr__(self, f.name, value)

    def changes(self) -> dict[str, str | None]:
        """The columns to write: given fields only, an empty string as NULL."""
        return {
            f.name: (getattr(self, f.name) or None) for f in fields(self) if getattr(self, f.name) is not None
        }


def _check_link(value: str) -> None:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or " " in value:
        raise ValueError(f"link must be an http:// or https:// address, got {value!r}")


def _check_cutoff(value: str) -> None:
    match = _CUTOFF.match(value)
    if match is None:
        raise ValueError(f"knowledge cutoff must be YYYY-MM or YYYY-MM-DD, got {value!r}")
    year, month, day = int(match[1]), int(match[2]), int(match[3] or 1)
    try:
        date(year, month, day)
    except ValueError:
        raise ValueError(f"knowledge cutoff {value!r} is not a date") from None


def metadata_from_table(name: str, table: Mapping[str, Any]) -> tuple[ModelMetadata | None, dict[str, Any]]:
    """Split a TOML ``[models.NAME]`` table into the model's metadata and the rest (the endpoint's keys).

    Raises ``ValueError`` naming the model for a bad value or a field given under two spellings.
    """
    found: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in table.items():
        field_name = METADATA_KEYS.get(key)
        if field_name is None:
            rest[key] = value
            continue
        if field_name in found:
            raise ValueError(f"model {name!r}: {field_name} is given twice")
        found[field_name] = value
    if not found:
        return None, rest
    try:
        return ModelMetadata(**found), rest
    except ValueError as exc:
        raise ValueError(f"model {name!r}: {exc}") from None


def set_model_metadata(session: Session, name: str, metadata: ModelMetadata) -> bool:
    """Write ``metadata`` on the model ``name`` (created if the store does not know it yet, as registering
    an endpoint does); not committed. Returns whether the model row was created. A name that
    :func:`votes.names.model_name` refuses raises :class:`ValueError`."""
    name = model_name(name)
    model = session.exec(select(Model).where(Model.name == name)).first()
    created = model is None
    if model is None:
        model = Model(name=name)
    for column, value in metadata.changes().items():
        setattr(model, column, value)
    session.add(model)
    return created


def model_metadata(session: Session) -> dict[str, dict[str, str | None]]:
    """Every model's metadata by name, in the columns of ``models.csv``."""
    return {
        m.name: {
            "organisation": m.organisation,
            "licence": m.licence,
            "link": m.link,
            "knowledge_cutoff": m.knowledge_cutoff,
        }
        for m in session.exec(select(Model)).all()
    }
