"""The files of a snapshot: their names, the table, JSON, the matrices' CSV, digests, the zip, freezing.

A snapshot is what people cite and download, so each file is a pure function of what it holds: numbers
rounded once, no timestamps inside the zip, no library versions in the Parquet schema, all written
all or nothing. The folder (:mod:`leaderboard.snapshot.folder`) decides which files a snapshot has; this
module says how each one is spelled on disk and read back.
"""

from __future__ import annotations

import hashlib
import json
import math
import stat
import zipfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from leaderboard.atomic import atomic_file, write_bytes_atomic
from leaderboard.data import PairCounts
from leaderboard.result import Leaderboard
from leaderboard.spreadsheet import escape_frame, unescape_cell

__all__ = [
    "BATTLES_FILE",
    "COLUMNS",
    "CSV_FILE",
    "DATA_FILES",
    "DECIMALS",
    "FIGURE_FORMATS",
    "JSON_FILE",
    "METADATA_FILE",
    "OBSERVED_FILE",
    "PACKAGE",
    "PARQUET_FILE",
    "PREDICTED_FILE",
    "ZIP_FILE",
    "counts_sha256",
    "dump_json",
    "file_sha256",
    "freeze_snapshot",
    "leaderboard_table",
    "matrix_csv",
    "package_version",
    "read_matrix",
    "replace_file",
    "round_values",
    "write_parquet",
    "write_zip",
]

COLUMNS: tuple[str, ...] = (
    "model",
    "rating",
    "ci_low",
    "ci_high",
    "rank",
    "rank_low",
    "rank_high",
    "rank_ub",
    "battles",
    "win_rate",
)
CSV_FILE = "leaderboard.csv"
JSON_FILE = "leaderboard.json"
PARQUET_FILE = "leaderboard.parquet"
OBSERVED_FILE = "winrate_observed.csv"
PREDICTED_FILE = "winrate_predicted.csv"
BATTLES_FILE = "battle_counts.csv"
METADATA_FILE = "metadata.json"
ZIP_FILE = "snapshot.zip"
DATA_FILES: tuple[str, ...] = (CSV_FILE, JSON_FILE, PARQUET_FILE, OBSERVED_FILE, PREDICTED_FILE, BATTLES_FILE)
#: The formats every figure is saved in (:mod:`leaderboard.snapshot.render`), one file each.
FIGURE_FORMATS: tuple[str, ...] = ("svg", "png")
# Numbers in the files are rounded once, so every format carries the same values and tiny float noise
# (summation order between a file and a database path) cannot change a byte.
DECIMALS = 6
PACKAGE = "arena-leaderboard"
# A zip entry's timestamp is part of its bytes; a fixed one keeps the archive stable.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def package_version() -> str:
    """The installed version of this package (recorded in every snapshot)."""
    try:
        return importlib_metadata.version(PACKAGE)
    except importlib_metadata.PackageNotFoundError:
        return "0+unknown"


def file_sha256(path: Path | str) -> str:
    """Hex sha256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def counts_sha256(counts: PairCounts) -> str:
    """sha256 of aggregated votes, independent of model order and cell order.

    Two routes to the same votes (a database query and an exported file) give the same digest, so it
    tells whether two snapshots were fitted on the same input.
    """
    rows = sorted(
        (counts.models[a], counts.models[b], int(o), float(c))
        for a, b, o, c in zip(counts.model_a, counts.model_b, counts.outcome, counts.count, strict=True)
    )
    merged: dict[tuple[str, str, int], float] = {}
    for a, b, o, c in rows:
        merged[(a, b, o)] = merged.get((a, b, o), 0.0) + c
    text = "\n".join(f"{a}\t{b}\t{o}\t{c!r}" for (a, b, o), c in sorted(merged.items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def round_values(values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``values`` rounded to :data:`DECIMALS`, as every file carries them (never ``-0.0``)."""
    # Adding 0.0 turns -0.0 into 0.0, so a sign bit never shows up as "-0.0" in a file.
    rounded = np.round(np.asarray(values, dtype=np.float64), DECIMALS) + 0.0
    return np.asarray(rounded, dtype=np.float64)


