"""Which category and language board each selected vote belongs to, read once for every board of a publish.

A category board holds the votes on prompts of that category; a language board the votes whose battle
is in that language, or whose prompt is when the battle does not say (the ``category`` and ``language``
of :class:`~votes.reads.filters.VoteFilter`, spelled here as one ``COALESCE``). :func:`vote_slice_keys`
reads, for the votes a filter selects and in vote-id order (the order of
:func:`votes.reads.scans.load_battles`), each vote's two models and its category and language, coded as
small integers; the boards' votes are then masks over one scan of the votes instead of one read per
board.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from votes.bulk import column_chunks
from votes.reads.filters import VoteFilter, filter_votes
from votes.tables import battle_t, prompt_t, vote_t

__all__ = ["SliceKeys", "vote_slice_keys"]

#: Rows per fetch of the keys.
_CHUNK = 100_000


@dataclass(frozen=True)
class SliceKeys:
    """Per selected vote, in vote-id order: its id, its models' stored ids, and the codes of its category
    and language (-1: none), which index ``categories`` and ``languages``."""

    vote_id: npt.NDArray[np.int64]
    model_a_id: npt.NDArray[np.int64]
    model_b_id: npt.NDArray[np.int64]
    category: npt.NDArray[np.int64]
    language: npt.NDArray[np.int64]
    categories: tuple[str, ...]
    languages: tuple[str, ...]

    def mask(self, *, category: str | None = None, language: str | None = None) -> npt.NDArray[np.bool_]:
        """The votes of the board of ``category`` and ``language`` (None: any)."""
        keep = np.ones(self.vote_id.shape[0], dtype=bool)
        for value, names, codes in (
            (category, self.categories, self.category),
            (language, self.languages, self.language),
        ):
            if value is not None:
                keep &= codes == (names.index(value) if value in names else -2)
        return keep

    def votes_per(self) -> tuple[dict[str, int], dict[str, int]]:
        """Votes per category and per language."""
        per_category = np.bincount(self.category[self.category >= 0], minlength=len(self.categories))
        per_language = np.bincount(self.language[self.language >= 0], minlength=len(self.languages))
        return (
            {name: int(n) for name, n in zip(self.categories, per_category, strict=True)},
            {name: int(n) for name, n in zip(self.languages, per_language, strict=True)},
        )


def _codes(values: Sequence[Any], known: dict[str, int]) -> npt.NDArray[np.int64]:
    """Each value's code in ``known`` (new ones added in order of appearance); None is -1."""
    out = np.empty(len(values), dtype=np.int64)
    for k, value in enumerate(values):
        out[k] = -1 if value is None else known.setdefault(str(value), len(known))
    return out


def vote_slice_keys(conn: Connection, filters: VoteFilter) -> SliceKeys:
    """The category and language of every vote ``filters`` selects (its own category and language, if
    any, still apply), in vote-id order, with the vote's models; names sorted, codes following them."""
    language = func.coalesce(battle_t.c.language, prompt_t.c.language)
    stmt = (
        select(vote_t.c.id, vote_t.c.model_a_id, vote_t.c.model_b_id, prompt_t.c.category, language)
        .select_from(vote_t)
        .join(battle_t, vote_t.c.battle_id == battle_t.c.id)
        .order_by(vote_t.c.id)
    )
    if filters.category is None and filters.language is None:  # else the filter joins the prompt itself
        stmt = stmt.outerjoin(prompt_t, battle_t.c.prompt_id == prompt_t.c.id)
    stmt = filter_votes(stmt, filters, battle_joined=True)
    parts: list[list[npt.NDArray[np.int64]]] = [[], [], [], [], []]
    categories: dict[str, int] = {}
    languages: dict[str, int] = {}
    for columns in column_chunks(conn, stmt, size=_CHUNK):
        for k in range(3):
            parts[k].append(np.array(columns[k], dtype=np.int64))
        parts[3].append(_codes(columns[3], categories))
        parts[4].append(_codes(columns[4], languages))
    joined = [np.concatenate(p) if p else np.zeros(0, dtype=np.int64) for p in parts]
    category, category_names = _sorted_codes(joined[3], categories)
    language_code, language_names = _sorted_codes(joined[4], languages)
    return SliceKeys(joined[0], joined[1], joined[2], category, language_code, category_names, language_names)


def _sorted_codes(
    codes: npt.NDArray[np.int64], known: dict[str, int]
) -> tuple[npt.NDArray[np.int64], tuple[str, ...]]:
    """Codes renumbered so that they follow the names in sorted order."""
    names = tuple(sorted(known))
    recode = np.empty(len(known) + 1, dtype=np.int64)
    recode[-1] = -1
    for name, code in known.items():
        recode[code] = names.index(name)
    return recode[codes], names
