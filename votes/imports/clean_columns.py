"""Clean Chatbot Arena battles checked and staged as columns: the import's fast path.

Row by row (:mod:`votes.files.battle_rows`), a battle costs a dictionary, a dozen field checks, a record, a
canonical JSON line for its digest and a staging dictionary: about 30 µs, half a minute at a million rows.
Most large battle files are plain Chatbot Arena battles without conversations, whose columns hold a few
hundred distinct names. Here such a batch, read by pyarrow, is checked as whole columns: each distinct text
value once, through the very :class:`votes.files.fields.RowFields` checks the careful path applies to each
row (so it is accepted, normalised or refused for the same reasons), numbers and flags as arrays. A batch that
is not plainly clean (a bad or unexpected value, a column of another type, a self-battle) is handed back:
the careful path then reads it and names the row. Nothing here decides an error message.

What a clean batch stages, and each row's digest (with its occurrence number, the import key), are exactly
what the careful path gives for the same rows (pinned by the tests), so a file imported either way, or by
an older version, is the same file to a later import.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from leaderboard.data import OUTCOME_STRINGS
from votes.files.fields import RowFields
from votes.files.records import TSTAMP_MAX, InputError
from votes.files.selection import BattleColumns

__all__ = ["CleanBatch", "clean_batch", "clean_digests", "iso_times", "rows_table"]

_Objects = npt.NDArray[np.object_]
_WINNERS = frozenset(OUTCOME_STRINGS.values())
#: Columns a clean batch may hold (others are ignored, as the careful path ignores them), and those
#: that send the whole batch to the careful path (answers to store and compare).
_CONVERSATIONS = ("conversation_a", "conversation_b")


@dataclass(frozen=True)
class CleanBatch:
    """Validated battles as columns, values as :class:`votes.files.battle_rows.BattleRecord` holds them.

    Object columns hold one Python object per distinct value (``None`` where a row has none); ``tstamp``
    is NaN where a row has none. ``json_*`` columns are each value's canonical JSON text (``null``),
    for the digests."""

    model_a: _Objects
    model_b: _Objects
    winner: _Objects
    question_id: _Objects
    judge: _Objects
    turn: _Objects
    anony: _Objects
    language: _Objects
    tstamp: npt.NDArray[np.float64]
    weight: npt.NDArray[np.float64]
    sided: npt.NDArray[np.bool_]
    json_question_id: pa.Array
    json_model_a: pa.Array
    json_model_b: pa.Array
    json_winner: pa.Array
    json_judge: pa.Array
    json_turn: pa.Array
    json_anony: pa.Array
    json_language: pa.Array

    def __len__(self) -> int:
        return int(self.model_a.shape[0])

    def take(self, index: npt.NDArray[Any]) -> CleanBatch:
        """The rows at ``index`` (a boolean mask or positions), in that order."""
        positions = np.flatnonzero(index) if index.dtype == np.bool_ else np.asarray(index)
        picked = pa.array(positions, pa.int64())
        values: dict[str, Any] = {}
        for f in fields(self):
            column = getattr(self, f.name)
            values[f.name] = column.take(picked) if isinstance(column, pa.Array) else column[positions]
        return CleanBatch(**values)

    def __getitem__(self, rows: slice) -> CleanBatch:
        """The rows of a slice, as a batch."""
        return self.take(np.arange(len(self))[rows])

    def selection(self) -> BattleColumns:
        """The columns :func:`votes.files.selection.keep_mask` filters on."""
        return BattleColumns(
            model_a=self.model_a,
            model_b=self.model_b,
            winner=self.winner,
            language=self.language,
            tstamp=self.tstamp,
            anony=self.anony,
            judge=self.judge,
            weight=self.weight,
            sided=self.sided,
            question_id=self.question_id,
        )

    def self_battles(self) -> npt.NDArray[np.bool_]:
        """Rows whose two models are one (the careful path refuses them: ``SELF_BATTLE``)."""
        same: npt.NDArray[np.bool_] = self.model_a == self.model_b
        return same


class _NotClean(Exception):
    """The batch needs the careful path (which names the row and the reason)."""


def _coded(column: pa.ChunkedArray | pa.Array) -> tuple[list[Any], npt.NDArray[np.int64]]:
    """A column's distinct values and each row's code into them; a null is code ``len(values)``."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    coded = column if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)
    values = coded.dictionary.to_pylist()
    codes = np.asarray(coded.indices.fill_null(len(values)).to_numpy(zero_copy_only=False), dtype=np.int64)
    return values, codes


