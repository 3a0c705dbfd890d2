"""Leaderboard result -> a snapshot folder (CSV, JSON, Parquet, pairwise matrices, plots, metadata) and back.

A snapshot is what people cite and download, so its data files are a pure function of the fitted
leaderboard and the aggregated votes: the same input and seed give byte-identical files. The only
things that vary between two runs (``id`` and ``created_at``) live in ``metadata.json`` alone, which
also lists the sha256 of every other file as the snapshot's manifest.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import stat
import zipfile
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from leaderboard.atomic import atomic_file, write_bytes_atomic
from leaderboard.bt.matrices import PairwiseMatrices, pairwise_matrices
from leaderboard.data import PairCounts
from leaderboard.design.precision import board_precision
from leaderboard.result import Leaderboard
from leaderboard.spreadsheet import escape_frame, unescape_cell

if TYPE_CHECKING:  # matplotlib is imported where figures are drawn
    from matplotlib.figure import Figure

__all__ = [
    "COLUMNS",
    "DATA_FILES",
    "METADATA_FILE",
    "PLOT_FILES",
    "PLOT_STEMS",
    "POINT_PLOT_STEMS",
    "ZIP_FILE",
    "PlotsUnderWay",
    "SnapshotData",
    "SnapshotManifest",
    "SnapshotDiff",
    "counts_sha256",
    "diff_snapshots",
    "draw_plots",
    "dump_json",
    "file_sha256",
    "freeze_snapshot",
    "leaderboard_table",
    "make_snapshot_id",
    "package_version",
    "read_snapshot",
    "render_plots",
    "same_point_plots",
    "slice_label",
    "write_snapshot",
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
PLOT_STEMS: tuple[str, ...] = (
    "ratings",
    "winrate_observed",
    "winrate_predicted",
    "battle_counts",
    "winrate_average",
    "bootstrap",
)
#: The figures drawn from the point ratings alone (the models' order, the pairwise matrices and the
#: method's name): a board fitted without intervals draws them as its bootstrap does
#: (:func:`same_point_plots`); the others show the intervals and the bootstrap rounds.
POINT_PLOT_STEMS: tuple[str, ...] = (
    "winrate_observed",
    "winrate_predicted",
    "battle_counts",
    "winrate_average",
)
PLOT_FILES: tuple[str, ...] = tuple(f"{stem}.{ext}" for stem in PLOT_STEMS for ext in ("svg", "png"))
# Numbers in the files are rounded once, so every format carries the same values and tiny float noise
# (summation order between a file and a database path) cannot change a byte.
DECIMALS = 6
PACKAGE = "arena-leaderboard"
# A zip entry's timestamp is part of its bytes; a fixed one keeps the archive stable.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class SnapshotManifest:
    """What :func:`write_snapshot` wrote: the folder, its metadata, and sha256 per file."""

    path: Path
    metadata: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return str(self.metadata["id"])


@dataclass(frozen=True)
class SnapshotData:
    """A snapshot read back from its folder."""

    path: Path
    metadata: dict[str, Any]
    table: pd.DataFrame
    leaderboard: Leaderboard
    matrices: PairwiseMatrices


def package_version() -> str:
    """The installed version of this package (recorded in every snapshot)."""
    try:
        return importlib_metadata.version(PACKAGE)
    except importlib_metadata.PackageNotFoundError:
        return "0+unknown"


def slice_label(*, category: str | None = None, language: str | None = None) -> str:
    """A stable, URL-safe name for a category/language board: ``all``, ``category=coding``, ...."""
    parts = [f"{key}={value}" for key, value in (("category", category), ("language", language)) if value]
    return "&".join(parts) if parts else "all"


def make_snapshot_id(created_at: datetime, label: str, digest: str) -> str:
    """``20260101T120000Z-all-1a2b3c4d5e``: sortable by time, readable slice, unique by content.

    ``digest`` should cover everything the snapshot says (:func:`write_snapshot` hashes its data files
    and its metadata), so that two snapshots differing in anything have different ids.
    """
    stamp = created_at.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") or "all"
    return f"{stamp}-{slug[:60]}-{digest[:10]}"


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


def _round(values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    # Adding 0.0 turns -0.0 into 0.0, so a sign bit never shows up as "-0.0" in a file.
    rounded = np.round(np.asarray(values, dtype=np.float64), DECIMALS) + 0.0
    return np.asarray(rounded, dtype=np.float64)


def _battles_column(values: npt.NDArray[np.float64]) -> npt.NDArray[Any]:
    """Whole numbers as integers (the usual case); summed time weights stay fractional."""
    if np.all(np.isfinite(values)) and np.all(values == np.round(values)):
        return values.astype(np.int64)
    return _round(values)


def leaderboard_table(leaderboard: Leaderboard) -> pd.DataFrame:
    """The leaderboard as a table sorted by rating (ties by name), with the columns of :data:`COLUMNS`."""
    order = leaderboard.order()
    return pd.DataFrame(
        {
            "model": pd.Series([leaderboard.models[i] for i in order], dtype=object),
            "rating": _round(leaderboard.rating[order]),
            "ci_low": _round(leaderboard.ci_low[order]),
            "ci_high": _round(leaderboard.ci_high[order]),
            "rank": np.asarray(leaderboard.rank, dtype=np.int64)[order],
            "rank_low": np.asarray(leaderboard.rank_low, dtype=np.int64)[order],
            "rank_high": np.asarray(leaderboard.rank_high, dtype=np.int64)[order],
            "rank_ub": np.asarray(leaderboard.rank_ub, dtype=np.int64)[order],
            "battles": _battles_column(np.asarray(leaderboard.battles, dtype=np.float64)[order]),
            "win_rate": _round(leaderboard.win_rate[order]),
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
    text = json.dumps(_jsonable(value), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def _matrix_csv(matrix: npt.NDArray[np.float64], names: Sequence[str], *, integers: bool) -> bytes:
    frame = pd.DataFrame(_round(matrix), index=pd.Index(list(names), name="model"), columns=list(names))
    if integers and np.all(matrix == np.round(matrix)):
        frame = frame.astype(np.int64)
    return escape_frame(frame).to_csv(lineterminator="\n", na_rep="").encode("utf-8")


def _write_parquet(table: pd.DataFrame, path: Path) -> None:
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    # Pandas adds a JSON blob with its own version to the schema; drop it so the bytes depend on data only.
    arrow = arrow.replace_schema_metadata(None)
    _writable(path)
    with atomic_file(path, "wb") as handle:
        pq.write_table(arrow, handle, compression="zstd", write_statistics=True)


class PlotsUnderWay(Protocol):
    """Figures being drawn elsewhere (:class:`arena.publish.drawing.PlotDrawing`)."""

    def wait(self) -> None:
        """Return once the figures are in the folder."""


def draw_plots(
    out: Path,
    leaderboard: Leaderboard,
    counts: PairCounts,
    matrices: PairwiseMatrices | None = None,
    *,
    stems: Collection[str] = PLOT_STEMS,
    take: Callable[[str], bool] | None = None,
) -> None:
    """The board's figures (:data:`PLOT_FILES`, SVG and PNG; those of ``stems`` only when given) in
    ``out``; ``matrices`` in the table's model order when the caller has them; ``take``: see
    :func:`render_plots`."""
    rendered = render_plots(leaderboard, counts, matrices, stems=stems, take=take)
    out.mkdir(parents=True, exist_ok=True)
    for name, blob in rendered:
        write_bytes_atomic(out / name, blob)


def render_plots(
    leaderboard: Leaderboard,
    counts: PairCounts,
    matrices: PairwiseMatrices | None = None,
    *,
    stems: Collection[str] = PLOT_STEMS,
    take: Callable[[str], bool] | None = None,
) -> Iterator[tuple[str, bytes]]:
    """Each figure of ``stems`` (in :data:`PLOT_STEMS` order) as ``(file name, bytes)``: what
    :func:`draw_plots` writes, each figure drawn as the iterator reaches it. ``take(stem)``, when given,
    is asked just before a figure is drawn, and the figure is left out unless it says yes (figures
    shared out between two processes as they go: :mod:`arena.publish.drawing`)."""
    # matplotlib loads only where plots are drawn, so reading snapshots (the web pages) stays light
    from leaderboard.snapshot.plots import (
        plot_average_win_rates,
        plot_battle_counts,
        plot_bootstrap,
        plot_intervals,
        plot_win_rates,
        render_figure,
    )

    unknown = set(stems) - set(PLOT_STEMS)
    if unknown:
        raise ValueError(f"no such figure: {', '.join(sorted(unknown))}")
    names = list(leaderboard_table(leaderboard)["model"])
    grid = matrices

    def pairs() -> PairwiseMatrices:  # made once, and only for the figures that show them
        nonlocal grid
        if grid is None:
            grid = pairwise_matrices(counts, leaderboard).reorder(names)
        return grid

    observed = "Observed win rate of each row model against each column model (ties count half)"
    predicted = f"Win rate of each row model against each column model predicted by {leaderboard.method}"
    figures: dict[str, Callable[[], Figure]] = {
        "ratings": lambda: plot_intervals(leaderboard),
        "winrate_observed": lambda: plot_win_rates(pairs().observed, names, title=observed),
        "winrate_predicted": lambda: plot_win_rates(pairs().predicted, names, title=predicted),
        "battle_counts": lambda: plot_battle_counts(pairs().n_battles, names),
        "winrate_average": lambda: plot_average_win_rates(pairs().observed, names),
        "bootstrap": lambda: plot_bootstrap(leaderboard),
    }
    return (
        (f"{stem}.{fmt}", blob)
        for stem in PLOT_STEMS
        if stem in stems and (take is None or take(stem))
        for fmt, blob in render_figure(figures[stem]()).items()
    )


def same_point_plots(a: Leaderboard, b: Leaderboard) -> bool:
    """Whether ``a`` and ``b`` draw the same :data:`POINT_PLOT_STEMS` figures from the same counts: the
    same models, ratings (so order and predicted rates) and method name, whatever their intervals."""
    return a.models == b.models and a.method == b.method and np.array_equal(a.rating, b.rating)


def write_snapshot(
    out_dir: Path | str,
    leaderboard: Leaderboard,
    counts: PairCounts,
    *,
    votes_sha256: str | None = None,
    snapshot_id: str | None = None,
    created_at: datetime | None = None,
    category: str | None = None,
    language: str | None = None,
    plots: bool | PlotsUnderWay = True,
    make_zip: bool = True,
    extra_metadata: Mapping[str, Any] | None = None,
    extra_files: Mapping[str, bytes] | None = None,
) -> SnapshotManifest:
    """Write a snapshot folder: data files, matrices, plots, ``metadata.json`` and a zip of them all.

    Parameters
    ----------
    out_dir : path
        The folder; created if missing. Existing snapshot files in it are replaced.
    leaderboard : Leaderboard
        The fitted leaderboard.
    counts : PairCounts
        The aggregated votes it was fitted on (for matrices, vote count and the input digest).
    votes_sha256 : str, optional
        Digest of the votes used as the store computes it; defaults to :func:`counts_sha256`.
    snapshot_id, created_at : optional
        Identity of the snapshot; by default now and an id made from it, the slice and the data digest.
    category, language : str, optional
        The slice of the votes this board covers (recorded in the metadata).
    plots : bool or PlotsUnderWay
        Draw the figures (SVG and PNG), or wait for them being drawn elsewhere (see
        :mod:`arena.publish.drawing`).
    make_zip : bool
        Also write ``snapshot.zip`` with every other file.
    extra_metadata : mapping, optional
        More keys for ``metadata.json`` (e.g. the filters used).
    extra_files : mapping, optional
        More data files by name (e.g. the style-controlled board); listed in the manifest and part of
        the data digest.

    Returns
    -------
    SnapshotManifest
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = leaderboard_table(leaderboard)
    names = list(table["model"])
    matrices = pairwise_matrices(counts, leaderboard).reorder(names)

    blobs: dict[str, bytes] = {
        CSV_FILE: escape_frame(table).to_csv(index=False, lineterminator="\n").encode("utf-8"),
        JSON_FILE: dump_json(
            {
                "method": leaderboard.method,
                "interval": leaderboard.interval,
                "parameters": leaderboard.parameters,
                "parameters_fitted": leaderboard.parameters_fitted,
                "n_votes": counts.n_votes,
                "models": table.to_dict(orient="records"),
            }
        ),
        OBSERVED_FILE: _matrix_csv(matrices.observed, names, integers=False),
        PREDICTED_FILE: _matrix_csv(matrices.predicted, names, integers=False),
        BATTLES_FILE: _matrix_csv(matrices.n_battles, names, integers=True),
    }
    added = dict(extra_files or {})
    for name, blob in {**blobs, **added}.items():
        _replace(out / name, blob)
    _write_parquet(table, out / PARQUET_FILE)

    # What the metadata says besides the files' digests is computed before waiting for figures drawn
    # elsewhere: provisional models and the votes still needed (leaderboard.design.precision), the input
    # digest.
    precision = board_precision(leaderboard, counts, level=float(leaderboard.parameters.get("level", 0.95)))
    counts_digest = counts_sha256(counts)
    if plots is True:
        draw_plots(out, leaderboard, counts, matrices)
    elif plots is not False:
        plots.wait()  # drawn meanwhile (arena.publish.drawing)

    data_names = DATA_FILES + tuple(sorted(added))
    files = {name: file_sha256(out / name) for name in data_names + (PLOT_FILES if plots else ())}
    created = (created_at or datetime.now(UTC)).astimezone(UTC)
    label = slice_label(category=category, language=language)
    data_digest = hashlib.sha256("".join(files[n] for n in data_names).encode("ascii")).hexdigest()
    meta: dict[str, Any] = {
        "created_at": created.isoformat(),
        "slice": label,
        "category": category,
        "language": language,
        # a count reads as one (19882, not 19882.0); summed time weights keep their fraction
        "n_votes": int(counts.n_votes) if float(counts.n_votes).is_integer() else counts.n_votes,
        "n_models": len(names),
        "votes_sha256": votes_sha256 or counts_digest,
        "counts_sha256": counts_digest,
        "data_sha256": data_digest,
        "method": leaderboard.method,
        "interval": leaderboard.interval,
        "parameters": leaderboard.parameters,
        "seed": leaderboard.parameters.get("random_state", leaderboard.parameters.get("seed")),
        "parameters_fitted": leaderboard.parameters_fitted,
        "package": PACKAGE,
        "package_version": package_version(),
        "files": files,
        "precision": precision,
        **dict(extra_metadata or {}),
    }
    # The id's digest covers the metadata too (its options, its microsecond time): two boards with the
    # same numbers but other settings, or published within one second, never share an id.
    identity = hashlib.sha256(data_digest.encode("ascii") + dump_json(meta)).hexdigest()
    meta["id"] = snapshot_id or make_snapshot_id(created, label, identity)
    _replace(out / METADATA_FILE, dump_json(meta))
    files_all = {**files, METADATA_FILE: file_sha256(out / METADATA_FILE)}
    if make_zip:
        write_zip(out, out / ZIP_FILE, sorted(files_all))
        files_all[ZIP_FILE] = file_sha256(out / ZIP_FILE)
    return SnapshotManifest(path=out, metadata=meta, files=files_all)


