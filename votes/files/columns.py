"""Battles files read as columns: the fast path for fitting a million votes offline.

:mod:`votes.files.records` validates every field of every row (conversations included), which is right for an
import but costs tens of seconds on a million battles when a fit needs only ``model_a``, ``model_b`` and
``winner`` (plus ``language``, ``tstamp``, ``anony``, ``judge`` for filters and ``weight``/``sided``).
Here pyarrow parses just those columns a record batch at a time (a Parquet row group, a block of JSONL or
CSV), and each batch is checked and reduced at once to integer codes against the column's distinct values
(:class:`votes.files.selection.CodedColumn`) and float arrays, then selected by :mod:`votes.files.selection`:
ten million votes hold a few hundred MB, never the file, an Arrow table and an object per value at once. The
file's sha256 is hashed in a pass of its own, a chunk at a time. A file pyarrow cannot read this way (a
JSON array, irregular rows), a file of another shape (:mod:`votes.files.formats`), or one with a bad value
goes through :mod:`votes.files.records` instead, which also gives the row-precise error messages.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from leaderboard.battles import Battles
from leaderboard.data import OUTCOME_STRINGS
from votes.files.battle_rows import SELF_BATTLE, parse_battles
from votes.files.formats import (
    CLEAN_BATTLE,
    SOURCE_FORMATS,
    SourceFormat,
    detect_source_format,
    map_source_rows,
)
from votes.files.reading import detect_format, input_chunks, input_sha256, read_input_bytes, read_rows
from votes.files.records import NAME_MAX, TSTAMP_MAX, InputError, Refusal, RowError
from votes.files.selection import BattleColumns, BattleFilter, CodedColumn, record_columns, select_battles

__all__ = ["BattleRead", "read_agreement_columns", "read_battle_columns", "read_battles"]

_NEEDED = ("model_a", "model_b", "winner")
_OPTIONAL = ("language", "tstamp", "anony", "judge", "weight", "sided", "question_id")
_SCHEMA = pa.schema(
    [
        ("model_a", pa.string()),
        ("model_b", pa.string()),
        ("winner", pa.string()),
        ("language", pa.string()),
        ("tstamp", pa.float64()),
        ("anony", pa.bool_()),
        ("judge", pa.string()),
        ("weight", pa.float64()),
        ("sided", pa.bool_()),
        ("question_id", pa.string()),
    ]
)
#: ``question_id`` is text in Chatbot Arena files and a number in MT-bench's: a JSONL file whose ids are
#: numbers is read again with this schema (the ids become text either way).
_SCHEMA_NUMBERED = _SCHEMA.set(_SCHEMA.get_field_index("question_id"), pa.field("question_id", pa.int64()))


@dataclass(frozen=True)
class BattleRead:
    """What a battles file gave: the selected battles and how they were found.

    Attributes
    ----------
    battles : the battles the filter kept (self-battles left out, see ``refused``)
    digest : sha256 of the votes (see :func:`read_battles`)
    n_rows : rows in the file
    source_format : the shape the rows were read as (see :mod:`votes.files.formats`)
    note : how that shape was mapped to battles
    refused : rows left out, with their location and reason (only with ``skip_invalid``)
    """

    battles: Battles
    digest: str
    n_rows: int
    source_format: SourceFormat
    note: str
    refused: tuple[Refusal, ...] = ()


#: Rows per record batch (and bytes per JSON/CSV block): large enough that the per-batch work on each
#: batch's distinct values is nothing, small enough that a batch's Arrow memory is a few tens of MB.
_BATCH_ROWS = 1 << 20
_BLOCK_BYTES = 1 << 24
_THREADS = True  # as pyarrow reads by default: its decoding spread over the cores


def _record_batches(
    path: Path, head: bytes, schema: pa.Schema, max_expanded: int | None
) -> Iterator[pa.RecordBatch] | None:
    """The needed columns of ``path`` one record batch at a time, as pyarrow parses them; None for a
    format this path does not read (a JSON array). A plain file is read from disk as it is parsed, never
    whole in memory; a gzipped JSONL or CSV file is decompressed as a stream (its expanded size was
    bounded when it was hashed); a gzipped Parquet file, which needs random access, is gunzipped whole."""
    fmt = detect_format(path, head)
    gzipped = _gzipped(path)
    if fmt == "parquet":
        source: Any = pa.BufferReader(read_input_bytes(path, max_expanded)) if gzipped else str(path)
        parquet = pq.ParquetFile(source)
        names = parquet.schema_arrow.names
        wanted = [c for c in (*_NEEDED, *_OPTIONAL) if c in names]
        # text columns stay coded as Parquet stores them: ten million names are never spelled out
        coded = [c for c in wanted if pa.types.is_string(parquet.schema_arrow.field(c).type)]
        parquet = pq.ParquetFile(source, read_dictionary=coded)
        batches: Iterator[pa.RecordBatch] = parquet.iter_batches(
            batch_size=_BATCH_ROWS, columns=wanted, use_threads=_THREADS
        )
        return batches
    stream = pa.input_stream(str(path), compression="gzip" if gzipped else None)
    if fmt == "jsonl":
        read = pa_json.ReadOptions(block_size=_BLOCK_BYTES, use_threads=_THREADS)
        options = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        lines: Iterator[pa.RecordBatch] = iter(
            pa_json.open_json(stream, read_options=read, parse_options=options)
        )
        return lines
    if fmt == "csv":
        if b"\n" not in head:
            return None  # a header alone, or one longer than a chunk: the careful path decides
        header = head[: head.find(b"\n")].decode("utf-8-sig")
        names = {c.strip().strip('"') for c in header.strip().split(",")}
        wanted = [c for c in (*_NEEDED, *_OPTIONAL) if c in names]
        convert = pa_csv.ConvertOptions(
            include_columns=wanted,
            column_types={c: _SCHEMA.field(c).type for c in wanted},
            strings_can_be_null=True,
        )
        read_csv = pa_csv.ReadOptions(block_size=_BLOCK_BYTES, use_threads=_THREADS)
        rows: Iterator[pa.RecordBatch] = iter(
            pa_csv.open_csv(stream, read_options=read_csv, convert_options=convert)
        )
        return rows
    stream.close()
    return None


def _gzipped(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


class _Coder:
    """Codes a text (or flag) column batch by batch against one growing list of distinct values: each
    batch's own dictionary (Parquet's, or one Arrow makes) is mapped once, then its rows by index."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}

    def _code(self, value: Any) -> int:
        return self.index.setdefault(value, len(self.index))

    def codes(self, array: pa.Array) -> npt.NDArray[np.integer[Any]]:
        if pa.types.is_null(array.type):
            return np.full(len(array), self._code(None), dtype=self._width())
        coded = array if pa.types.is_dictionary(array.type) else pc.dictionary_encode(array)
        lookup = [self._code(v) for v in coded.dictionary.to_pylist()]
        lookup.append(self._code(None) if coded.null_count else -1)  # where a null row points
        indices = coded.indices if not coded.indices.null_count else coded.indices.fill_null(len(lookup) - 1)
        rows = indices.to_numpy(zero_copy_only=False)
        out: npt.NDArray[np.integer[Any]] = np.asarray(lookup, dtype=self._width())[rows]
        return out

    def _width(self) -> type[np.integer[Any]]:
        """The narrowest codes for the values so far (a hundred models: one byte a battle); batches coded
        narrower before more values came are widened when joined."""
        known = len(self.index)
        return np.int8 if known <= 127 else np.int16 if known <= 32_767 else np.int32

    def values(self) -> npt.NDArray[np.object_]:
        out = np.empty(len(self.index), dtype=object)
        out[:] = list(self.index)  # in code order: a dict keeps the order of insertion
        return out


