"""Battles files read as columns: the fast path for fitting a million votes offline.

:mod:`votes.records` validates every field of every row (conversations included), which is right for an
import but costs tens of seconds on a million battles when a fit needs only ``model_a``, ``model_b`` and
``winner`` (plus ``language`` and ``tstamp`` for filters). Here pyarrow parses just those columns; the
values are then checked as a whole (winner strings, self-battles) by :func:`leaderboard.data.parse_outcome`
and friends. A file pyarrow cannot read this way (a JSON array, irregular rows) goes through
:mod:`votes.records` instead, which also gives the row-precise error messages.
"""

from __future__ import annotations

import gzip
import hashlib
import io
from datetime import datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from leaderboard.battles import Battles
from leaderboard.data import OUTCOME_STRINGS
from votes.records import InputError, detect_format, parse_battles, read_rows, rows_sha256

__all__ = ["read_battle_columns"]

_NEEDED = ("model_a", "model_b", "winner")
_OPTIONAL = ("language", "tstamp")
_SCHEMA = pa.schema(
    [
        ("model_a", pa.string()),
        ("model_b", pa.string()),
        ("winner", pa.string()),
        ("language", pa.string()),
        ("tstamp", pa.float64()),
    ]
)
_CODES = {label: int(code) for code, label in OUTCOME_STRINGS.items()}


def _select(
    model_a: npt.NDArray[np.object_],
    model_b: npt.NDArray[np.object_],
    winner: npt.NDArray[np.object_],
    language: npt.NDArray[np.object_],
    tstamp: npt.NDArray[np.float64],
    *,
    only_language: str | None,
    since: datetime | None,
    until: datetime | None,
) -> Battles:
    """Battles in ``only_language`` with ``since <= tstamp < until`` (unknown times never match), coded
    against the models they name, sorted by name (as :func:`leaderboard.data.aggregate_battles` does)."""
    keep = np.ones(model_a.shape[0], dtype=bool)
    if only_language is not None:
        keep &= language == only_language
    if since is not None:
        keep &= tstamp >= since.timestamp()
    if until is not None:
        keep &= tstamp < until.timestamp()
    a, b, w, t = model_a[keep], model_b[keep], winner[keep], tstamp[keep]
    codes, names = pd.factorize(np.concatenate([a, b]), sort=True)
    ia, ib = codes[: a.shape[0]], codes[a.shape[0] :]
    if np.any(ia == ib):
        raise ValueError(f"model {names[ia[ia == ib][0]]!r} cannot battle itself")
    outcome = pd.Series(w, dtype=object).map(_CODES)  # NaN for anything but the four strings
    if outcome.isna().any():
        bad = w[outcome.isna().to_numpy()][0]
        raise ValueError(f"unknown winner {bad!r}; expected one of {', '.join(map(repr, _CODES))}")
    models = tuple(str(n) for n in names)
    return Battles(
        models=models, model_a=ia, model_b=ib, outcome=np.asarray(outcome.to_numpy(), dtype=np.int8), time=t
    )


def _bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _arrow_table(path: Path, data: bytes) -> pa.Table | None:
    fmt = detect_format(path, data)
    if fmt == "parquet":
        present = set(pq.read_schema(io.BytesIO(data)).names)
        return pq.read_table(io.BytesIO(data), columns=[c for c in (*_NEEDED, *_OPTIONAL) if c in present])
    if fmt == "jsonl":
        options = pa_json.ParseOptions(explicit_schema=_SCHEMA, unexpected_field_behavior="ignore")
        return pa_json.read_json(io.BytesIO(data), parse_options=options)
    if fmt == "csv":
        header = data[: data.find(b"\n")].decode("utf-8-sig")
        wanted = [c for c in (*_NEEDED, *_OPTIONAL) if c in header]
        convert = pa_csv.ConvertOptions(
            include_columns=wanted,
            column_types={c: _SCHEMA.field(c).type for c in wanted},
            strings_can_be_null=True,
        )
        return pa_csv.read_csv(io.BytesIO(data), convert_options=convert)
    return None


def read_battle_columns(
    path: Path | str,
    *,
    language: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> tuple[Battles, str, int]:
    """Read a Chatbot Arena battles file (JSONL/JSON/CSV/Parquet, gz ok) as columns and select from it.

    Returns the battles in ``language`` with ``since <= tstamp < until`` (all by default), the file's
    ``sha256`` and the number of battles in the file.

    ``sha256`` is that of the (decompressed) file for JSONL, which equals the database's
    :func:`votes.queries.votes_sha256` when the file is an Arena export; for other formats it is the
    sha256 of the rows in canonical export form, computed by :func:`votes.records.rows_sha256`.

    Raises
    ------
    InputError
        If the file is missing, unreadable or lacks ``model_a``, ``model_b`` or ``winner``.
    ValueError
        If a selected battle pits a model against itself or has an unknown winner.
    """

    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "no such file")
    data = _bytes(path)
    try:
        table = _arrow_table(path, data)
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        table = None
    if table is not None and all(c in table.column_names for c in _NEEDED):
        n = table.num_rows

        def column(name: str, fill: object) -> npt.NDArray[np.object_]:
            if name not in table.column_names:
                return np.full(n, fill, dtype=object)
            return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=object)

        if "tstamp" in table.column_names:
            stamps = table.column("tstamp").cast(pa.float64()).fill_null(np.nan)
            tstamp = np.asarray(stamps.to_numpy(), dtype=np.float64)
        else:
            tstamp = np.full(n, np.nan)
        is_jsonl = detect_format(path, data) == "jsonl"
        digest = hashlib.sha256(data).hexdigest() if is_jsonl else None
        if digest is None:
            fmt, rows = read_rows(path)
            digest = rows_sha256(r.row() for r in parse_battles(path, fmt, rows))
        battles = _select(
            column("model_a", None),
            column("model_b", None),
            column("winner", None),
            column("language", None),
            tstamp,
            only_language=language,
            since=since,
            until=until,
        )
        return battles, digest, n
    # The careful path: row-by-row validation with messages that name the bad row.
    fmt, rows = read_rows(path)
    records = parse_battles(path, fmt, rows)
    battles = _select(
        np.asarray([r.model_a for r in records], dtype=object),
        np.asarray([r.model_b for r in records], dtype=object),
        np.asarray([r.winner for r in records], dtype=object),
        np.asarray([r.language for r in records], dtype=object),
        np.asarray([np.nan if r.tstamp is None else r.tstamp for r in records], dtype=np.float64),
        only_language=language,
        since=since,
        until=until,
    )
    return battles, rows_sha256(r.row() for r in records), len(records)
