"""Battles staged for an import run: prompts, outputs, annotators and models resolved, battles set aside.

:func:`stage_battle_batch` writes one batch of validated rows: it creates the models, judges, prompts and
outputs the batch names (recording each in ``importcreated`` so a rollback can remove it) and stages the
battles in ``importrow``; :mod:`votes.imports.runs` then merges them into ``battle`` and ``vote``. Every
imported battle carries ``import_key`` = hash of its canonical row + its occurrence number among
identical rows of the file, so importing the same file again adds nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from votes.bulk import (
    ImportCounts,
    chunks,
    ensure_models,
    existing_outputs,
    existing_prompts,
    member,
)
from votes.files.battle_rows import BattleRecord
from votes.files.records import InputError, Message, canonical_json
from votes.imports.clean_columns import CleanBatch, iso_times
from votes.models import utcnow
from votes.tables import annotator_t, import_created_t, output_t, prompt_t

__all__ = [
    "IMPORT_ANNOTATOR_KIND",
    "StagedBatch",
    "StagedColumns",
    "row_digest",
    "stage_battle_batch",
    "stage_clean_batch",
]

IMPORT_ANNOTATOR_KIND = "import"
_MISSING: Any = object()
#: What a staged battle keeps in ``extra``, in this order.
_EXTRA = ("turn", "anony", "question_id")


def _ensure_import_annotators(conn: Connection, judges: Iterable[str], created: list[int]) -> dict[str, int]:
    """One annotator (kind ``import``) per judge label, shared across files; new ids go to ``created``."""
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
        created.extend(ids[j] for j in missing)
    return ids


def row_digest(record: BattleRecord) -> str:
    """sha256 of the canonical row, first 40 hex digits: with its occurrence number, the import key."""
    return hashlib.sha256(canonical_json(record.row()).encode("utf-8")).hexdigest()[:40]


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


@dataclass
class StagedBatch:
    """Rows of one batch ready for ``importrow`` (dictionaries keyed by its columns), and what the batch
    created besides them."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    counts: ImportCounts = field(default_factory=ImportCounts)


def _record_created(conn: Connection, run_id: int, kind: str, ids: Iterable[int]) -> None:
    rows = [{"import_id": run_id, "kind": kind, "row_id": i} for i in ids]
    if rows:
        conn.execute(insert(import_created_t), rows)


def stage_battle_batch(
    conn: Connection,
    run_id: int,
    records: Sequence[BattleRecord],
    *,
    first_seq: int,
    file: str | Path,
    digests: Sequence[str],
) -> StagedBatch:
    """Resolve one batch's models, judges, prompts and outputs (creating the missing ones under the run)
    and return its battles as staging rows numbered from ``first_seq``, inside the caller's transaction.
    ``digests`` (:func:`row_digest` of each record) are computed before the transaction, so that the
    writer lock is not held while hashing.

    Raises :class:`InputError` when a battle's conversation contradicts an answer already stored (by an
    earlier batch or before the run) for the same prompt and model.
    """
    staged = StagedBatch()
    added = staged.counts
    created_models: list[int] = []
    model_ids = ensure_models(
        conn, [n for r in records for n in (r.model_a, r.model_b)], added, created_models
    )
    _record_created(conn, run_id, "model", created_models)
    created_annotators: list[int] = []
    annotator_ids = _ensure_import_annotators(
        conn, [r.judge for r in records if r.judge is not None], created_annotators
    )
    _record_created(conn, run_id, "annotator", created_annotators)

    # Prompts: named by question_id, or (for conversations without one) by a hash of the user turns.
    prompt_key: list[str | None] = []
    to_create: dict[str, tuple[str, list[Message] | None, str | None]] = {}
    for record in records:
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
        new_prompts = existing_prompts(conn, missing)
        prompt_ids.update(new_prompts)
        _record_created(conn, run_id, "prompt", new_prompts.values())
        added.prompts += len(missing)

    # Outputs: battles with conversations bring their answers; others link to catalog answers if stored.
    outputs = existing_outputs(conn, prompt_ids.values())
    new_outputs: dict[tuple[int, int], list[Message]] = {}
    for record, pkey in zip(records, prompt_key, strict=True):
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
                _record_created(conn, run_id, "filled", [stored[0]])
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
        _record_created(conn, run_id, "output", (outputs[pair][0] for pair in pairs))
        added.outputs += len(pairs)

    now = utcnow()
    for seq, (record, pkey, digest) in enumerate(
        zip(records, prompt_key, digests, strict=True), start=first_seq
    ):
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
        staged.rows.append(
            {
                "import_id": run_id,
                "seq": seq,
                "digest": digest,
                "prompt_id": bpid,
                "output_a_id": out_a[0] if out_a else None,
                "output_b_id": out_b[0] if out_b else None,
                "model_a_id": a,
                "model_b_id": b,
                "annotator_id": annotator_ids[record.judge] if record.judge is not None else None,
                "issued_at": datetime.fromtimestamp(record.tstamp, UTC) if record.tstamp is not None else now,
                "language": record.language,
                "extra": extra or None,
                "winner": record.winner,
                "weight": record.weight,
                "sided": record.sided,
            }
        )
    return staged