def _battles_column(values: npt.NDArray[np.float64]) -> npt.NDArray[Any]:
    """Whole numbers as integers (the usual case); summed time weights stay fractional."""
    if np.all(np.isfinite(values)) and np.all(values == np.round(values)):
        return values.astype(np.int64)
    return round_values(values)


def leaderboard_table(leaderboard: Leaderboard) -> pd.DataFrame:
    """The leaderboard as a table sorted by rating (ties by name), with the columns of :data:`COLUMNS`."""
    order = leaderboard.order()
    return pd.DataFrame(
        {
            "model": pd.Series([leaderboard.models[i] for i in order], dtype=object),
            "rating": round_values(leaderboard.rating[order]),
            "ci_low": round_values(leaderboard.ci_low[order]),
            "ci_high": round_values(leaderboard.ci_high[order]),
            "rank": np.asarray(leaderboard.rank, dtype=np.int64)[order],
            "rank_low": np.asarray(leaderboard.rank_low, dtype=np.int64)[order],
            "rank_high": np.asarray(leaderboard.rank_high, dtype=np.int64)[order],
            "rank_ub": np.asarray(leaderboard.rank_ub, dtype=np.int64)[order],
            "battles": _battles_column(np.asarray(leaderboard.battles, dtype=np.float64)[order]),
            "win_rate": round_values(leaderboard.win_rate[order]),
        }
    )


def _jsonable(value: Any) -> Any:
    """Plain JSON values: numpy scalars to Python, NaN/inf to null, tuples to lists, keys to str."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return value


def dump_json(value: Any) -> bytes:
    """``value`` as sorted, indented UTF-8 JSON with a final newline (NaN and infinities as null)."""
    text = json.dumps(_jsonable(value), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def matrix_csv(matrix: npt.NDArray[np.float64], names: Sequence[str], *, integers: bool) -> bytes:
    """A model-by-model matrix as CSV (row names first), whole numbers as integers when ``integers``."""
    frame = pd.DataFrame(round_values(matrix), index=pd.Index(list(names), name="model"), columns=list(names))
    if integers and np.all(matrix == np.round(matrix)):
        frame = frame.astype(np.int64)
    return escape_frame(frame).to_csv(lineterminator="\n", na_rep="").encode("utf-8")


def write_parquet(table: pd.DataFrame, path: Path) -> None:
    """The table as Parquet (zstd), its bytes depending on the data only."""
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    # Pandas adds a JSON blob with its own version to the schema; drop it so the bytes depend on data only.
    arrow = arrow.replace_schema_metadata(None)
    _writable(path)
    with atomic_file(path, "wb") as handle:
        pq.write_table(arrow, handle, compression="zstd", write_statistics=True)


def _writable(path: Path) -> None:
    """Let a frozen file be replaced (0644) when it exists."""
    if path.exists():
        path.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)


def replace_file(path: Path, blob: bytes) -> None:
    """Write ``blob`` to ``path`` all or nothing (:mod:`leaderboard.atomic`): a failed write leaves the
    previous file."""
    _writable(path)
    write_bytes_atomic(path, blob)


def write_zip(folder: Path, target: Path, names: Sequence[str]) -> Path:
    """A zip of ``names`` from ``folder`` with fixed timestamps and modes, so its bytes depend on content."""
    _writable(target)
    with (
        atomic_file(target, "wb") as handle,
        zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive,
    ):
        for name in sorted(names):
            info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat.S_IFREG | 0o444) << 16
            archive.writestr(info, (folder / name).read_bytes())
    return target


def freeze_snapshot(folder: Path | str) -> None:
    """Make a published snapshot read-only on disk: files 0444, the folder 0555."""
    root = Path(folder)
    for path in root.iterdir():
        if path.is_file():
            path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    root.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)


def read_matrix(path: Path) -> tuple[list[str], npt.NDArray[np.float64]]:
    """A matrix written by :func:`matrix_csv`: its model names and values (NaN where empty)."""
    frame = pd.read_csv(path, index_col=0, keep_default_na=False, na_values=[""])
    frame.index = pd.Index([unescape_cell(str(i)) for i in frame.index])
    frame.columns = pd.Index([unescape_cell(str(c)) for c in frame.columns])
    return [str(x) for x in frame.index], frame.to_numpy(dtype=np.float64)