def _writable(path: Path) -> None:
    if path.exists():
        path.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)


def _replace(path: Path, blob: bytes) -> None:
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


def _read_matrix(path: Path) -> tuple[list[str], npt.NDArray[np.float64]]:
    frame = pd.read_csv(path, index_col=0, keep_default_na=False, na_values=[""])
    frame.index = pd.Index([unescape_cell(str(i)) for i in frame.index])
    frame.columns = pd.Index([unescape_cell(str(c)) for c in frame.columns])
    return [str(x) for x in frame.index], frame.to_numpy(dtype=np.float64)


def read_snapshot(folder: Path | str, *, verify: bool = True) -> SnapshotData:
    """Read a snapshot folder back: metadata, the table, a :class:`Leaderboard` and the matrices.

    Parameters
    ----------
    folder : path
        A folder written by :func:`write_snapshot`.
    verify : bool
        Check every file against the sha256 listed in ``metadata.json``.

    Raises
    ------
    ValueError
        If a file's sha256 does not match the manifest.
    """
    root = Path(folder)
    meta: dict[str, Any] = json.loads((root / METADATA_FILE).read_text(encoding="utf-8"))
    if verify:
        for name, digest in meta.get("files", {}).items():
            actual = file_sha256(root / name)
            if actual != digest:
                raise ValueError(f"{name}: sha256 {actual} does not match the manifest ({digest})")
    table = pd.read_csv(root / CSV_FILE, keep_default_na=False, dtype={"model": str})
    table["model"] = table["model"].map(unescape_cell)
    names, n_battles = _read_matrix(root / BATTLES_FILE)
    _, observed = _read_matrix(root / OBSERVED_FILE)
    _, predicted = _read_matrix(root / PREDICTED_FILE)
    board = Leaderboard(
        models=tuple(str(x) for x in table["model"]),
        rating=table["rating"].to_numpy(dtype=np.float64),
        ci_low=table["ci_low"].to_numpy(dtype=np.float64),
        ci_high=table["ci_high"].to_numpy(dtype=np.float64),
        rank=table["rank"].to_numpy(dtype=np.int64),
        rank_low=table["rank_low"].to_numpy(dtype=np.int64),
        rank_high=table["rank_high"].to_numpy(dtype=np.int64),
        rank_ub=table["rank_ub"].to_numpy(dtype=np.int64),
        battles=table["battles"].to_numpy(dtype=np.float64),
        win_rate=table["win_rate"].to_numpy(dtype=np.float64),
        method=str(meta.get("method", "")),
        parameters=dict(meta.get("parameters") or {}),
        parameters_fitted=dict(meta.get("parameters_fitted") or {}),
        interval=str(meta.get("interval", "bootstrap")),
        n_votes=float(meta.get("n_votes", 0.0)),
    )
    matrices = PairwiseMatrices(
        models=tuple(names), n_battles=n_battles, observed=observed, predicted=predicted
    )
    return SnapshotData(path=root, metadata=meta, table=table, leaderboard=board, matrices=matrices)