def _joined(parts: list[npt.NDArray[Any]]) -> npt.NDArray[Any]:
    """The parts as one array, the list emptied as it goes (a lone part is not copied)."""
    out = parts[0] if len(parts) == 1 else np.concatenate(parts)
    parts.clear()
    return out


def _coded(coder: _Coder, parts: list[npt.NDArray[np.integer[Any]]], n: int) -> CodedColumn:
    """A column from its batches' codes; one the file lacks, or has empty throughout, holds no code per
    battle (:meth:`CodedColumn.missing`)."""
    values = coder.values()
    if not parts or (len(values) == 1 and values[0] is None):
        return CodedColumn.missing(n)
    return CodedColumn(_joined(parts), values)


def _number(array: pa.Array, fill: float) -> npt.NDArray[np.float64]:
    numbers = array.cast(pa.float64())
    if numbers.null_count:  # filling copies the column: only where there is something to fill
        numbers = numbers.fill_null(fill)
    return np.asarray(numbers.to_numpy(zero_copy_only=False), np.float64)


def _reduce(batches: Iterator[pa.RecordBatch]) -> BattleColumns | None:
    """The record batches reduced to battle columns as they come (codes and numbers; each batch's Arrow
    memory freed before the next is read); None at the first batch that needs the careful path."""
    coders = {name: _Coder() for name in ("model", "winner", "language", "anony", "judge", "question_id")}
    coder_of = {"model_a": "model", "model_b": "model"}  # one list of names for both sides
    parts: dict[str, list[npt.NDArray[Any]]] = {name: [] for name in (*_NEEDED, *_OPTIONAL)}
    n = 0
    for batch in batches:
        names = batch.schema.names
        if not all(c in names for c in _NEEDED) or any(batch.column(c).null_count for c in _NEEDED):
            return None  # a missing name or winner (or a JSONL file of another shape): the careful path
        if not _strings_pass(pa.Table.from_batches([batch])):
            return None  # the careful path names the row
        for name in names:
            column = batch.column(name)
            values: npt.NDArray[Any]
            if name == "tstamp":
                values = _number(column, np.nan)
                if np.any((values < 0.0) | (values > TSTAMP_MAX)):
                    return None  # the careful path names the row
            elif name == "weight":
                values = _number(column, 1.0)
                if np.any(values <= 0) or not np.all(np.isfinite(values)):
                    return None  # the careful path names the row
            elif name == "sided":
                values = np.asarray(column.fill_null(True).to_numpy(zero_copy_only=False), dtype=bool)
            else:
                if name == "question_id" and not (
                    pa.types.is_string(column.type) or pa.types.is_dictionary(column.type)
                ):
                    column = column.cast(pa.string())  # numbered ids become text
                values = coders[coder_of.get(name, name)].codes(column)
            parts[name].append(values)
        n += batch.num_rows
    models = coders["model"].values()
    questions = _coded(coders["question_id"], parts["question_id"], n)
    questions.values[questions.values == ""] = None  # an empty id names no prompt, as on the careful path

    def numbers(name: str, fill: float | bool, dtype: type[np.generic]) -> npt.NDArray[Any]:
        if not parts[name]:  # not in the file: one broadcast value, no number per battle
            return np.broadcast_to(np.asarray(fill, dtype=dtype), (n,))
        return _joined(parts[name])

    return BattleColumns(
        model_a=CodedColumn(_joined(parts["model_a"]), models),
        model_b=CodedColumn(_joined(parts["model_b"]), models),
        winner=_coded(coders["winner"], parts["winner"], n),
        language=_coded(coders["language"], parts["language"], n),
        tstamp=numbers("tstamp", np.nan, np.float64),
        anony=_coded(coders["anony"], parts["anony"], n),
        judge=_coded(coders["judge"], parts["judge"], n),
        weight=numbers("weight", 1.0, np.float64),
        sided=numbers("sided", True, np.bool_),
        question_id=questions,
    )


