"""Aggregated vote cells as input, for vote logs that outgrow one machine.

A deployment with billions of votes aggregates where its data lives (one ``GROUP BY``, see
``docs/counts.md``) and fits here from the cells: one row per (``model_a``, ``model_b``, ``winner``)
with ``count`` votes, optionally ``weight`` (the summed vote weights, ``count`` when absent), ``weight_sq``
(their summed squares, which intervals need when weights differ within a cell), ``sided``
(false for cells of votes whose display side is unknown) and ``time`` (the start of the cell's time
bucket, seconds since 1970, for ``--half-life``). The fit already works on such cells
(:class:`leaderboard.data.PairCounts`), so the board equals the one fitted from the votes themselves.

The file is read by pyarrow (Parquet, CSV or JSONL, gzipped or not) and checked as whole columns; a
bad cell is named by its row.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from leaderboard.data import OUTCOME_STRINGS, PairCounts, aggregate_codes
from votes.files.reading import detect_format, read_input_bytes
from votes.files.records import TSTAMP_MAX, InputError

__all__ = ["CountsRead", "read_counts"]

_REQUIRED = ("model_a", "model_b", "winner", "count")
_OPTIONAL = ("weight", "weight_sq", "sided", "time")


@dataclass(frozen=True)
class CountsRead:
    """Cells read from a counts file: the counts to fit, the file's sha256 and its number of rows."""

    counts: PairCounts
    digest: str
    n_rows: int


def _table(path: Path, data: bytes) -> pa.Table:
    fmt = detect_format(path, data)
    try:
        if fmt == "parquet":
            return pq.read_table(io.BytesIO(data))
        if fmt == "csv":
            return pa_csv.read_csv(
                io.BytesIO(data), convert_options=pa_csv.ConvertOptions(strings_can_be_null=True)
            )
        if fmt == "jsonl":
            return pa_json.read_json(io.BytesIO(data))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(
            path, None, f"not a readable {fmt} counts file ({str(exc).splitlines()[0]})"
        ) from None
    raise InputError(
        path, None, "a counts file is Parquet, CSV or JSONL (one object per line), not a JSON array"
    )


def _first(path: Path, bad: npt.NDArray[np.bool_], reason: str) -> None:
    """Raise for the first row where ``bad`` holds (rows counted from 1)."""
    where = np.flatnonzero(bad)
    if where.size:
        raise InputError(path, f"row {int(where[0]) + 1}", reason)


def _numbers(path: Path, table: pa.Table, name: str) -> npt.NDArray[np.float64]:
    column = table.column(name)
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        raise InputError(path, None, f"column {name!r} must hold numbers, not {column.type}")
    values = np.asarray(column.cast(pa.float64()).fill_null(np.nan).to_numpy(), dtype=np.float64)
    _first(path, np.isnan(values), f"missing {name!r}")
    return values