@dataclass
class StagedColumns:
    """A clean batch ready for ``importrow``, as columns (``stored``: those already in stored form)."""

    columns: dict[str, list[Any]]
    stored: frozenset[str]
    counts: ImportCounts = field(default_factory=ImportCounts)


def stage_clean_batch(
    conn: Connection,
    run_id: int,
    batch: CleanBatch,
    *,
    first_seq: int,
    digests: Sequence[str],
    times: Sequence[str] | None = None,
) -> StagedColumns:
    """:func:`stage_battle_batch` of a batch checked as columns (no conversations, so nothing to store
    besides models, judges and links to the prompts and catalog answers already stored): the same
    staging values, computed per distinct value instead of per row. ``times``: the batch's
    :func:`votes.imports.clean_columns.iso_times`, when the reading thread computed them already."""
    counts = ImportCounts()
    created_models: list[int] = []
    model_a, model_b = batch.model_a.tolist(), batch.model_b.tolist()
    model_ids = ensure_models(conn, {*model_a, *model_b}, counts, created_models)
    _record_created(conn, run_id, "model", created_models)
    judges = batch.judge.tolist()
    created_annotators: list[int] = []
    annotator_ids = _ensure_import_annotators(conn, {j for j in judges if j is not None}, created_annotators)
    _record_created(conn, run_id, "annotator", created_annotators)
    question_ids = batch.question_id.tolist()
    prompt_ids = existing_prompts(conn, {q for q in question_ids if q is not None})
    outputs = existing_outputs(conn, prompt_ids.values()) if prompt_ids else {}
    a_ids = [model_ids[m] for m in model_a]
    b_ids = [model_ids[m] for m in model_b]
    prompts = [prompt_ids.get(q) if q is not None else None for q in question_ids]
    out_a: list[int | None] = [None] * len(batch)
    out_b: list[int | None] = [None] * len(batch)
    if outputs:
        for i, (p, a, b) in enumerate(zip(prompts, a_ids, b_ids, strict=True)):
            if p is not None:
                found_a, found_b = outputs.get((p, a)), outputs.get((p, b))
                out_a[i] = found_a[0] if found_a else None
                out_b[i] = found_b[0] if found_b else None
    extras: dict[tuple[Any, ...], str | None] = {}
    extra: list[str | None] = []
    for turn, anony, q, p in zip(
        batch.turn.tolist(), batch.anony.tolist(), question_ids, prompts, strict=True
    ):
        key = (turn, anony, q if p is None else None)
        text = extras.get(key, _MISSING)
        if text is _MISSING:
            values = {k: v for k, v in zip(_EXTRA, key, strict=True) if v is not None}
            text = extras[key] = json.dumps(values, ensure_ascii=False) if values else None
        extra.append(text)
    n = len(batch)
    columns: dict[str, list[Any]] = {
        "import_id": [run_id] * n,
        "seq": list(range(first_seq, first_seq + n)),
        "digest": list(digests),
        "prompt_id": prompts,
        "output_a_id": out_a,
        "output_b_id": out_b,
        "model_a_id": a_ids,
        "model_b_id": b_ids,
        "annotator_id": [annotator_ids[j] if j is not None else None for j in judges],
        "issued_at": list(times) if times is not None else iso_times(batch.tstamp, utcnow()),
        "language": batch.language.tolist(),
        "extra": extra,
        "winner": batch.winner.tolist(),
        "weight": batch.weight.tolist(),
        "sided": batch.sided.tolist(),
    }
    return StagedColumns(columns, frozenset({"issued_at", "extra"}), counts)
