"""model.role and model.aliases: judges are not contestants; the operator's aliases for the leak filter

A model registered to judge (``arena models add J`` then ``arena judge --judge J``) was a model like any
other: listed on the home page and the live board, paired, and asked in live battles. ``role`` says what
a model does: ``contestant`` (the default: every existing model keeps competing), ``judge`` or ``both``.
The models that have judged (named in ``judgment.judge``) are made judges here, so they leave the pages at
once and ``arena judge`` keeps accepting them: ``both`` when they also answer catalog prompts (the
prompts of live battles do not count: a judge answered those only because nothing kept it out), else
``judge``. ``aliases`` holds other names of a model that the identity-leak filter looks for.

Idempotent, because a database made by ``create_all`` is stamped at 0001 and upgraded.

Revision ID: 0022_model_roles
Revises: 0021_staging_rows_unkeyed
Create Date: 2026-12-07 09:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022_model_roles"
down_revision: str | None = "0021_staging_rows_unkeyed"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The tables as this revision reads them (frozen here: never the live models).
_model = sa.table(
    "model", sa.column("id", sa.Integer), sa.column("name", sa.String), sa.column("role", sa.String)
)
_judgment = sa.table("judgment", sa.column("judge", sa.String))
_output = sa.table("output", sa.column("model_id", sa.Integer), sa.column("prompt_id", sa.Integer))
_prompt = sa.table("prompt", sa.column("id", sa.Integer), sa.column("source", sa.String))
_LIVE_SOURCE = "live"


def _judges_roles() -> None:
    """Models that have judged become ``judge``, or ``both`` when they answer catalog prompts."""
    bind = op.get_bind()
    judges = set(bind.execute(sa.select(_judgment.c.judge).distinct()).scalars())
    if not judges:
        return
    answering = set(
        bind.execute(
            sa.select(_output.c.model_id)
            .join(_prompt, _prompt.c.id == _output.c.prompt_id)
            .where(sa.or_(_prompt.c.source.is_(None), _prompt.c.source != _LIVE_SOURCE))
            .distinct()
        ).scalars()
    )
    rows = bind.execute(
        sa.select(_model.c.id, _model.c.name).where(
            _model.c.name.in_(sorted(judges)), _model.c.role == "contestant"
        )
    ).all()
    for model_id, _name in rows:
        role = "both" if model_id in answering else "judge"
        bind.execute(sa.update(_model).where(_model.c.id == model_id).values(role=role))


def upgrade() -> None:
    existing = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("model")}
    with op.batch_alter_table("model") as batch:
        if "role" not in existing:
            batch.add_column(
                sa.Column("role", sa.String(length=20), nullable=False, server_default="contestant")
            )
        if "aliases" not in existing:
            batch.add_column(sa.Column("aliases", sa.JSON(), nullable=True))
    _judges_roles()


def downgrade() -> None:
    with op.batch_alter_table("model") as batch:
        batch.drop_column("aliases")
        batch.drop_column("role")