#: The text columns the fast path uses, with the longest value :mod:`votes.files.battle_rows` accepts.
_TEXT_LIMITS = {
    "model_a": NAME_MAX,
    "model_b": NAME_MAX,
    "winner": NAME_MAX,
    "judge": NAME_MAX,
    "language": 50,
    "question_id": NAME_MAX,
}


def _strings_pass(table: pa.Table) -> bool:
    """The checks of :class:`votes.files.fields.RowFields` on the text columns, as whole columns: strings, no
    empty required name, none too long, no NUL."""
    for name, limit in _TEXT_LIMITS.items():
        if name not in table.column_names:
            continue
        column = table.column(name)
        if pa.types.is_dictionary(column.type):  # a Parquet text column: check each distinct value once
            column = pa.chunked_array([chunk.dictionary for chunk in column.chunks], column.type.value_type)
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            if pa.types.is_null(column.type) and name not in _NEEDED:
                continue
            if name == "question_id" and pa.types.is_integer(column.type):
                continue  # a numbered id, as the careful path reads it
            return False
        too_long = pc.any(pc.greater(pc.utf8_length(column), limit)).as_py()
        nul = pc.any(pc.match_substring(column, "\x00")).as_py()
        empty = name in _NEEDED and pc.any(pc.equal(column, "")).as_py()
        if too_long or nul or empty:
            return False
    return True