def read_counts(
    path: Path | str, *, bucket_seconds: float | None = None, max_expanded: int | None = None
) -> CountsRead:
    """Read and check a counts file (see the module docstring) into :class:`PairCounts`.

    Models are coded in name order and identical cells are summed, as :meth:`Battles.counts` does for
    votes, so the same votes give the same cells by either road. With ``bucket_seconds`` (a fit with a
    half-life) the cells are split by time bucket, which needs the ``time`` column; without, ``time`` is
    not used. ``digest`` is the sha256 of the (decompressed) file.

    Raises
    ------
    InputError
        A missing column, or a row with a missing model or winner, an unknown winner, a model against
        itself, a count that is not a positive whole number, a weight that is not positive, a
        ``weight_sq`` that squares no such weights, or a time out of range; the message names the file,
        the row and the reason.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "no such file")
    data = read_input_bytes(path, max_expanded)
    table = _table(path, data)
    missing = [c for c in _REQUIRED if c not in table.column_names]
    if missing:
        raise InputError(path, None, f"missing column {missing[0]!r} of a counts file")
    n = table.num_rows
    names: dict[str, npt.NDArray[np.object_]] = {}
    for key in ("model_a", "model_b", "winner"):
        column = table.column(key)
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise InputError(path, None, f"column {key!r} must hold strings, not {column.type}")
        values = np.asarray(column.to_numpy(zero_copy_only=False), dtype=object)
        empty = np.asarray(
            pc.fill_null(pc.equal(column, ""), True).to_numpy(zero_copy_only=False), dtype=bool
        )
        _first(path, empty, f"missing {key!r}")
        names[key] = values
    codes = {label: code for code, label in OUTCOME_STRINGS.items()}
    known = np.isin(names["winner"], list(codes))
    if not known.all():
        bad = int(np.flatnonzero(~known)[0])
        allowed = ", ".join(repr(s) for s in codes)
        raise InputError(
            path, f"row {bad + 1}", f"unknown winner {names['winner'][bad]!r}; expected one of {allowed}"
        )
    _first(path, names["model_a"] == names["model_b"], "a model cannot battle itself")
    count = _numbers(path, table, "count")
    _first(
        path,
        (count < 1) | (count != np.floor(count)) | ~np.isfinite(count),
        "'count' must be a whole number of votes, at least 1",
    )
    weight = None
    if "weight" in table.column_names:
        weight = _numbers(path, table, "weight")
        _first(path, ~(weight > 0) | ~np.isfinite(weight), "'weight' must be a positive number")
    squares = _squares(path, table, count, weight)
    time = None
    if bucket_seconds is not None:
        if "time" not in table.column_names:
            raise InputError(
                path, None, "a fit with a half-life needs a 'time' column (each cell's time bucket)"
            )
        time = _numbers(path, table, "time")
        _first(path, (time < 0) | (time > TSTAMP_MAX), "'time' must be seconds since 1970")
    sided = None
    if "sided" in table.column_names:
        column = table.column("sided")
        if not pa.types.is_boolean(column.type):
            raise InputError(path, None, f"column 'sided' must hold true or false, not {column.type}")
        sided = np.asarray(column.fill_null(True).to_numpy(zero_copy_only=False), dtype=bool)
        if sided.all():
            sided = None  # as for votes: no side split when every side is known

    models, inverse = np.unique(
        np.concatenate([names["model_a"], names["model_b"]]).astype(str), return_inverse=True
    )
    model_names = tuple(str(m) for m in models)
    outcome = np.fromiter((codes[w] for w in names["winner"]), dtype=np.int8, count=n)
    ia, ib = inverse[:n].astype(np.int64), inverse[n:].astype(np.int64)

    def cells(values: npt.NDArray[np.float64] | None) -> PairCounts:
        return aggregate_codes(
            ia,
            ib,
            outcome,
            models=model_names,
            weight=values,
            time=time,
            bucket_seconds=bucket_seconds,
            sided=sided,
        )

    by_votes = cells(count)
    votes = by_votes.count
    weighted = weight is not None and not np.array_equal(weight, count)
    spread = squares is not None and not np.array_equal(squares, count)
    counts = PairCounts(
        model_names,
        by_votes.model_a,
        by_votes.model_b,
        by_votes.outcome,
        cells(weight).count if weight is not None and weighted else votes,
        by_votes.time,
        votes if weighted else None,
        by_votes.sided,
        weight_sq=cells(squares).count if squares is not None and (weighted or spread) else None,
    )
    return CountsRead(counts, hashlib.sha256(data).hexdigest(), n)


def _squares(
    path: Path,
    table: pa.Table,
    count: npt.NDArray[np.float64],
    weight: npt.NDArray[np.float64] | None,
) -> npt.NDArray[np.float64] | None:
    """The ``weight_sq`` column, checked against what ``count`` positive weights summing to ``weight``
    can give: between ``weight^2 / count`` (all equal) and ``weight^2`` (one holds it all)."""
    if "weight_sq" not in table.column_names:
        return None
    if weight is None:
        raise InputError(path, None, "a 'weight_sq' column needs the 'weight' column whose squares it sums")
    squares = _numbers(path, table, "weight_sq")
    _first(path, ~(squares > 0) | ~np.isfinite(squares), "'weight_sq' must be a positive number")
    _first(
        path,
        squares < weight**2 / count * (1 - 1e-9),
        "'weight_sq' is below weight^2 / count: not the summed squares of the cell's weights",
    )
    _first(
        path,
        squares > weight**2 * (1 + 1e-9),
        "'weight_sq' exceeds weight^2: not the summed squares of positive weights",
    )
    return squares
