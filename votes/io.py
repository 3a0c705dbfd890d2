"""Import and export: catalogs of model outputs and Chatbot Arena battles, in and out of the store.

An import is all-or-nothing and idempotent:

- the whole file is read and validated first (:mod:`votes.records`), so a bad row fails before any write;
- everything is written in one transaction with bulk ``executemany`` inserts (one statement per batch of
  rows, not one ORM object per row), so a 100,000-battle file takes seconds;
- every imported battle carries ``import_key`` = hash of its canonical row + its occurrence number among
  identical rows of the file, so importing the same file again adds nothing;
- after battles are added, the live ratings are rebuilt by replaying all counted votes in vote-id order.

Exports write the same schemas deterministically (:func:`votes.records.write_rows`), so
export -> import into an empty database -> export gives byte-identical files.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import Integer, String, any_, bindparam, func, insert, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.elements import ColumnElement

from leaderboard.elo import EloConfig
from votes.models import utcnow
from votes.queries import VoteFilter, iter_catalog_rows, iter_vote_rows
from votes.ratings import rebuild_live_ratings
from votes.records import (
    BattleRecord,
    CatalogRecord,
    FileFormat,
    InputError,
    Kind,
    Message,
    canonical_json,
    detect_kind,
    parse_battles,
    parse_catalog,
    read_rows,
    write_rows,
)
from votes.tables import annotator_t, battle_t, model_t, output_t, prompt_t, vote_t

__all__ = [
    "ImportReport",
    "InputError",
    "export_catalog",
    "export_votes",
    "import_battle_records",
    "import_catalog_records",
    "import_file",
    "import_keys",
]

IMPORT_ANNOTATOR_KIND = "import"
_CHUNK = 1000
_ANALYZE_AFTER = 10_000
T = TypeVar("T")


@dataclass(frozen=True)
class ImportReport:
    """What an import did. ``n_added`` counts battles (with their votes) or catalog outputs."""

    path: str
    kind: Kind
    format: FileFormat
    n_rows: int
    n_added: int
    n_skipped: int
    n_models_added: int
    n_prompts_added: int
    n_outputs_added: int
    seconds: float


@dataclass
class _Added:
    models: int = 0
    prompts: int = 0
    outputs: int = 0
    rows: int = 0


def import_file(
    engine: Engine,
    path: str | Path,
    *,
    fmt: FileFormat | None = None,
    kind: Kind | None = None,
    elo_config: EloConfig | None = None,
) -> ImportReport:
    """Validate a whole file, then write it in one transaction; raises :class:`InputError` on bad input.

    Nothing is written when any row is invalid or conflicts with what the database already holds.
    """
    started = time.perf_counter()
    path = Path(path)
    fmt, rows = read_rows(path, fmt)
    kind = kind or (detect_kind(path, rows) if rows else "battles")
    with engine.begin() as conn:
        if kind == "battles":
            records_b = parse_battles(path, fmt, rows)
            added = import_battle_records(conn, records_b, file=path, elo_config=elo_config)
        else:
            records_c = parse_catalog(path, fmt, rows)
            added = import_catalog_records(conn, records_c, file=path)
    return ImportReport(
        path=str(path),
        kind=kind,
        format=fmt,
        n_rows=len(rows),
        n_added=added.rows,
        n_skipped=len(rows) - added.rows,
        n_models_added=added.models,
        n_prompts_added=added.prompts,
        n_outputs_added=added.outputs,
        seconds=time.perf_counter() - started,
    )


# ----------------------------------------------------------------------------------------------- helpers


def _without_null_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop the columns that are None in every row: executemany then binds (and type-processes) less."""
    if not rows:
        return rows
    keep = [k for k in rows[0] if any(row[k] is not None for row in rows)]
    if len(keep) == len(rows[0]):
        return rows
    return [{k: row[k] for k in keep} for row in rows]


def _member(conn: Connection, column: ColumnElement[Any], values: Sequence[Any]) -> ColumnElement[bool]:
    """``column IN values``. On PostgreSQL one array parameter (``= ANY(:values)``) instead of one parameter
    per value: psycopg prepares repeated statements, and a generic plan over a thousand parameters on a
    freshly bulk-loaded table can take seconds per lookup."""
    if conn.dialect.name == "postgresql":
        element_type = Integer() if values and isinstance(values[0], int) else String()
        return column == any_(bindparam(None, list(values), type_=ARRAY(element_type)))
    return column.in_(values)


