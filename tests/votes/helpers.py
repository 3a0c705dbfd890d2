"""Small helpers shared by the store tests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.engine import Engine

from votes.tables import annotator_t, battle_t, liverating_t, model_t, output_t, prompt_t, vote_t

TABLES = (model_t, prompt_t, output_t, annotator_t, battle_t, vote_t, liverating_t)


def row_counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t.name: int(conn.scalar(select(func.count()).select_from(t)) or 0) for t in TABLES}


def live_ratings(engine: Engine) -> dict[str, tuple[float, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(model_t.c.name, liverating_t.c.rating, liverating_t.c.games).join(
                liverating_t, liverating_t.c.model_id == model_t.c.id
            )
        ).all()
    return {str(n): (float(r), int(g)) for n, r, g in rows}


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any] | str]) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def conversation(question: str, answer: str, *more: str) -> list[dict[str, str]]:
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    for i in range(0, len(more) - 1, 2):
        messages += [{"role": "user", "content": more[i]}, {"role": "assistant", "content": more[i + 1]}]
    return messages


def clear(engine: Engine) -> None:
    """Delete every row (children first): an empty database again."""
    with engine.begin() as conn:
        for table in reversed(TABLES):
            conn.execute(delete(table))
