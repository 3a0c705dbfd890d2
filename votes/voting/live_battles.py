"""Live battles in the store: the annotator's prompt as a catalog prompt, both answers as outputs with
provenance, the per-model usage counts, and the battles that ended without a vote.

A live battle is an ordinary battle once voted (``battle.source = "live"``, written by the vote writer
like any other). Before that, each finished turn is stored here: the prompt (category ``"live"``, the
user turns in its conversation when there are several) and both models' outputs. A battle that cannot be
voted on (a model failed, an answer names its model) gets its battle row here, without a vote, under the
battle's token id: a vote sent later with any of its tokens then collides with that row and is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from sqlalchemy import ColumnElement, func, insert, or_, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from votes.catalog.answers import GeneratedAnswer, insert_answer, update_answer
from votes.models import utcnow
from votes.tables import battle_t, liveusage_t, model_t, prompt_t
from votes.voting.battles import IssuedBattle

__all__ = [
    "catalog_prompt",
    "LIVE_CATEGORY",
    "LIVE_SOURCE",
    "Availability",
    "StoredTurn",
    "close_live_battle",
    "count_live_use",
    "availability_ledger",
    "live_availability",
    "live_tokens_today",
    "store_live_turn",
]

LIVE_SOURCE = "live"


def catalog_prompt(source: Any) -> ColumnElement[bool]:
    """The condition on a prompt's ``source`` column that keeps live prompts out: an annotator's own
    prompt is neither shown to anyone else nor answered by ``arena generate`` for models it never met."""
    return or_(source.is_(None), source != LIVE_SOURCE)


#: Category of a live prompt (no classifier runs on the site).
LIVE_CATEGORY = "live"


@dataclass(frozen=True)
class StoredTurn:
    prompt_id: int
    output_a_id: int
    output_b_id: int


def store_live_turn(
    engine: Engine,
    *,
    user_turns: Sequence[str],
    answer_a: GeneratedAnswer,
    answer_b: GeneratedAnswer,
    run_id: str,
    stored: StoredTurn | None = None,
) -> StoredTurn:
    """Write the conversation after a finished turn, in one transaction.

    The first turn (``stored`` None) inserts the prompt and both outputs; a later turn rewrites them.
    """
    now = utcnow()
    values: dict[str, Any] = {
        "text": user_turns[0],
        "conversation": [{"role": "user", "content": t} for t in user_turns] if len(user_turns) > 1 else None,
    }
    with engine.begin() as conn:
        if stored is None:
            prompt_id = conn.execute(
                insert(prompt_t).returning(prompt_t.c.id),
                {**values, "category": LIVE_CATEGORY, "source": LIVE_SOURCE, "created_at": now},
            ).scalar_one()
            a = insert_answer(conn, prompt_id=prompt_id, answer=answer_a, run_id=run_id, now=now)
            b = insert_answer(conn, prompt_id=prompt_id, answer=answer_b, run_id=run_id, now=now)
            return StoredTurn(prompt_id, a, b)
        conn.execute(update(prompt_t).where(prompt_t.c.id == stored.prompt_id).values(**values))
        update_answer(conn, output_id=stored.output_a_id, answer=answer_a)
        update_answer(conn, output_id=stored.output_b_id, answer=answer_b)
        return stored


def close_live_battle(engine: Engine, battle: IssuedBattle, reason: str) -> None:
    """Record a live battle that ends without a vote (``reason``: ``"failed"``, ``"leak"``).

    Its battle row takes the token id, so no vote can be recorded on the battle afterwards. Closing a
    battle twice is harmless.
    """
    try:
        with engine.begin() as conn:
            conn.execute(
                insert(battle_t),
                {
                    "prompt_id": battle.prompt_id,
                    "output_a_id": battle.output_a_id,
                    "output_b_id": battle.output_b_id,
                    "model_a_id": battle.model_a_id,
                    "model_b_id": battle.model_b_id,
                    "annotator_id": battle.annotator_id,
                    "issued_at": battle.issued_at,
                    "pair_probability": battle.pair_probability,
                    "source": LIVE_SOURCE,
                    "token_id": battle.token_id,
                    "extra": {"ended": reason},
                },
            )
    except IntegrityError:  # already closed (or voted): the token is spent either way
        return


def count_live_use(
    engine: Engine, model_id: int, *, tokens: int, failed: bool, day: date | None = None
) -> None:
    """Count one live generation of ``model_id`` (today, UTC): its tokens, and whether it failed."""
    row = {
        "model_id": model_id,
        "day": day or utcnow().date(),
        "generations": 1,
        "failures": int(failed),
        "tokens": max(0, int(tokens)),
    }
    key = (liveusage_t.c.model_id == model_id) & (liveusage_t.c.day == row["day"])
    bump = update(liveusage_t).where(key)
    bump = bump.values(
        generations=liveusage_t.c.generations + 1,
        failures=liveusage_t.c.failures + row["failures"],
        tokens=liveusage_t.c.tokens + row["tokens"],
    )
    for _attempt in range(2):  # the day's row may be inserted by another request meanwhile: then update
        try:
            with engine.begin() as conn:
                if conn.execute(bump).rowcount == 0:
                    conn.execute(insert(liveusage_t), row)
            return
        except IntegrityError:
            continue


def live_tokens_today(conn: Connection, model_ids: Sequence[int], day: date | None = None) -> dict[int, int]:
    """Tokens spent today (UTC) by each model's live generations (0 when none)."""
    rows = conn.execute(
        select(liveusage_t.c.model_id, liveusage_t.c.tokens).where(
            liveusage_t.c.model_id.in_(list(model_ids)), liveusage_t.c.day == (day or utcnow().date())
        )
    ).all()
    found: Mapping[int, int] = {int(m): int(t) for m, t in rows}
    return {m: found.get(m, 0) for m in model_ids}


@dataclass(frozen=True)
class Availability:
    """A model's live generations and failures over all days; ``share`` answered / asked."""

    model: str
    generations: int
    failures: int

    @property
    def share(self) -> float:
        return 1.0 - self.failures / self.generations if self.generations else float("nan")


def live_availability(conn: Connection) -> dict[str, Availability]:
    """Per model name, its live generations and failures (models never asked live are absent)."""
    rows = conn.execute(
        select(model_t.c.name, func.sum(liveusage_t.c.generations), func.sum(liveusage_t.c.failures))
        .join(model_t, model_t.c.id == liveusage_t.c.model_id)
        .group_by(model_t.c.name)
    ).all()
    return {str(n): Availability(str(n), int(g or 0), int(f or 0)) for n, g, f in rows}


def availability_ledger(engine: Engine) -> dict[str, dict[str, Any]]:
    """Per model, its live generations, failures and answered share, JSON-ready for a snapshot's ledger."""
    with engine.connect() as conn:
        found = live_availability(conn)
    return {
        name: {
            "generations": a.generations,
            "failures": a.failures,
            "share": round(a.share, 6) if a.generations else None,
        }
        for name, a in sorted(found.items())
    }
