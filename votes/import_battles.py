"""Battles imported into the store: prompts, outputs, annotators, battles and votes from validated rows.

Every imported battle carries ``import_key`` = hash of its canonical row + its occurrence number among
identical rows of the file, so importing the same file again adds nothing. After battles are added, the
live ratings are rebuilt by replaying all counted votes in vote-id order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection

from votes.battle_rows import BattleRecord
from votes.bulk import (
    ImportCounts,
    chunks,
    ensure_models,
    existing_outputs,
    existing_prompts,
    member,
    without_null_columns,
)
from votes.live import LiveConfig
from votes.models import utcnow
from votes.ratings import rebuild_live_ratings
from votes.records import InputError, Message, canonical_json
from votes.tables import annotator_t, battle_t, output_t, prompt_t, vote_t

__all__ = ["IMPORT_ANNOTATOR_KIND", "import_battle_records", "import_keys"]

IMPORT_ANNOTATOR_KIND = "import"
_ANALYZE_AFTER = 10_000


def _ensure_import_annotators(conn: Connection, judges: Iterable[str]) -> dict[str, int]:
    """One annotator (kind ``import``) per judge label, shared across files."""
    wanted = sorted(set(judges))
    ids: dict[str, int] = {}
    for chunk in chunks(wanted):
        stmt = select(annotator_t.c.label, annotator_t.c.id).where(
            annotator_t.c.kind == IMPORT_ANNOTATOR_KIND,
            member(conn, annotator_t.c.label, chunk),
        )
        ids.update((str(label), int(i)) for label, i in conn.execute(stmt))
    missing = [j for j in wanted if j not in ids]
    if missing:
        now = utcnow()
        conn.execute(
            insert(annotator_t),
            [
                {"kind": IMPORT_ANNOTATOR_KIND, "label": j, "created_at": now, "flagged": False}
                for j in missing
            ],
        )
        for chunk in chunks(missing):
            stmt = select(annotator_t.c.label, annotator_t.c.id).where(
                annotator_t.c.kind == IMPORT_ANNOTATOR_KIND,
                member(conn, annotator_t.c.label, chunk),
            )
            ids.update((str(label), int(i)) for label, i in conn.execute(stmt))
    return ids


def import_keys(records: Sequence[BattleRecord]) -> list[str]:
    """Stable per-row keys: sha256 of the canonical row (first 40 hex digits) + occurrence number."""
    seen: dict[str, int] = {}
    keys: list[str] = []
    for record in records:
        digest = hashlib.sha256(canonical_json(record.row()).encode("utf-8")).hexdigest()[:40]
        n = seen.get(digest, 0)
        seen[digest] = n + 1
        keys.append(f"{digest}-{n}")
    return keys


def _conversation_prompt(conversation: Sequence[Message]) -> tuple[str, list[Message] | None]:
    """The prompt of a battle conversation: its user turns (kept as a conversation when there are several)."""
    users = [dict(m) for m in conversation if m["role"] == "user"]
    text = "\n\n".join(m["content"] for m in users)
    return text, (users if len(users) > 1 else None)


def _conversation_external_id(text: str, conversation: list[Message] | None) -> str:
    payload = canonical_json({"text": text, "conversation": conversation})
    return "conv-" + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:24]


def _assistant_text(conversation: Sequence[Message]) -> str:
    return "\n\n".join(m["content"] for m in conversation if m["role"] == "assistant")


def import_battle_records(
    conn: Connection,
    records: Sequence[BattleRecord],
    *,
    file: str | Path = "<battles>",
    elo_config: LiveConfig | None = None,
) -> ImportCounts:
    """Write validated battles (and their votes, prompts and outputs) inside the caller's transaction.

    Rows whose import key is already stored are skipped. Raises :class:`InputError` when a battle's
    conversation contradicts an answer already stored for the same prompt and model.
    """
    added = ImportCounts()
    keys = import_keys(records)
    existing: set[str] = set()
    for chunk in chunks(keys):
        existing.update(
            conn.scalars(select(battle_t.c.import_key).where(member(conn, battle_t.c.import_key, chunk)))
        )
    new = [(r, k) for r, k in zip(records, keys, strict=True) if k not in existing]
    if not new:
        return added

    model_ids = ensure_models(conn, [n for r, _ in new for n in (r.model_a, r.model_b)], added)
    annotator_ids = _ensure_import_annotators(conn, [r.judge for r, _ in new if r.judge is not None])

    # Prompts: named by question_id, or (for conversations without one) by a hash of the user turns.
    prompt_key: list[str | None] = []
    to_create: dict[str, tuple[str, list[Message] | None, str | None]] = {}
    for record, _ in new:
        if record.conversation_a is not None:
            text, conversation = _conversation_prompt(record.conversation_a)
            ext = record.question_id or _conversation_external_id(text, conversation)
            to_create.setdefault(ext, (text, conversation, record.language))
            prompt_key.append(ext)
        else:
            prompt_key.append(record.question_id)
    prompt_ids = existing_prompts(conn, [k for k in prompt_key if k is not None])
    missing = [ext for ext in to_create if ext not in prompt_ids]
    if missing:
        now = utcnow()
        conn.execute(
            insert(prompt_t),
            [
                {
                    "external_id": ext,
                    "text": to_create[ext][0],
                    "conversation": to_create[ext][1],
                    "category": None,
                    "language": to_create[ext][2],
                    "source": "import",
                    "created_at": now,
                }
                for ext in missing
            ],
        )
        prompt_ids.update(existing_prompts(conn, missing))
        added.prompts += len(missing)

    # Outputs: battles with conversations bring their answers; others link to catalog answers if stored.
    outputs = existing_outputs(conn, prompt_ids.values())
    new_outputs: dict[tuple[int, int], list[Message]] = {}
    for (record, _), pkey in zip(new, prompt_key, strict=True):
        if record.conversation_a is None or record.conversation_b is None or pkey is None:
            continue
        opid = prompt_ids[pkey]
        for model, conv in (
            (record.model_a, record.conversation_a),
            (record.model_b, record.conversation_b),
        ):
            pair = (opid, model_ids[model])
            answer = [dict(m) for m in conv]
            stored = outputs.get(pair)
            if stored is None:
                previous = new_outputs.get(pair)
                if previous is None:
                    new_outputs[pair] = answer
                    continue
            elif stored[1] is None and stored[2] == _assistant_text(answer):
                # A catalog answer (text only) with the same text: the battle adds its conversation.
                conn.execute(update(output_t).where(output_t.c.id == stored[0]).values(conversation=answer))
                outputs[pair] = (stored[0], answer, stored[2])
                continue
            else:
                previous = stored[1]
            if previous != answer:
                raise InputError(
                    file, record.where, f"model {model!r} already has a different answer to prompt {pkey!r}"
                )
    if new_outputs:
        now = utcnow()
        pairs = list(new_outputs)
        conn.execute(
            insert(output_t),
            [
                {
                    "prompt_id": p,
                    "model_id": m,
                    "text": _assistant_text(new_outputs[(p, m)]),
                    "conversation": new_outputs[(p, m)],
                    "created_at": now,
                }
                for p, m in pairs
            ],
        )
        outputs.update(existing_outputs(conn, {p for p, _ in pairs}))
        added.outputs += len(pairs)

    now = utcnow()
    battle_rows: list[dict[str, Any]] = []
    vote_rows: list[dict[str, Any]] = []
    for (record, key), pkey in zip(new, prompt_key, strict=True):
        a, b = model_ids[record.model_a], model_ids[record.model_b]
        bpid = prompt_ids.get(pkey) if pkey is not None else None
        out_a = outputs.get((bpid, a)) if bpid is not None else None
        out_b = outputs.get((bpid, b)) if bpid is not None else None
        extra: dict[str, Any] = {}
        if record.turn is not None:
            extra["turn"] = record.turn
        if record.anony is not None:
            extra["anony"] = record.anony
        if bpid is None and record.question_id is not None:
            extra["question_id"] = record.question_id
        when = datetime.fromtimestamp(record.tstamp, UTC) if record.tstamp is not None else now
        battle_rows.append(
            {
                "prompt_id": bpid,
                "output_a_id": out_a[0] if out_a else None,
                "output_b_id": out_b[0] if out_b else None,
                "model_a_id": a,
                "model_b_id": b,
                "annotator_id": annotator_ids[record.judge] if record.judge is not None else None,
                "issued_at": when,
                "pair_probability": None,
                "source": "import",
                "import_key": key,
                "token_id": None,  # nosec B105 # a column name, not a password
                "language": record.language,
                "extra": extra or None,
            }
        )
        vote_rows.append(
            {
                "model_a_id": a,
                "model_b_id": b,
                "annotator_id": annotator_ids[record.judge] if record.judge is not None else None,
                "winner": record.winner,
                "created_at": when,
                "seconds_to_vote": None,
                "client_hash": None,
                "idempotency_key": None,
                "live_elo": None,
                "weight": record.weight,
                "sided": record.sided,
            }
        )
    # Plain executemany (RETURNING would make SQLite insert row by row); the new ids are then read back
    # by import key, which is unique, so rows written concurrently by the site cannot be confused.
    before = conn.scalar(select(func.coalesce(func.max(battle_t.c.id), 0)))
    conn.execute(insert(battle_t), without_null_columns(battle_rows))
    stmt = select(battle_t.c.import_key, battle_t.c.id).where(
        battle_t.c.id > before, battle_t.c.import_key.is_not(None)
    )
    battle_ids = {str(k): int(i) for k, i in conn.execute(stmt)}
    for vote, battle in zip(vote_rows, battle_rows, strict=True):
        vote["battle_id"] = battle_ids[battle["import_key"]]
    conn.execute(insert(vote_t), without_null_columns(vote_rows))
    added.rows = len(new)
    rebuild_live_ratings(conn, config=elo_config)
    if conn.dialect.name == "postgresql" and len(new) >= _ANALYZE_AFTER:
        # Fresh statistics for the planner: without them the next import's key lookups on the bulk-loaded
        # table can take seconds each (measured: 2 minutes for 100,000 keys instead of 1 s).
        conn.execute(sa.text("ANALYZE battle, vote, prompt, output"))
    return added
