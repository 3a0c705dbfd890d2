"""Identity leaks over the store: the admin list of answers that name their model, and the pairing filter.

The text matching itself is :mod:`votes.review.leaks`; this module runs it over the stored outputs. It imports
no rating math, so the web app's pairing (which asks :class:`LeakScanner` on every catalog refresh) stays
light.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from votes.review.leaks import IdentityLeak, LeakDetector
from votes.tables import battle_t, model_t, output_t, prompt_t, vote_t

__all__ = ["LeakRow", "LeakScanner", "find_leaks", "texts_leak"]

#: Characters of context either side of a leak in :attr:`LeakRow.excerpt`.
_EXCERPT = 60


@dataclass(frozen=True)
class LeakRow:
    """An output that names its model or maker, with what was found and how many votes it took part in."""

    output_id: int
    prompt: str | None
    model: str
    aliases: tuple[str, ...]
    self_reference: bool
    excerpt: str
    n_votes: int


def _detector(conn: Connection) -> tuple[LeakDetector, dict[int, str]]:
    models = conn.execute(select(model_t.c.id, model_t.c.name, model_t.c.organisation)).all()
    return LeakDetector({name: org for _, name, org in models}), {i: name for i, name, _ in models}


def texts_leak(conn: Connection, answers: Sequence[tuple[int, str]]) -> list[bool]:
    """For each ``(model_id, text)``: whether the text names that model or its maker (live answers are
    checked this way before their battle may be voted on)."""
    ids = sorted({m for m, _ in answers})
    models = conn.execute(
        select(model_t.c.id, model_t.c.name, model_t.c.organisation).where(model_t.c.id.in_(ids))
    ).all()
    detector = LeakDetector({name: org for _, name, org in models})
    names = {i: name for i, name, _ in models}
    return [detector.leaks(names[m], text) for m, text in answers]


def _excerpt(text: str, leak: IdentityLeak) -> str:
    start = max(0, leak.start - _EXCERPT)
    end = min(len(text), leak.end + _EXCERPT)
    return ("..." if start else "") + " ".join(text[start:end].split()) + ("..." if end < len(text) else "")


def find_leaks(conn: Connection) -> list[LeakRow]:
    """Every output whose text names its own model or maker (see :mod:`votes.review.leaks`)."""
    detector, names = _detector(conn)
    rows = conn.execute(
        select(output_t.c.id, output_t.c.model_id, output_t.c.text, prompt_t.c.external_id)
        .join(prompt_t, prompt_t.c.id == output_t.c.prompt_id)
        .order_by(output_t.c.id)
    ).all()
    found: list[tuple[int, str | None, str, list[IdentityLeak], str]] = []
    for output_id, model_id, text, external_id in rows:
        model = names[model_id]
        leaks = detector.find(model, text or "")
        if leaks:
            found.append((output_id, external_id, model, leaks, text))
    votes: dict[int, int] = {}
    if found:
        ids = [f[0] for f in found]
        for column in (battle_t.c.output_a_id, battle_t.c.output_b_id):
            stmt = (
                select(column, func.count())
                .select_from(vote_t)
                .join(battle_t, vote_t.c.battle_id == battle_t.c.id)
                .where(column.in_(ids))
                .group_by(column)
            )
            for output_id, n in conn.execute(stmt).all():
                votes[output_id] = votes.get(output_id, 0) + int(n)
    return [
        LeakRow(
            output_id=output_id,
            prompt=external_id,
            model=model,
            aliases=tuple(dict.fromkeys(leak.alias for leak in leaks)),
            self_reference=any(leak.self_reference for leak in leaks),
            excerpt=_excerpt(text, leaks[0]),
            n_votes=votes.get(output_id, 0),
        )
        for output_id, external_id, model, leaks, text in found
    ]


class LeakScanner:
    """Remembers which outputs leak, scanning only outputs it has not seen (outputs never change).

    Pairing asks :meth:`leaking_output_ids` on every refresh; after the first call it costs one query for
    new output ids.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_id = 0
        self._leaking: set[int] = set()

    def leaking_output_ids(self, conn: Connection) -> frozenset[int]:
        with self._lock:
            rows = conn.execute(
                select(output_t.c.id, output_t.c.model_id, output_t.c.text)
                .where(output_t.c.id > self._last_id)
                .order_by(output_t.c.id)
            ).all()
            if rows:
                detector, names = _detector(conn)
                for output_id, model_id, text in rows:
                    if detector.leaks(names[model_id], text or ""):
                        self._leaking.add(output_id)
                self._last_id = max(r[0] for r in rows)
            return frozenset(self._leaking)
