"""Battles files read as columns: the fast path for fitting a million votes offline.

:mod:`votes.records` validates every field of every row (conversations included), which is right for an
import but costs tens of seconds on a million battles when a fit needs only ``model_a``, ``model_b`` and
``winner`` (plus ``language``, ``tstamp``, ``anony``, ``judge`` for filters and ``weight``/``sided``).
Here pyarrow parses just those columns; the values are then checked as a whole (winner strings) and
selected by :mod:`votes.selection`. A file pyarrow cannot read this way (a JSON array, irregular rows),
a file of another shape (:mod:`votes.formats`), or one with a bad value goes through :mod:`votes.records`
instead, which also gives the row-precise error messages.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from leaderboard.battles import Battles
from votes.battle_rows import SELF_BATTLE, parse_battles
from votes.formats import SourceFormat, detect_source_format, map_source_rows
from votes.records import (
    NAME_MAX,
    TSTAMP_MAX,
    InputError,
    Refusal,
    detect_format,
    read_input_bytes,
    read_rows,
)
from votes.selection import BattleColumns, BattleFilter, record_columns, select_battles

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
    source_format : the shape the rows were read as (see :mod:`votes.formats`)
    note : how that shape was mapped to battles
    refused : rows left out, with their location and reason (only with ``skip_invalid``)
    """

    battles: Battles
    digest: str
    n_rows: int
    source_format: SourceFormat
    note: str
    refused: tuple[Refusal, ...] = ()


def _arrow_table(path: Path, data: bytes) -> pa.Table | None:
    fmt = detect_format(path, data)
    if fmt == "parquet":
        schema = pq.read_schema(io.BytesIO(data))
        wanted = [c for c in (*_NEEDED, *_OPTIONAL) if c in schema.names]
        # text columns stay coded as Parquet stores them: a million names are never spelled out
        coded = [c for c in wanted if pa.types.is_string(schema.field(c).type)]
        return pq.read_table(io.BytesIO(data), columns=wanted, read_dictionary=coded)
    if fmt == "jsonl":
        try:
            options = pa_json.ParseOptions(explicit_schema=_SCHEMA, unexpected_field_behavior="ignore")
            return pa_json.read_json(io.BytesIO(data), parse_options=options)
        except pa.ArrowInvalid:  # numbered question ids (or a bad file: the second read fails too)
            options = pa_json.ParseOptions(
                explicit_schema=_SCHEMA_NUMBERED, unexpected_field_behavior="ignore"
            )
            return pa_json.read_json(io.BytesIO(data), parse_options=options)
    if fmt == "csv":
        header = data[: data.find(b"\n")].decode("utf-8-sig")
        names = {c.strip().strip('"') for c in header.strip().split(",")}
        wanted = [c for c in (*_NEEDED, *_OPTIONAL) if c in names]
        convert = pa_csv.ConvertOptions(
            include_columns=wanted,
            column_types={c: _SCHEMA.field(c).type for c in wanted},
            strings_can_be_null=True,
        )
        return pa_csv.read_csv(io.BytesIO(data), convert_options=convert)
    return None


def _shared_objects(column: pa.ChunkedArray) -> npt.NDArray[np.object_]:
    """``column`` as an object array whose equal values are one Python object: coded in Arrow, then each
    distinct value made once and the rows pointing to it. A million battles name a hundred models, so
    this holds a hundred strings instead of a million (hundreds of MB less, and faster to hash)."""
    whole = column.combine_chunks()
    coded = whole if pa.types.is_dictionary(whole.type) else pc.dictionary_encode(whole)
    values = np.empty(len(coded.dictionary) + 1, dtype=object)  # the last one stands for a null
    values[:-1] = coded.dictionary.to_pylist()
    codes = coded.indices.fill_null(len(coded.dictionary)).to_numpy(zero_copy_only=False)
    out: npt.NDArray[np.object_] = values[codes]
    return out


def _table_columns(table: pa.Table) -> BattleColumns:
    n = table.num_rows

    def column(name: str) -> npt.NDArray[np.object_]:
        if name not in table.column_names:
            return np.full(n, None, dtype=object)
        return _shared_objects(table.column(name))

    def number(name: str, fill: float) -> npt.NDArray[np.float64]:
        if name not in table.column_names:
            return np.full(n, fill)
        values = table.column(name).cast(pa.float64()).fill_null(fill)
        return np.asarray(values.to_numpy(), dtype=np.float64)

    question_id = np.full(n, None, dtype=object)
    if "question_id" in table.column_names:
        ids = table.column("question_id")
        as_text = pa.types.is_string(ids.type) or pa.types.is_dictionary(ids.type)  # coded text
        text = ids if as_text else ids.cast(pa.string())
        question_id = _shared_objects(text)
        question_id[question_id == ""] = None  # an empty id names no prompt, as on the careful path
    if "sided" in table.column_names:
        sided = np.asarray(table.column("sided").fill_null(True).to_numpy(zero_copy_only=False), dtype=bool)
    else:
        sided = np.ones(n, dtype=bool)
    return BattleColumns(
        model_a=column("model_a"),
        model_b=column("model_b"),
        winner=column("winner"),
        language=column("language"),
        tstamp=number("tstamp", np.nan),
        anony=column("anony"),
        judge=column("judge"),
        weight=number("weight", 1.0),
        sided=sided,
        question_id=question_id,
    )


