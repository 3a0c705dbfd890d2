"""Generated answers and their provenance: the one writer of an `Output` with its `Generation` row.

``arena generate`` inserts each answer once; a live battle inserts its two answers after the first turn
and rewrites them after each further turn (the output then holds the whole conversation, the provenance
the sums over the turns). Both go through :func:`insert_answer` / :func:`update_answer`, so a generated
answer looks the same whichever way it was made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import insert, update
from sqlalchemy.engine import Connection

from votes.files.catalog_records import MAX_SAMPLES
from votes.models import utcnow
from votes.tables import generation_t, output_t

__all__ = ["MAX_SAMPLES", "GeneratedAnswer", "TurnStats", "insert_answer", "update_answer"]


@dataclass(frozen=True)
class TurnStats:
    """Provenance of one answered turn (token counts None when the server did not report usage)."""

    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float
    finish_reason: str | None
    served_model: str


@dataclass(frozen=True)
class GeneratedAnswer:
    """One model's answer to a prompt: the conversation (user and assistant turns) and each turn's stats."""

    model_id: int
    endpoint: str
    base_url: str
    history: Sequence[Mapping[str, Any]]
    turns: Sequence[TurnStats]
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The assistant's turns, one paragraph apart (the output's ``text``)."""
        return "\n\n".join(str(m["content"]) for m in self.history if m["role"] == "assistant")

    def output_values(self) -> dict[str, Any]:
        multi = len(self.turns) > 1
        return {"text": self.text, "conversation": [dict(m) for m in self.history] if multi else None}

    def generation_values(self) -> dict[str, Any]:
        prompt = [t.prompt_tokens for t in self.turns]
        completion = [t.completion_tokens for t in self.turns]
        return {
            "endpoint": self.endpoint,
            "base_url": self.base_url,
            "served_model": self.turns[-1].served_model,
            "params": dict(self.params),
            "prompt_tokens": None if None in prompt else sum(p for p in prompt if p is not None),
            "completion_tokens": None if None in completion else sum(c for c in completion if c is not None),
            "latency_s": sum(t.latency_s for t in self.turns),
            "finish_reason": self.turns[-1].finish_reason,
        }


def insert_answer(
    conn: Connection,
    *,
    prompt_id: int,
    answer: GeneratedAnswer,
    run_id: str,
    now: datetime | None = None,
    sample: int = 0,
) -> int:
    """Insert the output (the model's ``sample``-th answer to the prompt) and its provenance (in the
    caller's transaction); returns the output's id.

    Raises ``IntegrityError`` when the model already has that sample for this prompt.
    """
    if not answer.turns:
        raise ValueError("an answer needs at least one answered turn")
    now = now or utcnow()
    output_id: int = conn.execute(
        insert(output_t).returning(output_t.c.id),
        {
            "prompt_id": prompt_id,
            "model_id": answer.model_id,
            "sample": sample,
            "created_at": now,
            **answer.output_values(),
        },
    ).scalar_one()
    conn.execute(
        insert(generation_t),
        {"output_id": output_id, "run_id": run_id, "created_at": now, **answer.generation_values()},
    )
    return output_id


def update_answer(conn: Connection, *, output_id: int, answer: GeneratedAnswer) -> None:
    """Rewrite an output and its provenance after a further turn (in the caller's transaction)."""
    conn.execute(update(output_t).where(output_t.c.id == output_id).values(**answer.output_values()))
    conn.execute(
        update(generation_t).where(generation_t.c.output_id == output_id).values(**answer.generation_values())
    )