def _fast(
    path: Path, digest: str, filters: BattleFilter, max_expanded: int | None = None
) -> BattleRead | None:
    """The columnar read of a Chatbot Arena file, batch by batch; None when the file needs the careful
    path (which names a bad row). ``digest`` is the file's, for the result."""
    with closing(input_chunks(path, max_expanded)) as chunks:  # the first chunk only, the file closed
        head = next(chunks, b"")
    cols = None
    for schema in (_SCHEMA, _SCHEMA_NUMBERED):
        try:
            batches = _record_batches(path, head, schema, max_expanded)
            if batches is None:
                return None
            cols = _reduce(batches)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, UnicodeDecodeError):
            # JSONL with numbered question ids is read again with them as numbers; any other file (or a
            # bad one, which fails again) goes to the careful path
            if detect_format(path, head) != "jsonl":
                return None
            continue
        break
    if cols is None:
        return None
    battles, self_battles = select_battles(cols, filters)
    if self_battles.size:
        return None  # the careful path names the row
    return BattleRead(battles, digest, len(cols), CLEAN_BATTLE, SOURCE_FORMATS[CLEAN_BATTLE].note)


def _identity(path: Path) -> tuple[int, int, int, int]:
    """What changes when a file is rewritten: its digest and its columns are read in separate passes."""
    st = path.stat()
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _unchanged(path: Path, before: tuple[int, int, int, int]) -> None:
    if _identity(path) != before:
        raise InputError(path, None, "changed while it was being read; read it again")


