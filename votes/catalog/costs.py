"""Tokens spent on model endpoints, summed from what was stored: answers (`generation` rows) per model
and LLM-judge verdicts (`judgment` rows) per judge, per run or over all runs.

Every stored answer and judgment keeps the prompt and completion tokens its server reported and the run
that wrote it, so the sums need no table of their own and cannot disagree with the rows. Tokens of a
request that failed are not counted (a failed request reports no usage; an answer left unstored is
not an answer). Rows whose server reported no usage are counted apart (``n_unreported``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import Table, case, func, select
from sqlalchemy.engine import Connection

from votes.tables import generation_t, judgment_t

__all__ = ["TokenUse", "UseKind", "token_use", "total_use"]

UseKind = Literal["answers", "judging"]


@dataclass(frozen=True)
class TokenUse:
    """Tokens of one model's answers (``kind`` answers) or one judge's verdicts (``judging``), in one
    run (``run_id``) or in all of them (``run_id`` None)."""

    kind: UseKind
    name: str
    run_id: str | None
    n: int
    prompt_tokens: int
    completion_tokens: int
    n_unreported: int
    first: datetime | None
    last: datetime | None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _grouped(
    conn: Connection, table: Table, kind: UseKind, by_run: bool, names: Sequence[str] | None
) -> list[TokenUse]:
    name = table.c.endpoint if kind == "answers" else table.c.judge
    keys = [name, table.c.run_id] if by_run else [name]
    stmt = select(
        *keys,
        func.count(),
        func.coalesce(func.sum(table.c.prompt_tokens), 0),
        func.coalesce(func.sum(table.c.completion_tokens), 0),
        func.sum(case((table.c.prompt_tokens.is_(None) | table.c.completion_tokens.is_(None), 1), else_=0)),
        func.min(table.c.created_at),
        func.max(table.c.created_at),
    ).group_by(*keys)
    if names is not None:
        stmt = stmt.where(name.in_(list(names)))
    rows = []
    for row in conn.execute(stmt):
        run_id = row[1] if by_run else None
        rest = row[2:] if by_run else row[1:]
        rows.append(
            TokenUse(
                kind=kind,
                name=str(row[0]),
                run_id=run_id,
                n=int(rest[0]),
                prompt_tokens=int(rest[1]),
                completion_tokens=int(rest[2]),
                n_unreported=int(rest[3] or 0),
                first=rest[4],
                last=rest[5],
            )
        )
    return rows


def token_use(
    conn: Connection,
    *,
    by_run: bool = False,
    kind: UseKind | None = None,
    names: Sequence[str] | None = None,
) -> list[TokenUse]:
    """Stored token use per model (answers) and per judge (judging), per run with ``by_run``; only
    ``kind`` and only the models/judges in ``names`` when given. Sorted by kind, name, first time."""
    found: list[TokenUse] = []
    if kind in (None, "answers"):
        found += _grouped(conn, generation_t, "answers", by_run, names)
    if kind in (None, "judging"):
        found += _grouped(conn, judgment_t, "judging", by_run, names)
    return sorted(found, key=lambda u: (u.kind, u.name, str(u.first), u.run_id or ""))


def total_use(uses: Sequence[TokenUse], *, kind: UseKind | None = None) -> tuple[int, int, int]:
    """``(n, prompt_tokens, completion_tokens)`` summed over ``uses`` (of ``kind`` when given)."""
    chosen = [u for u in uses if kind is None or u.kind == kind]
    return (
        sum(u.n for u in chosen),
        sum(u.prompt_tokens for u in chosen),
        sum(u.completion_tokens for u in chosen),
    )