def _chunks(items: Sequence[T], size: int = _CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _ensure_models(conn: Connection, names: Iterable[str], added: _Added) -> dict[str, int]:
    wanted = sorted(set(names))
    ids: dict[str, int] = {}
    for chunk in _chunks(wanted):
        stmt = select(model_t.c.name, model_t.c.id).where(_member(conn, model_t.c.name, chunk))
        ids.update((str(n), int(i)) for n, i in conn.execute(stmt))
    missing = [n for n in wanted if n not in ids]
    if missing:
        now = utcnow()
        conn.execute(
            insert(model_t),
            [{"name": n, "active": True, "created_at": now} for n in missing],
        )
        for chunk in _chunks(missing):
            stmt = select(model_t.c.name, model_t.c.id).where(_member(conn, model_t.c.name, chunk))
            ids.update((str(n), int(i)) for n, i in conn.execute(stmt))
        added.models += len(missing)
    return ids


def _ensure_import_annotators(conn: Connection, judges: Iterable[str]) -> dict[str, int]:
    """One annotator (kind ``import``) per judge label, shared across files."""
    wanted = sorted(set(judges))
    ids: dict[str, int] = {}
    for chunk in _chunks(wanted):
        stmt = select(annotator_t.c.label, annotator_t.c.id).where(
            annotator_t.c.kind == IMPORT_ANNOTATOR_KIND,
            _member(conn, annotator_t.c.label, chunk),
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
        for chunk in _chunks(missing):
            stmt = select(annotator_t.c.label, annotator_t.c.id).where(
                annotator_t.c.kind == IMPORT_ANNOTATOR_KIND,
                _member(conn, annotator_t.c.label, chunk),
            )
            ids.update((str(label), int(i)) for label, i in conn.execute(stmt))
    return ids


def _existing_prompts(conn: Connection, external_ids: Iterable[str]) -> dict[str, int]:
    wanted = sorted(set(external_ids))
    ids: dict[str, int] = {}
    for chunk in _chunks(wanted):
        stmt = select(prompt_t.c.external_id, prompt_t.c.id).where(
            _member(conn, prompt_t.c.external_id, chunk)
        )
        ids.update((str(e), int(i)) for e, i in conn.execute(stmt))
    return ids


def _existing_outputs(
    conn: Connection, prompt_ids: Iterable[int]
) -> dict[tuple[int, int], tuple[int, Any, str]]:
    """(prompt id, model id) -> (output id, conversation, text) for the given prompts."""
    wanted = sorted(set(prompt_ids))
    found: dict[tuple[int, int], tuple[int, Any, str]] = {}
    for chunk in _chunks(wanted):
        stmt = select(
            output_t.c.prompt_id, output_t.c.model_id, output_t.c.id, output_t.c.conversation, output_t.c.text
        ).where(_member(conn, output_t.c.prompt_id, chunk))
        for p, m, o, conv, text in conn.execute(stmt):
            found[(p, m)] = (o, conv, text)
    return found


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


# ------------------------------------------------------------------------------------------------ battles


def import_battle_records(
    conn: Connection,
    records: Sequence[BattleRecord],
    *,
    file: str | Path = "<battles>",
    elo_config: EloConfig | None = None,
) -> _Added:
    """Write validated battles (and their votes, prompts and outputs) inside the caller's transaction.

    Rows whose import key is already stored are skipped. Raises :class:`InputError` when a battle's
    conversation contradicts an answer already stored for the same prompt and model.
    """
    added = _Added()
    keys = import_keys(records)
    existing: set[str] = set()
    for chunk in _chunks(keys):
        existing.update(
            conn.scalars(select(battle_t.c.import_key).where(_member(conn, battle_t.c.import_key, chunk)))
        )
    new = [(r, k) for r, k in zip(records, keys, strict=True) if k not in existing]
    if not new:
        return added

    model_ids = _ensure_models(conn, [n for r, _ in new for n in (r.model_a, r.model_b)], added)
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
    prompt_ids = _existing_prompts(conn, [k for k in prompt_key if k is not None])
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
        prompt_ids.update(_existing_prompts(conn, missing))
        added.prompts += len(missing)

    # Outputs: battles with conversations bring their answers; others link to catalog answers if stored.
    outputs = _existing_outputs(conn, prompt_ids.values())
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
        outputs.update(_existing_outputs(conn, {p for p, _ in pairs}))
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
            }
        )
    # Plain executemany (RETURNING would make SQLite insert row by row); the new ids are then read back
    # by import key, which is unique, so rows written concurrently by the site cannot be confused.
    before = conn.scalar(select(func.coalesce(func.max(battle_t.c.id), 0)))
    conn.execute(insert(battle_t), _without_null_columns(battle_rows))
    stmt = select(battle_t.c.import_key, battle_t.c.id).where(
        battle_t.c.id > before, battle_t.c.import_key.is_not(None)
    )
    battle_ids = {str(k): int(i) for k, i in conn.execute(stmt)}
    for vote, battle in zip(vote_rows, battle_rows, strict=True):
        vote["battle_id"] = battle_ids[battle["import_key"]]
    conn.execute(insert(vote_t), _without_null_columns(vote_rows))
    added.rows = len(new)
    rebuild_live_ratings(conn, config=elo_config)
    if conn.dialect.name == "postgresql" and len(new) >= _ANALYZE_AFTER:
        # Fresh statistics for the planner: without them the next import's key lookups on the bulk-loaded
        # table can take seconds each (measured: 2 minutes for 100,000 keys instead of 1 s).
        conn.execute(sa.text("ANALYZE battle, vote, prompt, output"))
    return added