#: The text columns the fast path uses, with the longest value :mod:`votes.battle_rows` accepts.
_TEXT_LIMITS = {
    "model_a": NAME_MAX,
    "model_b": NAME_MAX,
    "winner": NAME_MAX,
    "judge": NAME_MAX,
    "language": 50,
    "question_id": NAME_MAX,
}


def _strings_pass(table: pa.Table) -> bool:
    """The checks of :class:`votes.records.RowFields` on the text columns, as whole columns: strings, no
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


def _fast(path: Path, data: bytes, filters: BattleFilter) -> BattleRead | None:
    """The columnar read of a Chatbot Arena file; None when the file needs the careful path."""
    try:
        table = _arrow_table(path, data)
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        return None
    if table is None or not all(c in table.column_names for c in _NEEDED):
        return None
    if any(table.column(c).null_count == table.num_rows for c in _NEEDED):
        return None  # JSONL read with a schema lists absent columns as all-null: another shape
    if not _strings_pass(table):
        return None  # the careful path names the row
    cols = _table_columns(table)
    if np.any(cols.weight <= 0) or not np.all(np.isfinite(cols.weight)):
        return None  # the careful path names the row
    if np.any((cols.tstamp < 0.0) | (cols.tstamp > TSTAMP_MAX)):
        return None  # the careful path names the row
    battles, self_battles = select_battles(cols, filters)
    if self_battles.size:
        return None  # the careful path names the row
    digest = hashlib.sha256(data).hexdigest()
    note = "Chatbot Arena battles read as they are (model_a shown on the left)"
    return BattleRead(battles, digest, table.num_rows, "clean-battle", note)


def read_battles(
    path: Path | str,
    *,
    filters: BattleFilter | None = None,
    source_format: SourceFormat | None = None,
    skip_invalid: bool = False,
    baseline: str | None = None,
    max_expanded: int | None = None,
) -> BattleRead:
    """Read a battles file of any known shape (see :mod:`votes.formats`) and select from it.

    A Chatbot Arena file goes through pyarrow's column readers (the fast path); other shapes, and any
    file whose columns pyarrow cannot read, through row-by-row validation with row-precise messages.

    ``digest`` is the sha256 of the (decompressed) file, what ``sha256sum`` (or ``zcat | sha256sum``)
    prints; for a JSONL export of Arena's votes it equals the database's
    :func:`votes.queries.votes_sha256`, for the vote ledger (``arena export ledger``) the
    :func:`votes.ledger.ledger_sha256` a published snapshot records. (Before, a CSV or Parquet file's
    digest was that of its rows in canonical JSONL form, which took re-serialising every row in Python.)

    Parameters
    ----------
    path : the file (JSONL, JSON, CSV or Parquet, gzipped or not)
    filters : which battles to keep (all by default)
    source_format : the shape; detected from the columns when None
    skip_invalid : leave out bad rows (listed in ``refused``) instead of refusing the file
    baseline : arena-hard judgments without a ``baseline`` column: the baseline model
    max_expanded : most bytes a gzipped file may expand to (:func:`votes.records.read_input_bytes`)

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
    data = read_input_bytes(path, max_expanded)
    if source_format in (None, "clean-battle") and not skip_invalid:
        try:
            fast = _fast(path, data, filters)
        except ValueError:
            fast = None  # a bad value (a winner, say): the careful path names its row
        if fast is not None:
            return fast
    # The careful path: row-by-row validation with messages that name the bad row.
    fmt, rows = read_rows(path, max_expanded=max_expanded)
    shape = source_format or detect_source_format(rows)
    refused: list[Refusal] | None = [] if skip_invalid else None
    if shape == "clean-battle":
        mapped_rows, note = rows, ""
    else:
        mapped = map_source_rows(path, rows, shape, baseline=baseline)
        if mapped.refused and refused is None:
            first = mapped.refused[0]
            raise InputError(path, first.where, first.reason)
        if refused is not None:
            refused.extend(mapped.refused)
        mapped_rows, note, shape = mapped.rows, mapped.note, mapped.source_format
    # mapped rows hold JSON values, not CSV text cells
    row_fmt = fmt if shape == "clean-battle" else "jsonl"
    records = parse_battles(path, row_fmt, mapped_rows, refused=refused, allow_self_battles=True)
    try:
        battles, self_battles = select_battles(record_columns(records), filters)
    except ValueError as exc:
        raise InputError(path, None, str(exc)) from None
    for i in self_battles:
        rec = records[int(i)]
        reason = f"model {rec.model_a!r} {SELF_BATTLE}"
        if refused is None:
            raise InputError(path, rec.where, reason)
        refused.append(Refusal(rec.where, reason))
    if shape == "clean-battle":
        note = "Chatbot Arena battles read as they are (model_a shown on the left)"
    digest = hashlib.sha256(data).hexdigest()
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
    if not np.isin(out["winner"], ["model_a", "model_b", "tie", "tie (bothbad)"]).all():
        return None
    if (out["model_a"] == out["model_b"]).any():
        return None
    return out