def _text_column(
    table: pa.RecordBatch | pa.Table, name: str, check: Any, *, numbered: bool = False
) -> tuple[_Objects, pa.Array]:
    """A text column through the careful check of each distinct value: the values as records hold them
    and their JSON texts. ``check(raw)`` returns the stored value or raises :class:`InputError`; an absent
    column is all None."""
    n = table.num_rows
    if name not in table.column_names:
        return np.full(n, None, dtype=object), pa.array(["null"] * n, pa.string())
    column = table.column(name)
    kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if pa.types.is_null(kind):
        return np.full(n, None, dtype=object), pa.array(["null"] * n, pa.string())
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)) and not (
        numbered and pa.types.is_integer(kind) and not pa.types.is_uint64(kind)
    ):
        raise _NotClean(name)
    raw, codes = _coded(column)
    stored: list[Any] = []
    try:
        stored.extend(check(value) for value in raw)
        stored.append(check(None) if column.null_count else None)  # what a row without a value holds
    except InputError:
        raise _NotClean(name) from None
    objects = np.empty(len(stored), dtype=object)
    objects[:] = stored
    texts = pa.array([json.dumps(v, ensure_ascii=False) for v in stored], pa.string())
    return objects[codes], texts.take(pa.array(codes))


def _field(name: str, method: str, *, text_cells: bool = False, **options: Any) -> Any:
    """A check of one value as :class:`RowFields` makes it on a row holding just that value."""

    def check(value: Any) -> Any:
        row = {} if value is None else {name: value}
        fields_ = RowFields(_NOWHERE, "", row, text_cells=text_cells)
        return getattr(fields_, method)(name, **options)

    return check


#: The columns a CSV file holds as text to convert (numbers, integers, flags), with the
#: :class:`RowFields` method that converts such a cell on the careful path, and its Arrow type.
_CONVERTED = {
    "tstamp": "number",
    "weight": "number",
    "turn": "integer",
    "anony": "boolean",
    "sided": "boolean",
}
_CONVERTED_TYPES = {"number": pa.float64(), "integer": pa.int64(), "boolean": pa.bool_()}


def _converted_cells(table: pa.RecordBatch | pa.Table) -> pa.Table:
    """A CSV batch with its number, integer and flag cells converted: each distinct text once through
    the very :class:`RowFields` conversion the careful path applies to a CSV cell (``float(text)``,
    ``int(text)``, ``true``/``1``/``false``/``0`` in any case), so a value is read, or refused, as
    there. Raises :class:`_NotClean` for a cell that conversion refuses."""
    out = table if isinstance(table, pa.Table) else pa.Table.from_batches([table])
    for name, method in _CONVERTED.items():
        if name not in out.column_names:
            continue
        column = out.column(name)
        kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
        if pa.types.is_null(kind):
            continue
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise _NotClean(name)
        raw, codes = _coded(column)
        try:
            if (
                method == "number"
            ):  # RowFields.number on a text cell: float(text), then finite (checked below)
                values: list[Any] = [float(value) for value in raw]
            else:
                convert = _field(name, method, text_cells=True)
                values = [convert(value) for value in raw]
        except (InputError, ValueError):
            raise _NotClean(name) from None
        typed = pa.array([*values, None], _CONVERTED_TYPES[method]).take(pa.array(codes))
        out = out.set_column(out.column_names.index(name), name, typed)
    return out


def _number_column(table: pa.RecordBatch | pa.Table, name: str, default: float) -> npt.NDArray[np.float64]:
    """A number column as floats (``default`` where null or absent); integers and floats only, finite."""
    n = table.num_rows
    if name not in table.column_names:
        return np.full(n, default)
    column = table.column(name)
    if pa.types.is_null(column.type):
        return np.full(n, default)
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        raise _NotClean(name)
    if pa.types.is_uint64(column.type) or pa.types.is_int64(column.type):
        # float(value) of an integer beyond 2**53 rounds as numpy's cast does, but keep to the plain case
        bounds = pc.min_max(column)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is not None and (low < -(1 << 53) or high > (1 << 53)):
            raise _NotClean(name)
    floats = column.cast(pa.float64())
    if pc.all(pc.is_finite(floats)).as_py() not in (True, None):  # nulls are skipped; all null: None
        raise _NotClean(name)
    values = np.asarray(floats.fill_null(default).to_numpy(zero_copy_only=False))
    return np.asarray(values, dtype=np.float64)