# ------------------------------------------------------------------------------------------------ catalog


def import_catalog_records(
    conn: Connection, records: Sequence[CatalogRecord], *, file: str | Path = "<catalog>"
) -> _Added:
    """Write validated catalog rows inside the caller's transaction; what is already stored is skipped.

    A prompt or output that exists with different content is a conflict (:class:`InputError`), never
    silently overwritten: published snapshots may already refer to it.
    """
    added = _Added()
    first: dict[str, CatalogRecord] = {}
    for record in records:
        first.setdefault(record.prompt_id, record)
    existing = _existing_prompts(conn, first)
    if existing:
        for chunk in _chunks(sorted(existing)):
            stmt = select(
                prompt_t.c.external_id,
                prompt_t.c.text,
                prompt_t.c.conversation,
                prompt_t.c.category,
                prompt_t.c.language,
            ).where(_member(conn, prompt_t.c.external_id, chunk))
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
        prompt_ids.update(_existing_prompts(conn, [r.prompt_id for r in new_prompts]))
        added.prompts += len(new_prompts)

    with_output = [r for r in records if r.model is not None and r.output is not None]
    model_ids = _ensure_models(conn, [r.model for r in with_output if r.model is not None], added)
    outputs = _existing_outputs(conn, prompt_ids.values())
    new_rows: dict[tuple[int, int], dict[str, Any]] = {}
    now = utcnow()
    for record in with_output:
        assert record.model is not None and record.output is not None  # nosec B101 # type narrowing
        pair = (prompt_ids[record.prompt_id], model_ids[record.model])
        stored = outputs.get(pair)
        if stored is not None:
            if stored[2] != record.output:
                raise InputError(
                    file,
                    record.where,
                    f"model {record.model!r} already has a different answer to prompt {record.prompt_id!r}",
                )
            continue
        new_rows.setdefault(
            pair,
            {
                "prompt_id": pair[0],
                "model_id": pair[1],
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


# ------------------------------------------------------------------------------------------------- export


def export_votes(
    engine: Engine, out: str | Path, *, fmt: FileFormat = "jsonl", filters: VoteFilter | None = None
) -> int:
    """Write votes in the Chatbot Arena battle schema, in vote-id (commit) order; returns the row count."""
    with engine.connect() as conn:
        return write_rows(iter_vote_rows(conn, filters), Path(out), kind="battles", fmt=fmt)


def export_catalog(engine: Engine, out: str | Path, *, fmt: FileFormat = "jsonl") -> int:
    """Write prompts and outputs in the catalog schema (prompt id order, then output id order)."""
    with engine.connect() as conn:
        return write_rows(iter_catalog_rows(conn), Path(out), kind="catalog", fmt=fmt)