@dataclass(frozen=True)
class SnapshotDiff:
    """How snapshot ``b`` differs from snapshot ``a``.

    Attributes
    ----------
    table : one row per model on either board: rating_a, rating_b, rating_change, rank_a, rank_b,
        rank_change (positive = moved up), sorted by b's rating then name
    added, dropped : models only on b, only on a
    votes_changed : the input votes differ (their sha256)
    method_changed : the method or its parameters differ
    """

    a_id: str
    b_id: str
    table: pd.DataFrame
    added: tuple[str, ...]
    dropped: tuple[str, ...]
    votes_changed: bool
    method_changed: bool
    changes: dict[str, tuple[Any, Any]]


def diff_snapshots(a: SnapshotData, b: SnapshotData) -> SnapshotDiff:
    """Compare two snapshots: rating and rank changes, new and dropped models, changed input or method."""
    left = a.table.set_index("model")[["rating", "rank"]]
    right = b.table.set_index("model")[["rating", "rank"]]
    joined = left.merge(right, how="outer", left_index=True, right_index=True, suffixes=("_a", "_b"))
    joined["rating_change"] = _round(joined["rating_b"] - joined["rating_a"])
    joined["rank_change"] = joined["rank_a"] - joined["rank_b"]
    joined = joined.reset_index().rename(columns={"index": "model"})
    joined = joined.sort_values(["rating_b", "model"], ascending=[False, True], na_position="last")
    joined = joined[["model", "rating_a", "rating_b", "rating_change", "rank_a", "rank_b", "rank_change"]]
    keys = ("votes_sha256", "n_votes", "method", "interval", "parameters", "slice", "package_version")
    changes = {
        k: (a.metadata.get(k), b.metadata.get(k)) for k in keys if a.metadata.get(k) != b.metadata.get(k)
    }
    return SnapshotDiff(
        a_id=str(a.metadata.get("id")),
        b_id=str(b.metadata.get("id")),
        table=joined.reset_index(drop=True),
        added=tuple(sorted(set(right.index) - set(left.index))),
        dropped=tuple(sorted(set(left.index) - set(right.index))),
        votes_changed=a.metadata.get("votes_sha256") != b.metadata.get("votes_sha256"),
        method_changed=any(k in changes for k in ("method", "interval", "parameters")),
        changes=changes,
    )
