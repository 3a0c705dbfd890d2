"""Catalogs imported into the store: prompts and model outputs from validated catalog rows."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from votes.bulk import ImportCounts, chunks, ensure_models, existing_output_samples, existing_prompts, member
from votes.files.catalog_records import CatalogRecord
from votes.files.records import InputError, Message
from votes.models import utcnow
from votes.tables import output_t, prompt_t

__all__ = ["import_catalog_records"]


def import_catalog_records(
    conn: Connection, records: Sequence[CatalogRecord], *, file: str | Path = "<catalog>"
) -> ImportCounts:
    """Write validated catalog rows inside the caller's transaction; what is already stored is skipped.

    A prompt or output that exists with different content is a conflict (:class:`InputError`), never
    silently overwritten: published snapshots may already refer to it.
    """
    added = ImportCounts()
    first: dict[str, CatalogRecord] = {}
    for record in records:
        first.setdefault(record.prompt_id, record)
    existing = existing_prompts(conn, first)
    if existing:
        for chunk in chunks(sorted(existing)):
            stmt = select(
                prompt_t.c.external_id,
                prompt_t.c.text,
                prompt_t.c.conversation,
                prompt_t.c.category,
                prompt_t.c.language,
            ).where(member(conn, prompt_t.c.external_id, chunk))
            for ext, text, conversation, category, language in conn.execute(stmt):
                record = first[ext]
                want_text, want_conv = _catalog_prompt(record)
                if (want_text, want_conv, record.category, record.language) != (
                    text,
                    conversation,
                    category,
                    language,
                ):
                    raise InputError(
                        file, record.where, f"prompt {ext!r} already exists with different content"
                    )
    new_prompts = [r for ext, r in first.items() if ext not in existing]
    prompt_ids = dict(existing)
    if new_prompts:
        now = utcnow()
        rows = []
        for record in new_prompts:
            text, conversation = _catalog_prompt(record)
            rows.append(
                {
                    "external_id": record.prompt_id,
                    "text": text,
                    "conversation": conversation,
                    "category": record.category,
                    "language": record.language,
                    "source": "catalog",
                    "created_at": now,
                }
            )
        conn.execute(insert(prompt_t), rows)
        prompt_ids.update(existing_prompts(conn, [r.prompt_id for r in new_prompts]))
        added.prompts += len(new_prompts)

    with_output = [r for r in records if r.model is not None and r.output is not None]
    model_ids = ensure_models(conn, [r.model for r in with_output if r.model is not None], added)
    outputs = existing_output_samples(conn, prompt_ids.values())
    new_rows: dict[tuple[int, int, int], dict[str, Any]] = {}
    now = utcnow()
    for record in with_output:
        assert record.model is not None and record.output is not None  # nosec B101 # type narrowing
        key = (prompt_ids[record.prompt_id], model_ids[record.model], record.sample)
        stored = outputs.get(key)
        if stored is not None:
            if stored[2] != record.output:
                nth = f" (sample {record.sample})" if record.sample else ""
                what = f"a different answer{nth} to prompt {record.prompt_id!r}"
                raise InputError(file, record.where, f"model {record.model!r} already has {what}")
            continue
        new_rows.setdefault(
            key,
            {
                "prompt_id": key[0],
                "model_id": key[1],
                "sample": key[2],
                "text": record.output,
                "conversation": None,
                "created_at": now,
            },
        )
    if new_rows:
        conn.execute(insert(output_t), list(new_rows.values()))
        added.outputs += len(new_rows)
    added.rows = added.outputs
    return added


def _catalog_prompt(record: CatalogRecord) -> tuple[str, list[Message] | None]:
    if isinstance(record.prompt, str):
        return record.prompt, None
    conversation = [dict(m) for m in record.prompt]
    return "\n\n".join(m["content"] for m in conversation if m["role"] == "user"), conversation