def _flag_column(table: pa.RecordBatch | pa.Table, name: str) -> tuple[_Objects, pa.Array]:
    """A true/false column (booleans only): the values (None where null) and their JSON texts."""
    n = table.num_rows
    if name not in table.column_names or pa.types.is_null(table.column(name).type):
        return np.full(n, None, dtype=object), pa.array(["null"] * n, pa.string())
    column = table.column(name)
    if not pa.types.is_boolean(column.type):
        raise _NotClean(name)
    codes = np.asarray(pc.if_else(column, 1, 0).fill_null(2).to_numpy(zero_copy_only=False), dtype=np.int64)
    objects = np.array([False, True, None], dtype=object)
    return objects[codes], pa.array(["false", "true", "null"], pa.string()).take(pa.array(codes))


def _turn_column(table: pa.RecordBatch | pa.Table) -> tuple[_Objects, pa.Array]:
    """``turn``: integers only (a float or a flag is refused by the careful path)."""
    n = table.num_rows
    if "turn" not in table.column_names or pa.types.is_null(table.column("turn").type):
        return np.full(n, None, dtype=object), pa.array(["null"] * n, pa.string())
    column = table.column("turn")
    if not pa.types.is_integer(column.type) or pa.types.is_uint64(column.type):
        raise _NotClean("turn")
    raw, codes = _coded(column)
    objects = np.empty(len(raw) + 1, dtype=object)
    objects[:] = [*raw, None]
    texts = pa.array([*(str(v) for v in raw), "null"], pa.string())
    return objects[codes], texts.take(pa.array(codes))


_NOWHERE: Any = "<batch>"


def clean_batch(table: pa.RecordBatch | pa.Table, *, text_cells: bool = False) -> CleanBatch | None:
    """The battles of ``table`` checked as columns, or None when the
    batch needs the careful path: a missing or bad value, a value of another type than the careful path
    reads as such, conversations, or a self-battle (refused or filtered there, with its row named).

    ``text_cells``: the table holds a CSV file's cells, all text; its numbers and flags are converted
    as the careful path converts them (:func:`_converted_cells`)."""
    names = table.column_names
    if any(c in names for c in _CONVERSATIONS) or not all(
        c in names for c in ("model_a", "model_b", "winner")
    ):
        return None
    try:
        if text_cells:
            table = _converted_cells(table)
        model_a, json_a = _text_column(table, "model_a", _field("model_a", "model", required=True))
        model_b, json_b = _text_column(table, "model_b", _field("model_b", "model", required=True))
        winner, json_winner = _text_column(table, "winner", _winner)
        question_id, json_qid = _text_column(
            table, "question_id", _field("question_id", "identifier"), numbered=True
        )
        judge, json_judge = _text_column(table, "judge", _field("judge", "string"))
        language, json_language = _text_column(table, "language", _field("language", "string", max_length=50))
        turn, json_turn = _turn_column(table)
        anony, json_anony = _flag_column(table, "anony")
        sided_objects, _ = _flag_column(table, "sided")
        tstamp = _number_column(table, "tstamp", np.nan)
        weight = _number_column(table, "weight", 1.0)
    except (_NotClean, pa.ArrowException):  # pyarrow cannot take the column as it is: row by row
        return None
    present = ~np.isnan(tstamp)
    if np.any((tstamp[present] < 0.0) | (tstamp[present] > TSTAMP_MAX)) or np.any(weight <= 0.0):
        return None
    sided = np.asarray(sided_objects != False, dtype=bool)  # noqa: E712 (None: sided, as the default)
    return CleanBatch(
        model_a=model_a,
        model_b=model_b,
        winner=winner,
        question_id=question_id,
        judge=judge,
        turn=turn,
        anony=anony,
        language=language,
        tstamp=tstamp,
        weight=weight,
        sided=sided,
        json_question_id=json_qid,
        json_model_a=json_a,
        json_model_b=json_b,
        json_winner=json_winner,
        json_judge=json_judge,
        json_turn=json_turn,
        json_anony=json_anony,
        json_language=json_language,
    )


