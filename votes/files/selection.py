"""Which battles of a file enter a fit: the filters every command shares, applied to battle columns.

:class:`BattleFilter` is what ``--language``, ``--since``/``--until``, ``--anony-only``, ``--models``,
``--exclude-models`` and ``--judge`` ask for; :func:`select_battles` applies it to the columns of a
battles file (one array per field, one entry per battle) and codes what is left as
:class:`leaderboard.battles.Battles`. Self-battles among the selected battles are returned apart, for the
caller to refuse or report: they never vanish unnoticed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from leaderboard.battles import Battles
from leaderboard.data import OUTCOME_STRINGS
from votes.files.battle_rows import BattleRecord

__all__ = [
    "BattleColumns",
    "BattleFilter",
    "CodedColumn",
    "Text",
    "keep_mask",
    "record_columns",
    "select_battles",
]

_CODES: dict[str, int] = {label: int(code) for code, label in OUTCOME_STRINGS.items()}


@dataclass(frozen=True)
class BattleFilter:
    """The battles to keep (every field None or False: all of them).

    ``since <= tstamp < until`` (unknown times never match a time bound); ``anony_only`` keeps battles
    marked ``anony`` true (the public leaderboards count only votes cast before the names were shown);
    ``models`` keeps battles between two listed models, ``exclude_models`` drops battles involving one;
    ``judge`` keeps battles of that judge (annotator).
    """

    language: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    anony_only: bool = False
    models: tuple[str, ...] | None = None
    exclude_models: tuple[str, ...] = ()
    judge: str | None = None

    def as_metadata(self) -> dict[str, Any]:
        """The filters as JSON values, for a snapshot's metadata."""
        out = asdict(self)
        for key in ("since", "until"):
            if out[key] is not None:
                out[key] = out[key].isoformat()
        out["models"] = None if self.models is None else list(self.models)
        out["exclude_models"] = list(self.exclude_models)
        return out


