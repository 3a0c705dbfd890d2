"""What each model does here and whether it still takes part: its role, its retirement, its aliases.

A model is a contestant, a judge or both (:class:`votes.names.ModelRole`). Only a model *in the arena*
(:func:`in_arena`: active and competing) is listed on the home page and the live board, paired, asked in
live battles and answered for by ``arena generate``; a judge never is, and neither is a retired model.
Every reader takes that one condition from here, so the pages, pairing and live battles cannot disagree
about who competes. They read it from the store on each request (pairing on each catalog refresh), so a
role change or a retirement shows without a restart.

Retiring keeps the model row, its answers and its votes: published snapshots never change, and a
retired model can be brought back (``arena models set NAME --active``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_
from sqlalchemy.engine import Connection
from sqlmodel import Session, col, select

from votes.models import Model, ModelEndpoint
from votes.names import ModelRole, model_alias, model_name, model_role
from votes.tables import model_t

__all__ = [
    "ModelChange",
    "ModelState",
    "UnknownModel",
    "change_model",
    "in_arena",
    "judge_only_names",
    "model_state",
    "model_states",
    "retire_model",
    "retired_names",
]


class UnknownModel(KeyError):
    """No model of that name is stored."""


def in_arena() -> ColumnElement[bool]:
    """The condition on the ``model`` table of a model that competes now: active and not a judge only."""
    return and_(model_t.c.active.is_(True), model_t.c.role.in_(ModelRole.competing()))


def judge_only_names(conn: Connection) -> tuple[str, ...]:
    """Names of the models that only judge (retired or not), sorted: left out of every board fitted from
    the store, should such a model have been a side of votes (before it was made a judge)."""
    stmt = select(model_t.c.name).where(model_t.c.role == ModelRole.JUDGE.value).order_by(model_t.c.name)
    return tuple(str(n) for n in conn.execute(stmt).scalars())


def retired_names(conn: Connection) -> frozenset[str]:
    """Names of the retired models: published boards, which never change, still show them, marked."""
    stmt = select(model_t.c.name).where(model_t.c.active.is_(False))
    return frozenset(str(n) for n in conn.execute(stmt).scalars())


@dataclass(frozen=True)
class ModelState:
    """A model's role, whether it is active, and its operator-given aliases."""

    name: str
    role: ModelRole
    active: bool
    aliases: tuple[str, ...]


def _state(row: Model) -> ModelState:
    return ModelState(row.name, model_role(row.role), bool(row.active), tuple(row.aliases or ()))


def model_states(session: Session) -> dict[str, ModelState]:
    """Every stored model's state, by name."""
    return {m.name: _state(m) for m in session.exec(select(Model).order_by(col(Model.name)))}


def model_state(session: Session, name: str) -> ModelState:
    """The state of the model ``name``; :class:`UnknownModel` when none is stored."""
    row = session.exec(select(Model).where(Model.name == model_name(name))).first()
    if row is None:
        raise UnknownModel(name)
    return _state(row)


def _aliases(values: Iterable[str]) -> tuple[str, ...]:
    """Validated aliases (:func:`votes.names.model_alias`), the first of each case-insensitive spelling."""
    kept: dict[str, str] = {}
    for value in values:
        alias = model_alias(value)
        kept.setdefault(alias.casefold(), alias)
    return tuple(kept.values())


@dataclass(frozen=True)
class ModelChange:
    """What to change on a model; None leaves a field as it is.

    ``role`` takes a :class:`~votes.names.ModelRole` or its name; ``add_aliases`` are added to the stored
    ones (after they are emptied with ``clear_aliases``). Values are validated when the change is made, so
    a bad one is refused before anything is written.
    """

    role: ModelRole | str | None = None  # a ModelRole once made
    active: bool | None = None
    add_aliases: tuple[str, ...] = ()
    clear_aliases: bool = False

    def __post_init__(self) -> None:
        if self.role is not None:
            object.__setattr__(self, "role", model_role(self.role))
        object.__setattr__(self, "add_aliases", _aliases(self.add_aliases))

    def __bool__(self) -> bool:
        return (
            self.role is not None or self.active is not None or bool(self.add_aliases) or self.clear_aliases
        )


def change_model(session: Session, name: str, change: ModelChange, *, create: bool = True) -> bool:
    """Apply ``change`` to the model ``name`` (created, unless ``create`` is False, when the store does
    not know it yet, as registering an endpoint does); not committed. Returns whether the row was created.

    Raises :class:`UnknownModel` for an unknown name when ``create`` is False, and :class:`ValueError` for
    a name refused by :func:`votes.names.model_name`.
    """
    name = model_name(name)
    row = session.exec(select(Model).where(Model.name == name)).first()
    created = row is None
    if row is None:
        if not create:
            raise UnknownModel(name)
        row = Model(name=name)
    if change.role is not None:
        row.role = ModelRole(change.role).value
    if change.active is not None:
        row.active = change.active
    if change.clear_aliases or change.add_aliases:
        kept = () if change.clear_aliases else tuple(row.aliases or ())
        row.aliases = list(_aliases((*kept, *change.add_aliases))) or None
    session.add(row)
    return created


def retire_model(session: Session, name: str) -> bool:
    """Retire the model ``name`` and forget its endpoint, if it has one; committed. Its answers and votes
    stay, and so do the snapshots that show it. Returns whether an endpoint was forgotten.

    Raises :class:`UnknownModel` when neither a model nor an endpoint of that name is stored.
    """
    name = model_name(name)
    endpoint = session.exec(select(ModelEndpoint).where(ModelEndpoint.name == name)).first()
    row = session.exec(select(Model).where(Model.name == name)).first()
    if row is None and endpoint is None:
        raise UnknownModel(name)
    if endpoint is not None:
        session.delete(endpoint)
    if row is not None:
        row.active = False
        session.add(row)
    session.commit()
    return endpoint is not None
