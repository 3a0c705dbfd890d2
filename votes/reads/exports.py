"""Votes and the catalog as canonical rows, written out in the schemas they came in, deterministically.

Rows come from the store in a fixed order (:func:`iter_vote_rows`, :func:`iter_catalog_rows`) and go
through :func:`votes.files.writers.write_rows`, so export -> import into an empty database -> export gives
byte-identical files. :func:`votes_sha256` hashes the canonical exported rows, so the hash of the votes
behind a backup (and behind snapshots made before :mod:`votes.reads.ledger`) can be checked against an
export file (``sha256sum votes.jsonl``) or recomputed from one (:func:`votes.files.records.rows_sha256`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from votes.files.records import BATTLE_EXTRA_COLUMNS, FileFormat, rows_sha256
from votes.files.writers import write_rows
from votes.reads.filters import VoteFilter, filter_votes
from votes.reads.scans import vote_seconds, vote_time
from votes.tables import annotator_t, battle_t, model_t, output_t, prompt_t, vote_t

__all__ = [
    "export_catalog",
    "export_votes",
    "has_weights_or_sides",
    "iter_catalog_rows",
    "iter_vote_rows",
    "votes_sha256",
]


def _connection(db: Session | Connection) -> Connection:
    return db.connection() if isinstance(db, Session) else db


#: Rows per fetch of a streamed read.
_STREAM = 2000


def iter_vote_rows(db: Session | Connection, filters: VoteFilter | None = None) -> Iterator[dict[str, Any]]:
    """Votes as canonical Chatbot Arena rows, in vote-id order (the export and hash format).

    ``judge`` is the annotator's label (an imported judge) or ``annotator-<id>`` for site annotators;
    ``tstamp`` is the vote time in seconds since the epoch. ``weight`` and ``sided`` are in a row only
    when they differ from 1 and true (as in :meth:`votes.files.battle_rows.BattleRecord.row`), so the hash of
    unweighted votes does not depend on them.
    """
    conn = _connection(db)
    model_a, model_b = model_t.alias("model_a"), model_t.alias("model_b")
    output_a, output_b = output_t.alias("output_a"), output_t.alias("output_b")
    prompt = prompt_t.alias("battle_prompt")  # not "prompt": filters join the table itself
    stmt = filter_votes(
        select(
            vote_t.c.winner,
            vote_time(conn),
            model_a.c.name,
            model_b.c.name,
            annotator_t.c.id,
            annotator_t.c.label,
            prompt.c.external_id,
            output_a.c.conversation,
            output_b.c.conversation,
            battle_t.c.extra,
            battle_t.c.language,
            battle_t.c.source,
            vote_t.c.weight,
            vote_t.c.sided,
        )
        .select_from(vote_t)
        .join(battle_t, vote_t.c.battle_id == battle_t.c.id)
        .join(model_a, battle_t.c.model_a_id == model_a.c.id)
        .join(model_b, battle_t.c.model_b_id == model_b.c.id)
        .outerjoin(annotator_t, battle_t.c.annotator_id == annotator_t.c.id)
        .outerjoin(prompt, battle_t.c.prompt_id == prompt.c.id)
        .outerjoin(output_a, battle_t.c.output_a_id == output_a.c.id)
        .outerjoin(output_b, battle_t.c.output_b_id == output_b.c.id)
        .order_by(vote_t.c.id),
        filters,
        battle_joined=True,
    )
    result = conn.execute(stmt, execution_options={"yield_per": _STREAM})
    for row in result:
        winner, created_at, name_a, name_b, ann_id, label, qid, conv_a, conv_b, extra, lang, source = row[:12]
        weight, sided = float(row[12]), bool(row[13])
        extra = extra or {}
        judge = label if label is not None else (f"annotator-{ann_id}" if ann_id is not None else None)
        yield {
            "question_id": qid if qid is not None else extra.get("question_id"),
            "model_a": name_a,
            "model_b": name_b,
            "winner": winner,
            "judge": judge,
            # Conversations travel in pairs: a battle shows both answers or neither is exported.
            "conversation_a": conv_a if conv_b is not None else None,
            "conversation_b": conv_b if conv_a is not None else None,
            "turn": extra.get("turn"),
            "anony": extra.get("anony", True if source == "site" else None),
            "language": lang,
            "tstamp": vote_seconds(created_at),
            **({} if weight == 1.0 else {"weight": weight}),
            **({} if sided else {"sided": False}),
        }


def iter_catalog_rows(db: Session | Connection) -> Iterator[dict[str, Any]]:
    """Prompts and outputs as canonical catalog rows: prompt-id order, then sample, then output-id order
    (so a model's samples come in sample order, which is how an import numbers them).

    A prompt without outputs is one row with ``model`` and ``output`` left empty.
    """
    conn = _connection(db)
    stmt = (
        select(
            prompt_t.c.id,
            prompt_t.c.external_id,
            prompt_t.c.text,
            prompt_t.c.conversation,
            prompt_t.c.category,
            prompt_t.c.language,
            model_t.c.name,
            output_t.c.text,
        )
        .outerjoin(output_t, output_t.c.prompt_id == prompt_t.c.id)
        .outerjoin(model_t, output_t.c.model_id == model_t.c.id)
        .order_by(prompt_t.c.id, output_t.c.sample, output_t.c.id)
    )
    result = conn.execute(stmt, execution_options={"yield_per": _STREAM})
    for pid, ext, text, conversation, category, language, model, output in result:
        yield {
            "prompt_id": ext if ext is not None else f"prompt-{pid}",
            "prompt": conversation if conversation is not None else text,
            "category": category,
            "language": language,
            "model": model,
            "output": output,
        }


def votes_sha256(db: Session | Connection, filters: VoteFilter | None = None) -> str:
    """sha256 of the selected votes' canonical JSONL export (equal to ``sha256sum`` of that file)."""
    return rows_sha256(iter_vote_rows(db, filters))


def has_weights_or_sides(db: Session | Connection) -> bool:
    """Whether any stored vote has a weight other than 1 or an unknown side (exports then add the
    ``weight`` and ``sided`` columns)."""
    stmt = select(vote_t.c.id).where(or_(vote_t.c.weight != 1.0, vote_t.c.sided.is_(False))).limit(1)
    return _connection(db).execute(stmt).first() is not None


def export_votes(
    engine: Engine, out: str | Path, *, fmt: FileFormat = "jsonl", filters: VoteFilter | None = None
) -> int:
    """Write votes in the Chatbot Arena battle schema, in vote-id (commit) order; returns the row count.

    When some vote is weighted or has no known side, the ``weight`` and ``sided`` columns follow."""
    with engine.connect() as conn:
        extra = BATTLE_EXTRA_COLUMNS if has_weights_or_sides(conn) else ()
        return write_rows(
            iter_vote_rows(conn, filters), Path(out), kind="battles", fmt=fmt, extra_columns=extra
        )


def export_catalog(engine: Engine, out: str | Path, *, fmt: FileFormat = "jsonl") -> int:
    """Write prompts and outputs in the catalog schema (prompt id order, then sample, then output id)."""
    with engine.connect() as conn:
        return write_rows(iter_catalog_rows(conn), Path(out), kind="catalog", fmt=fmt)