@dataclass(frozen=True)
class CodedColumn:
    """A text (or flag) column as one small integer per battle into its distinct values.

    Ten million battles name a hundred models: comparing and selecting on the hundred values and then
    indexing by the codes does the work once per value, and the codes take 4 bytes a battle where an
    object array takes 8 plus the objects. ``values`` may hold ``None`` (a missing value); equal values
    appear once.
    """

    codes: npt.NDArray[np.integer[Any]]
    values: npt.NDArray[np.object_]

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    @classmethod
    def of(cls, objects: npt.NDArray[np.object_]) -> CodedColumn:
        """``objects`` coded in order of first appearance (``None`` last, whether or not it occurs)."""
        import pandas as pd  # its factorize is the fast one; imported by the reads that code columns

        codes, uniques = pd.factorize(objects, use_na_sentinel=True)
        values = np.empty(len(uniques) + 1, dtype=object)
        values[:-1] = list(uniques)
        codes[codes < 0] = len(uniques)
        return cls(codes.astype(np.int32), values)

    @classmethod
    def missing(cls, n: int) -> CodedColumn:
        """A column the file does not have: ``None`` for every battle, without a code per battle in memory
        (the codes are one zero broadcast)."""
        values = np.empty(1, dtype=object)
        return cls(np.broadcast_to(np.int32(0), (n,)), values)

    def where(self, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """Per battle, the entry of ``mask`` (one per distinct value) for its value."""
        out: npt.NDArray[np.bool_] = np.asarray(mask, dtype=bool)[self.codes]
        return out

    def known(self) -> npt.NDArray[np.bool_]:
        """Which distinct values are not missing."""
        return np.fromiter((v is not None for v in self.values), dtype=bool, count=len(self.values))

    def objects(self) -> npt.NDArray[np.object_]:
        """The column spelled out, one object per battle (equal values one object)."""
        out: npt.NDArray[np.object_] = self.values[self.codes]
        return out


#: A text (or flag) column: spelled out, one object per battle (``None`` for a missing value), as rows
#: give it; or coded, as a file's record batches give it.
Text: TypeAlias = CodedColumn | npt.NDArray[np.object_]


@dataclass(frozen=True)
class BattleColumns:
    """A battles file as columns: text and flags as :data:`Text`, numbers as arrays.

    Coded ``model_a`` and ``model_b`` that share one ``values`` array are compared by their codes; any
    other pair is coded together first.
    """

    model_a: Text
    model_b: Text
    winner: Text
    language: Text
    tstamp: npt.NDArray[np.float64]
    anony: Text
    judge: Text
    weight: npt.NDArray[np.float64]
    sided: npt.NDArray[np.bool_]
    #: the prompt each battle was on (text; None where the file has none)
    question_id: Text | None = None

    def __len__(self) -> int:
        return len(self.model_a)


def record_columns(records: list[BattleRecord]) -> BattleColumns:
    """Validated battle rows as columns."""

    def objects(name: str) -> npt.NDArray[np.object_]:
        out = np.empty(len(records), dtype=object)
        out[:] = [getattr(r, name) for r in records]
        return out

    return BattleColumns(
        model_a=objects("model_a"),
        model_b=objects("model_b"),
        winner=objects("winner"),
        language=objects("language"),
        tstamp=np.asarray([np.nan if r.tstamp is None else r.tstamp for r in records], dtype=np.float64),
        anony=objects("anony"),
        judge=objects("judge"),
        weight=np.asarray([r.weight for r in records], dtype=np.float64),
        sided=np.asarray([r.sided for r in records], dtype=bool),
        question_id=objects("question_id"),
    )


def _coded(column: Text) -> CodedColumn:
    return column if isinstance(column, CodedColumn) else CodedColumn.of(column)


def _models(cols: BattleColumns) -> tuple[CodedColumn, CodedColumn]:
    """Both model columns coded against one list of names (a self-battle: two equal codes)."""
    a, b = cols.model_a, cols.model_b
    if isinstance(a, CodedColumn) and isinstance(b, CodedColumn) and a.values is b.values:
        return a, b
    spelled = [c.objects() if isinstance(c, CodedColumn) else c for c in (a, b)]
    both = CodedColumn.of(np.concatenate(spelled))
    n = len(a)
    return CodedColumn(both.codes[:n], both.values), CodedColumn(both.codes[n:], both.values)


#: a test of a column's values, one answer per value
_Test: TypeAlias = Callable[[npt.NDArray[np.object_]], npt.NDArray[np.bool_]]


def _where(column: Text, test: _Test) -> npt.NDArray[np.bool_]:
    """``test`` of each battle's value: of each distinct value once when the column is coded."""
    if isinstance(column, CodedColumn):
        return column.where(test(column.values))
    return np.asarray(test(column), dtype=bool)


def _member(names: tuple[str, ...]) -> _Test:
    def test(values: npt.NDArray[np.object_]) -> npt.NDArray[np.bool_]:
        import pandas as pd  # its isin hashes once; the import command, which never filters, skips pandas

        out: npt.NDArray[np.bool_] = pd.Series(values, dtype=object).isin(list(names)).to_numpy()
        return out

    return test


def _equal(wanted: object) -> _Test:
    def test(values: npt.NDArray[np.object_]) -> npt.NDArray[np.bool_]:
        return np.asarray(values == wanted, dtype=bool)  # an object array: as Python compares each value

    return test


def keep_mask(cols: BattleColumns, f: BattleFilter) -> npt.NDArray[np.bool_]:
    """Which battles ``f`` keeps (self-battles included)."""
    keep = np.ones(len(cols), dtype=bool)
    if f.language is not None:
        keep &= _where(cols.language, _equal(f.language))
    if f.since is not None:
        keep &= cols.tstamp >= f.since.timestamp()
    if f.until is not None:
        keep &= cols.tstamp < f.until.timestamp()
    if f.anony_only:
        keep &= _where(cols.anony, _equal(True))  # None and False are not anonymous
    if f.models is not None:
        allowed = _member(f.models)
        keep &= _where(cols.model_a, allowed) & _where(cols.model_b, allowed)
    if f.exclude_models:
        banned = _member(f.exclude_models)
        keep &= ~(_where(cols.model_a, banned) | _where(cols.model_b, banned))
    if f.judge is not None:
        keep &= _where(cols.judge, _equal(f.judge))
    return keep


def _first_seen(
    column: CodedColumn, rows: npt.NDArray[np.integer[Any]]
) -> tuple[npt.NDArray[np.int64], list[Any]]:
    """The values of ``rows`` (codes of ``column``) coded anew in order of first appearance, a missing
    value -1; and the values in that order."""
    import pandas as pd  # its factorize keeps first-appearance order fast; only the filters that code use it

    seen, uniques = pd.factorize(rows)
    known = column.known()[uniques]
    renumber = np.cumsum(known, dtype=np.int64) - 1
    renumber[~known] = -1
    return renumber[seen], list(column.values[uniques[known]])


def select_battles(cols: BattleColumns, f: BattleFilter) -> tuple[Battles, npt.NDArray[np.int64]]:
    """The battles ``f`` keeps, coded against the models they name (sorted by name), without self-battles.

    Returns the battles and the row positions (into ``cols``) of the selected self-battles.

    Raises
    ------
    ValueError
        If a selected battle has an unknown winner.
    """
    keep = keep_mask(cols, f)
    model_a, model_b = _models(cols)
    self_battle = keep & (model_a.codes == model_b.codes)
    keep &= ~self_battle
    every = bool(keep.all())

    def kept(column: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """The kept rows of ``column``: the column itself when every row is kept (no copy of a million)."""
        return column if every else column[keep]

    a, b = kept(model_a.codes), kept(model_b.codes)
    named = model_a.values
    used = np.zeros(len(named), dtype=bool)
    used[a] = True
    used[b] = True
    if used[~model_a.known()].any():
        raise ValueError("a battle without a model name")
    order = sorted(np.flatnonzero(used).tolist(), key=lambda code: named[code])  # by name
    rank = np.full(len(named), -1, dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    names = [named[code] for code in order]
    ia, ib = rank[a], rank[b]
    winner = _coded(cols.winner)
    w = kept(winner.codes)
    by_value = np.asarray([_CODES.get(v, -1) if isinstance(v, str) else -1 for v in winner.values])
    outcome = by_value.astype(np.int8)[w]
    if (outcome < 0).any():  # anything but the four strings
        bad = winner.values[w[np.flatnonzero(outcome < 0)[0]]]
        raise ValueError(f"unknown winner {bad!r}; expected one of {', '.join(map(repr, _CODES))}")
    weight = kept(cols.weight)
    sided = kept(cols.sided)
    stamps = kept(cols.tstamp)
    judge = _coded(cols.judge)
    judges = kept(judge.codes)
    annotator = None
    annotator_names: tuple[str, ...] = ()
    named_judge = judge.known()
    if named_judge.any() and named_judge[judges].any():
        # judges coded in order of first appearance; a battle without one is -1 (its own)
        annotator, uniques = _first_seen(judge, judges)
        annotator_names = tuple(str(u) for u in uniques)
    prompt = None
    if cols.question_id is not None:
        question = _coded(cols.question_id)
        questions = kept(question.codes)
        named_prompt = question.known()
        if named_prompt.any() and named_prompt[questions].any():  # coded by first appearance; none -1
            prompt = _first_seen(question, questions)[0]
    battles = Battles(
        models=tuple(str(n) for n in names),
        model_a=ia,
        model_b=ib,
        outcome=outcome,
        # times only when every battle has one: the time split and online raters need a full clock
        time=stamps if np.all(np.isfinite(stamps)) else None,
        weight=None if np.all(weight == 1.0) else weight,
        sided=None if np.all(sided) else sided,
        annotator=annotator,
        annotator_names=annotator_names,
        prompt=prompt,
    )
    return battles, np.flatnonzero(self_battle).astype(np.int64)
