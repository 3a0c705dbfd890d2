"""A snapshot folder: a fitted leaderboard written as its files, figures and metadata, read back, and two
compared.

A snapshot is what people cite and download, so its data files are a pure function of the fitted
leaderboard and the aggregated votes: the same input and seed give byte-identical files. The only
things that vary between two runs (``id`` and ``created_at``) live in ``metadata.json`` alone, which
also lists the sha256 of every other file as the snapshot's manifest. How each file is spelled is
:mod:`leaderboard.snapshot.files`; which figures it carries, :mod:`leaderboard.snapshot.figures`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from leaderboard.bt.matrices import PairwiseMatrices, pairwise_matrices
from leaderboard.data import PairCounts
from leaderboard.design.precision import board_precision
from leaderboard.result import Leaderboard
from leaderboard.snapshot.figures import PlotsUnderWay, draw_plots, plot_files
from leaderboard.snapshot.files import (
    BATTLES_FILE,
    CSV_FILE,
    DATA_FILES,
    JSON_FILE,
    METADATA_FILE,
    OBSERVED_FILE,
    PACKAGE,
    PARQUET_FILE,
    PREDICTED_FILE,
    ZIP_FILE,
    counts_sha256,
    dump_json,
    file_sha256,
    leaderboard_table,
    matrix_csv,
    package_version,
    read_matrix,
    replace_file,
    round_values,
    write_parquet,
    write_zip,
)
from leaderboard.spreadsheet import escape_frame, unescape_cell

__all__ = [
    "SnapshotData",
    "SnapshotDiff",
    "SnapshotManifest",
    "diff_snapshots",
    "make_snapshot_id",
    "read_snapshot",
    "slice_label",
    "write_snapshot",
]


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
        OBSERVED_FILE: matrix_csv(matrices.observed, names, integers=False),
        PREDICTED_FILE: matrix_csv(matrices.predicted, names, integers=False),
        BATTLES_FILE: matrix_csv(matrices.n_battles, names, integers=True),
    }
    added = dict(extra_files or {})
    for name, blob in {**blobs, **added}.items():
        replace_file(out / name, blob)
    write_parquet(table, out / PARQUET_FILE)

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
    files = {name: file_sha256(out / name) for name in data_names + (plot_files() if plots else ())}
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
    replace_file(out / METADATA_FILE, dump_json(meta))
    files_all = {**files, METADATA_FILE: file_sha256(out / METADATA_FILE)}
    if make_zip:
        write_zip(out, out / ZIP_FILE, sorted(files_all))
        files_all[ZIP_FILE] = file_sha256(out / ZIP_FILE)
    return SnapshotManifest(path=out, metadata=meta, files=files_all)


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
    names, n_battles = read_matrix(root / BATTLES_FILE)
    _, observed = read_matrix(root / OBSERVED_FILE)
    _, predicted = read_matrix(root / PREDICTED_FILE)
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
    joined["rating_change"] = round_values(joined["rating_b"] - joined["rating_a"])
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
