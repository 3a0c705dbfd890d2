"""Where the store keeps an imported battle's key, and how an import run finds it there.

An imported battle's key is its row's digest (the first 40 hexadecimal digits of a sha256) and its
occurrence number among identical rows of the file, ``"<digest>-<n>"``. The key stays in
``battle.import_key`` as text, but the store finds it by two integers, ``import_digest`` (the digest's
first 64 bits, signed, as both stores keep 64-bit integers) and ``import_copy`` (n), unique together
(``ix_battle_import_slot``). A unique index of 42-character texts in hash order was the largest cost of
writing a large import: two integers compare in one step and take a fifth of the index pages.

Two different digests can share their first 64 bits (for ten million rows, about one chance in 400,000
that any pair does). The key that comes second then has no ``import_digest`` and is unique by its text
in a partial index of those keys alone (``ix_battle_import_key_apart``, empty in practice). Within a run
:class:`votes.imports.digest_counts.DigestCounts` already tells such digests apart; against stored battles,
:func:`place_keys` finds out when a batch is staged, and a merge step that meets another run's battle in
its slot sets its rows again (:data:`UNSLOT`, :data:`MARK_FRESH`). A key has one slot, so whether it is
stored is: its slot holds it, or its text is among the keys without a digest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from sqlalchemy import select
from sqlalchemy.engine import Connection

from votes.bulk import chunks, member
from votes.imports.digest_counts import Numbered, digest_prefixes
from votes.tables import battle_t

__all__ = [
    "BATTLE_OF_ROW",
    "MARK_FRESH",
    "ROW_KEY",
    "UNSLOT",
    "Placed",
    "any_imported",
    "key_parts",
    "place_keys",
]

_HEX = frozenset("0123456789abcdef")
_RANGE = "import_id = :run AND seq >= :lo AND seq < :hi"
_SLOT_HOLDS_ROW = "b.import_digest = {row}.import_digest AND b.import_copy = {row}.import_copy"
#: A staged row's key: ``importrow`` keeps its digest and occurrence number, not the text made of them.
ROW_KEY = "({row}.digest || '-' || {row}.import_copy)"
_APART_HOLDS_ROW = f"b.import_key IS NOT NULL AND b.import_digest IS NULL AND b.import_key = {ROW_KEY}"

#: The id of the battle of a staged row ``r`` (an ``importrow``): in its slot, or by its text.
BATTLE_OF_ROW = (
    "COALESCE("  # nosec B608  # constant fragments of this module
    f"(SELECT b.id FROM battle b WHERE {_SLOT_HOLDS_ROW.format(row='r')}),"
    f" (SELECT b.id FROM battle b WHERE {_APART_HOLDS_ROW.format(row='r')}))"
)
#: Rows of a merge step whose slot a battle with another key has taken since they were staged lose it.
UNSLOT = (
    "UPDATE importrow"  # nosec B608  # constant fragments of this module
    f" SET import_digest = NULL WHERE {_RANGE} AND import_digest IS NOT NULL"
    f" AND EXISTS (SELECT 1 FROM battle b WHERE {_SLOT_HOLDS_ROW.format(row='importrow')}"
    f" AND b.import_key <> {ROW_KEY.format(row='importrow')})"
)
#: Whether each row of a merge step is still new to ``battle`` (after :data:`UNSLOT`).
MARK_FRESH = (
    "UPDATE importrow"  # nosec B608  # constant fragments of this module
    " SET fresh ="
    f" NOT EXISTS (SELECT 1 FROM battle b WHERE {_SLOT_HOLDS_ROW.format(row='importrow')})"
    f" AND NOT EXISTS (SELECT 1 FROM battle b WHERE {_APART_HOLDS_ROW.format(row='importrow')})"
    f" WHERE {_RANGE}"
)


class Placed(NamedTuple):
    """A batch's rows as staged: each key's ``import_digest`` (None: found by its text), its
    ``import_copy``, and whether the key is new to ``battle``."""

    digests: list[int | None]
    copies: list[int]
    fresh: list[bool]


def place_keys(conn: Connection, numbered: Numbered, apart: npt.NDArray[np.bool_], *, probe: bool) -> Placed:
    """Each key's place and whether it is stored, from the numbered keys of a batch and which of their
    digests the run counts apart. ``probe=False``: no battle was imported when the run began, so every
    key is new and its slot free (a run that has merged since is met by the merge step)."""
    keys = numbered.keys
    slots: list[int | None] = list(numbered.digests.tolist())
    if apart.any():
        for row in np.flatnonzero(apart).tolist():
            slots[row] = None
    copies: list[int] = numbered.copies.tolist()
    if not probe:
        return Placed(slots, copies, [True] * len(keys))
    held: dict[tuple[int, int], str] = {}
    for digests in chunks(sorted({d for d in slots if d is not None})):
        in_slots = select(battle_t.c.import_digest, battle_t.c.import_copy, battle_t.c.import_key).where(
            member(conn, battle_t.c.import_digest, digests)
        )
        held.update(((int(d), int(c)), str(k)) for d, c, k in conn.execute(in_slots))
    by_text: set[str] = set()
    for texts in chunks(list(keys)):
        by_text_stmt = select(battle_t.c.import_key).where(
            battle_t.c.import_key.is_not(None),
            battle_t.c.import_digest.is_(None),
            member(conn, battle_t.c.import_key, texts),
        )
        by_text.update(str(k) for k in conn.scalars(by_text_stmt))
    fresh: list[bool] = []
    for row, key in enumerate(keys):
        digest = slots[row]
        holder = None if digest is None else held.get((digest, copies[row]))
        if holder is not None and holder != key:  # another digest with the same first 64 bits is there
            slots[row], holder = None, None
        fresh.append(holder is None and key not in by_text)
    return Placed(slots, copies, fresh)


def any_imported(conn: Connection) -> bool:
    """Whether any battle came from an import (then a run's keys are looked up when they are staged)."""
    slotted = select(battle_t.c.id).where(battle_t.c.import_digest.is_not(None)).limit(1)
    by_text = (
        select(battle_t.c.id)
        .where(battle_t.c.import_key.is_not(None), battle_t.c.import_digest.is_(None))
        .limit(1)
    )
    return conn.scalar(slotted) is not None or conn.scalar(by_text) is not None


def key_parts(keys: Sequence[str]) -> list[tuple[int, int] | None]:
    """The ``import_digest`` and ``import_copy`` of each key of the form ``"<40 hex digits>-<n>"`` (what
    :class:`votes.imports.digest_counts.DigestCounts` numbers, its digests turned into integers by the same
    :func:`votes.imports.digest_counts.digest_prefixes`); None for any other text, found by its text."""
    numbered: list[tuple[int, str, int]] = []
    for row, key in enumerate(keys):
        digest, dash, occurrence = key.partition("-")
        if len(digest) != 40 or not dash or not set(digest) <= _HEX:
            continue
        if not (occurrence.isascii() and occurrence.isdigit()) or len(occurrence) > 9:
            continue
        if str(int(occurrence)) != occurrence:  # no leading zeros: one text per key
            continue
        numbered.append((row, digest, int(occurrence)))
    parts: list[tuple[int, int] | None] = [None] * len(keys)
    signed = digest_prefixes([digest for _, digest, _ in numbered]).view(np.int64).tolist()
    for (row, _, copy), number in zip(numbered, signed, strict=True):
        parts[row] = (int(number), copy)
    return parts