def _winner(value: Any) -> str:
    if value not in _WINNERS:
        raise InputError(_NOWHERE, None, "unknown winner")
    return str(value)


def _float_texts(values: npt.NDArray[np.float64]) -> list[str]:
    """Each float as JSON writes it (Python's shortest repr), NaN (no value) as null."""
    out = [repr(v) for v in values.tolist()]
    for i in np.flatnonzero(np.isnan(values)).tolist():
        out[i] = "null"
    return out


def clean_digests(batch: CleanBatch) -> list[str]:
    """:func:`votes.imports.staging.row_digest` of each battle: the sha256 of its canonical JSON line
    (:meth:`BattleRecord.row`), assembled from each column's JSON texts in one pass by pyarrow."""
    n = len(batch)
    if n == 0:
        return []
    tstamp = pa.array(_float_texts(batch.tstamp), pa.string())
    weighted = batch.weight != 1.0
    weight_texts = np.full(n, "", dtype=object)
    if weighted.any():
        weight_texts[weighted] = [', "weight": ' + t for t in _float_texts(batch.weight[weighted])]
    sided_texts = np.where(batch.sided, "", ', "sided": false').astype(object)
    lines = pc.binary_join_element_wise(
        '{"question_id": ',
        batch.json_question_id,
        ', "model_a": ',
        batch.json_model_a,
        ', "model_b": ',
        batch.json_model_b,
        ', "winner": ',
        batch.json_winner,
        ', "judge": ',
        batch.json_judge,
        ', "conversation_a": null, "conversation_b": null, "turn": ',
        batch.json_turn,
        ', "anony": ',
        batch.json_anony,
        ', "language": ',
        batch.json_language,
        ', "tstamp": ',
        tstamp,
        pa.array(weight_texts, pa.string()),
        pa.array(sided_texts, pa.string()),
        "}",
        "",
    )
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset : lines.offset + n + 1]
    data = memoryview(lines.buffers()[2])
    sha = hashlib.sha256
    bounds = offsets.tolist()
    return [sha(data[bounds[i] : bounds[i + 1]]).hexdigest()[:40] for i in range(n)]


def iso_times(tstamp: npt.NDArray[np.float64], now: datetime) -> list[str]:
    """Each battle's time as the store keeps it (naive UTC ISO text with microseconds), as
    ``datetime.fromtimestamp(t, UTC)`` rounds it (to the nearest microsecond, half to even); ``now``
    where a battle has none."""
    present = ~np.isnan(tstamp)
    whole = np.floor(np.where(present, tstamp, 0.0))
    micros = np.rint((np.where(present, tstamp, 0.0) - whole) * 1e6)
    carry = micros >= 1_000_000
    whole[carry] += 1.0
    micros[carry] -= 1_000_000
    moments = whole.astype("datetime64[s]").astype("datetime64[us]") + micros.astype("timedelta64[us]")
    texts = np.datetime_as_string(moments, unit="us").astype(object)
    out = [t.replace("T", " ") for t in texts.tolist()]
    if not present.all():
        stamp = now.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
        for i in np.flatnonzero(~present).tolist():
            out[i] = stamp
    return out


def rows_table(rows: Sequence[tuple[str, Mapping[str, Any]]]) -> pa.Table | None:
    """Rows read from JSON (typed values) or CSV (text) as an Arrow table for :func:`clean_batch`, or
    None when pyarrow cannot hold them as columns (a column mixing text and numbers, a lone surrogate, an
    integer beyond 64 bits): the careful path then reads them, and names the row when one is bad."""
    names: dict[str, None] = {}  # every row's keys (a table built from rows would take the first row's)
    for _, row in rows:
        names.update(dict.fromkeys(row))
    if any(c in names for c in _CONVERSATIONS):
        return None
    try:
        return pa.table({name: pa.array([row.get(name) for _, row in rows]) for name in names})
    except (pa.ArrowException, ValueError, TypeError, OverflowError, UnicodeError):
        return None
