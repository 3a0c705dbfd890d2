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


#: What the detector needs of each model: id, name, organisation, the operator's aliases.
_ModelNames = tuple[tuple[int, str, str | None, tuple[str, ...]], ...]


def _model_names(conn: Connection, ids: Sequence[int] | None = None) -> _ModelNames:
    stmt = select(model_t.c.id, model_t.c.name, model_t.c.organisation, model_t.c.aliases).order_by(
        model_t.c.id
    )
    if ids is not None:
        stmt = stmt.where(model_t.c.id.in_(ids))
    return tuple((int(i), str(n), o, tuple(a or ())) for i, n, o, a in conn.execute(stmt).all())


def _detector(models: _ModelNames) -> tuple[LeakDetector, dict[int, str]]:
    detector = LeakDetector({name: org for _, name, org, _ in models}, {name: a for _, name, _, a in models})
    return detector, {i: name for i, name, _, _ in models}


def texts_leak(conn: Connection, answers: Sequence[tuple[int, str]]) -> list[bool]:
    """For each ``(model_id, text)``: whether the text names that model or its maker (live answers are
    checked this way before their battle may be voted on)."""
    detector, names = _detector(_model_names(conn, sorted({m for m, _ in answers})))
    return [detector.leaks(names[m], text) for m, text in answers]


def _excerpt(text: str, leak: IdentityLeak) -> str:
    start = max(0, leak.start - _EXCERPT)
    end = min(len(text), leak.end + _EXCERPT)
    return ("..." if start else "") + " ".join(text[start:end].split()) + ("..." if end < len(text) else "")


def find_leaks(conn: Connection) -> list[LeakRow]:
    """Every output whose text names its own model or maker (see :mod:`votes.review.leaks`)."""
    detector, names = _detector(_model_names(conn))
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
    """Remembers which outputs leak, scanning only outputs it has not seen (outputs never change), except
    that a model whose names changed (an alias or organisation set) has all its outputs scanned again.

    Pairing asks :meth:`leaking_output_ids` on every refresh; after the first call it costs a read of the
    model table and one query for new output ids.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_id = 0
        self._leaking: set[int] = set()
        self._models: dict[int, tuple[int, str, str | None, tuple[str, ...]]] = {}

    def leaking_output_ids(self, conn: Connection) -> frozenset[int]:
        with self._lock:
            models = _model_names(conn)
            changed = [m[0] for m in models if m[0] in self._models and self._models[m[0]] != m]
            self._models = {m[0]: m for m in models}
            columns = (output_t.c.id, output_t.c.model_id, output_t.c.text)
            rows = list(
                conn.execute(select(*columns).where(output_t.c.id > self._last_id).order_by(output_t.c.id))
            )
            if changed:
                rows += conn.execute(
                    select(*columns).where(output_t.c.id <= self._last_id, output_t.c.model_id.in_(changed))
                ).all()
            if rows:
                detector, names = _detector(models)
                for output_id, model_id, text in rows:
                    if detector.leaks(names[model_id], text or ""):
                        self._leaking.add(output_id)
                    else:
                        self._leaking.discard(output_id)
                self._last_id = max(self._last_id, *(r[0] for r in rows))
            return frozenset(self._leaking)