def read_battles(
    path: Path | str,
    *,
    filters: BattleFilter | None = None,
    source_format: SourceFormat | None = None,
    skip_invalid: bool = False,
    baseline: str | None = None,
    max_expanded: int | None = None,
) -> BattleRead:
    """Read a battles file of any known shape (see :mod:`votes.files.formats`) and select from it.

    A Chatbot Arena file goes through pyarrow's column readers (the fast path); other shapes, and any
    file whose columns pyarrow cannot read, through row-by-row validation with row-precise messages.

    ``digest`` is the sha256 of the (decompressed) file, what ``sha256sum`` (or ``zcat | sha256sum``)
    prints; for a JSONL export of Arena's votes it equals the database's
    :func:`votes.reads.exports.votes_sha256`, for the vote ledger (``arena export ledger``) the
    :func:`votes.reads.ledger.ledger_sha256` a published snapshot records. (Before, a CSV or Parquet file's
    digest was that of its rows in canonical JSONL form, which took re-serialising every row in Python.)

    Parameters
    ----------
    path : the file (JSONL, JSON, CSV or Parquet, gzipped or not)
    filters : which battles to keep (all by default)
    source_format : the shape; detected from the columns when None
    skip_invalid : leave out bad rows (listed in ``refused``) instead of refusing the file
    baseline : arena-hard judgments without a ``baseline`` column: the baseline model
    max_expanded : most bytes a gzipped file may expand to (:func:`votes.files.reading.read_input_bytes`)

    Raises
    ------
    InputError
        If the file is missing or unreadable, of no known shape, or (without ``skip_invalid``) has a bad
        row, a selected self-battle included; the message names the file, the row and the reason.
    """
    path = Path(path)
    filters = filters or BattleFilter()
    if not path.is_file():
        raise InputError(path, None, "no such file")
    before = _identity(path)
    digest = input_sha256(path, max_expanded)  # streamed: a file of gigabytes is never whole in memory
    if source_format in (None, CLEAN_BATTLE) and not skip_invalid:
        try:
            fast = _fast(path, digest, filters, max_expanded)
        except ValueError:
            fast = None  # a bad value (a winner, say): the careful path names its row
        if fast is not None:
            _unchanged(path, before)
            return fast
    # The careful path: row-by-row validation with messages that name the bad row.
    fmt, rows = read_rows(path, max_expanded=max_expanded)
    shape = source_format or detect_source_format(rows)
    refused: list[Refusal] | None = [] if skip_invalid else None
    if shape == CLEAN_BATTLE:
        mapped_rows, note = rows, ""
    else:
        mapped = map_source_rows(path, rows, shape, baseline=baseline)
        if mapped.refused and refused is None:
            raise RowError.of(path, mapped.refused[0])
        if refused is not None:
            refused.extend(mapped.refused)
        mapped_rows, note, shape = mapped.rows, mapped.note, mapped.source_format
    # mapped rows hold JSON values, not CSV text cells
    row_fmt = fmt if shape == CLEAN_BATTLE else "jsonl"
    records = parse_battles(path, row_fmt, mapped_rows, refused=refused, allow_self_battles=True)
    try:
        battles, self_battles = select_battles(record_columns(records), filters)
    except ValueError as exc:
        raise InputError(path, None, str(exc)) from None
    for i in self_battles:
        rec = records[int(i)]
        reason = f"model {rec.model_a!r} {SELF_BATTLE}"
        if refused is None:
            raise RowError(path, rec.where, reason)
        refused.append(Refusal(rec.where, reason))
    if shape == CLEAN_BATTLE:
        note = SOURCE_FORMATS[CLEAN_BATTLE].note
    _unchanged(path, before)
    return BattleRead(battles, digest, len(rows), shape, note, tuple(refused or ()))


def read_battle_columns(
    path: Path | str,
    *,
    language: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> tuple[Battles, str, int]:
    """:func:`read_battles` of a Chatbot Arena file by language and time: (battles, sha256, rows)."""
    read = read_battles(path, filters=BattleFilter(language=language, since=since, until=until))
    return read.battles, read.digest, read.n_rows


#: Columns :func:`read_agreement_columns` reads (besides the three needed ones).
_AGREEMENT = ("question_id", "turn", "judge", "language", "category")


def read_agreement_columns(path: Path | str) -> dict[str, npt.NDArray[np.object_]] | None:
    """The columns an agreement report needs from a Chatbot Arena JSONL or Parquet file without answer
    texts, read by pyarrow (``question_id`` as text, missing optional columns all None); None whenever
    the file needs the careful row-by-row path (another shape or format, texts to measure, a missing id,
    an unknown winner, a self-battle), which then names the bad row."""
    path = Path(path)
    data = read_input_bytes(path)
    fmt = detect_format(path, data)
    try:
        if fmt == "jsonl":
            table = pa_json.read_json(io.BytesIO(data))
        elif fmt == "parquet":
            table = pq.read_table(io.BytesIO(data))
        else:
            return None
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, UnicodeDecodeError):
        return None
    names = set(table.column_names)
    if not {"question_id", *_NEEDED} <= names or names & {"conversation_a", "conversation_b"}:
        return None
    out: dict[str, npt.NDArray[np.object_]] = {}
    for name in (*_NEEDED, *_AGREEMENT):
        if name not in names:
            out[name] = np.full(table.num_rows, None, dtype=object)
            continue
        column = table.column(name)
        if name in ("question_id", *_NEEDED, "judge", "language", "category"):
            try:
                column = column.cast(pa.string())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
        out[name] = np.asarray(column.to_numpy(zero_copy_only=False), dtype=object)
    for name in ("question_id", *_NEEDED):
        if any(v is None for v in out[name]):
            return None
    if not np.isin(out["winner"], list(OUTCOME_STRINGS.values())).all():
        return None
    if (out["model_a"] == out["model_b"]).any():
        return None
    return out
