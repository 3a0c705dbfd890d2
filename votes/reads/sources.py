"""Battles for the fits and evaluations, from a battles file or from the store, in the math's types.

:func:`load_battles_file` aggregates a file into pair counts (the fast columnar read);
:func:`battles_from_file` and :func:`battles_from_store` give one row per vote
(:class:`leaderboard.battles.Battles`), optionally with style covariates of the two answers
(:mod:`leaderboard.style.features`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from leaderboard.battles import Battles
from leaderboard.data import PairCounts
from leaderboard.evaluation.held_out import FloatArray
from leaderboard.style.features import TOKEN_ESTIMATOR, style_differences
from votes.files.battle_rows import BattleRecord, parse_battles
from votes.files.catalog_records import parse_catalog
from votes.files.columns import read_battle_columns
from votes.files.reading import read_rows
from votes.files.records import InputError
from votes.files.selection import BattleFilter, record_columns, select_battles
from votes.reads.filters import VoteFilter
from votes.reads.scans import iter_vote_texts, load_battles

__all__ = ["MIN_STYLE_BATTLES", "battles_from_file", "battles_from_store", "load_battles_file"]

#: A style covariate is used only if the two answers differ in it in at least this many battles.
MIN_STYLE_BATTLES = 30


def load_battles_file(
    path: Path,
    *,
    language: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    bucket_seconds: float | None = None,
) -> tuple[PairCounts, str, int]:
    """Read a Chatbot Arena battles file as columns, filter it, aggregate it.

    Returns the counts, the sha256 of the votes file (see :func:`votes.files.columns.read_battle_columns`)
    and the number of battles read. Raises :class:`~votes.files.records.InputError`.
    """
    try:
        battles, digest, n_battles = read_battle_columns(path, language=language, since=since, until=until)
        counts = battles.counts(bucket_seconds=bucket_seconds)
    except ValueError as exc:
        raise InputError(path, None, str(exc)) from None
    return counts, digest, n_battles


def _assistant_text(conversation: tuple[dict[str, str], ...] | None) -> str | None:
    if conversation is None:
        return None
    return "\n\n".join(str(m.get("content", "")) for m in conversation if m.get("role") == "assistant")


def battles_from_file(path: Path, *, catalog: Path | None = None, style: bool = False) -> Battles:
    """Read a Chatbot Arena battles file (JSONL/JSON/CSV/Parquet, gz) into per-vote arrays, rows validated.

    With ``style``, answer texts come from the battles' conversations or, failing that, from a catalog
    file (``prompt_id``/``model``/``output``) matched on ``question_id``. Raises
    :class:`~votes.files.records.InputError` for a bad file and ``ValueError`` for a battle without texts.
    """
    fmt, rows = read_rows(path)
    records = parse_battles(path, fmt, rows)
    battles = _battles_from_records(records)
    if not style:
        return battles
    texts: dict[tuple[str, str], str] = {}
    if catalog is not None:
        cat_fmt, cat_rows = read_rows(catalog)
        for entry in parse_catalog(catalog, cat_fmt, cat_rows):
            if entry.model is not None and entry.output is not None:
                texts[(entry.prompt_id, entry.model)] = entry.output
    left: list[str] = []
    right: list[str] = []
    for rec in records:
        a = _assistant_text(rec.conversation_a)
        b = _assistant_text(rec.conversation_b)
        if a is None or b is None:
            qid = rec.question_id or ""
            a, b = texts.get((qid, rec.model_a)), texts.get((qid, rec.model_b))
        if a is None or b is None:
            raise ValueError(
                f"{rec.where}: no answer texts for style control (give conversations or an answer catalog)"
            )
        left.append(a)
        right.append(b)
    values, names = _style_columns(left, right)
    measured = {
        "length": {
            "unit": "tokens",
            "answers_with_generation_tokens": 0,
            "answers_with_estimated_tokens": 2 * len(left),
            "estimator": TOKEN_ESTIMATOR,
        }
    }
    return replace(battles, features=values, feature_names=names, feature_notes=measured)


def _style_columns(
    left: list[str],
    right: list[str],
    *,
    tokens_a: list[int | None] | None = None,
    tokens_b: list[int | None] | None = None,
) -> tuple[FloatArray, tuple[str, ...]]:
    """Style covariates of the answer pairs, keeping only the columns that vary often enough."""
    diffs = style_differences(left, right, tokens_a=tokens_a, tokens_b=tokens_b)
    # a covariate that differs in only a handful of battles cannot be estimated (it separates them)
    keep = np.count_nonzero(diffs.values, axis=0) >= MIN_STYLE_BATTLES
    return diffs.values[:, keep], tuple(n for n, k in zip(diffs.names, keep, strict=True) if k)


def _battles_from_records(records: list[BattleRecord]) -> Battles:
    """Validated rows as battles, coded as every file read codes them
    (:func:`votes.files.selection.select_battles`: models sorted by name, judges as annotators,
    ``question_id`` as prompt ids, weights and sides)."""
    battles, _ = select_battles(record_columns(records), BattleFilter())
    return battles


def battles_from_store(
    db: Session | Connection, *, style: bool = False, filters: VoteFilter | None = None, who: bool = False
) -> Battles:
    """The stored votes (those ``filters`` select, all by default), one row per vote in commit order;
    with ``who``, each vote's annotator and prompt ids too.

    With ``style``, covariates from the battles' outputs, NaN rows where a vote has no answer texts (those
    votes are left out of the style rows only); ``ValueError`` when no vote has both texts.
    """
    battles = load_battles(db, filters=filters, who=who)
    texts = list(iter_vote_texts(db, filters=filters)) if style else []
    if not style:
        return battles
    has_text = np.array([t[1] is not None and t[2] is not None for t in texts], dtype=bool)
    if not has_text.any():
        raise ValueError("no stored vote has both answer texts: nothing for the style rows")
    kept = [t for t in texts if t[1] is not None and t[2] is not None]
    tokens_a, tokens_b = [t[3] for t in kept], [t[4] for t in kept]
    values, names = _style_columns(
        [t[1] or "" for t in kept], [t[2] or "" for t in kept], tokens_a=tokens_a, tokens_b=tokens_b
    )
    features = np.full((len(battles), values.shape[1]), np.nan)
    features[has_text] = values
    known = sum(k is not None for k in tokens_a + tokens_b)
    measured = {
        "length": {
            "unit": "tokens",
            "answers_with_generation_tokens": known,
            "answers_with_estimated_tokens": len(tokens_a) + len(tokens_b) - known,
            "estimator": TOKEN_ESTIMATOR,
        }
    }
    return replace(battles, features=features, feature_names=names, feature_notes=measured)
