"""Who cast a vote and on which prompt: the cluster structure that makes votes dependent.

Votes by one annotator share that annotator's taste and side bias; votes on one prompt share its
difficulty and tie propensity. Resampling single votes then treats hundreds of correlated votes as
independent evidence and the intervals come out too narrow. :class:`Clusters` aggregates the votes once
into a sparse matrix of vote counts (one row per cluster, or per annotator-prompt intersection for two-way
clustering; one column per cell of the :class:`~leaderboard.data.PairCounts` the fit uses), so the
cluster bootstrap (:func:`leaderboard.bt.bootstrap.bootstrap_ratings`) draws a round as a weighted sum of
rows and the cluster-robust sandwich (:func:`leaderboard.bt.intervals.sandwich_intervals`) sums scores per
row, neither touching the votes again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import scipy.sparse as sp

from leaderboard.battles import Battles
from leaderboard.data import PairCounts

__all__ = [
    "CLUSTER_OPTIONS",
    "MIN_CLUSTERS",
    "Clusters",
    "choose_clusters",
    "cluster_cells",
    "clustering_record",
    "parse_cluster",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Fewer clusters than this give a cluster bootstrap too coarse to trust: automatic clustering then
#: leaves the votes independent (and says so).
MIN_CLUSTERS = 20
#: What votes can be clustered by (one-way, or crossed two-way).
CLUSTER_OPTIONS = ("annotator", "prompt", "annotator,prompt")


def parse_cluster(value: str | None) -> tuple[str, ...]:
    """``"annotator"``, ``"prompt"``, ``"annotator,prompt"`` (either order) or ``None``/``"none"``."""
    if value is None or value.strip().lower() in ("", "none"):
        return ()
    parts = tuple(sorted({p.strip().lower() for p in value.split(",")}))
    if ",".join(parts) not in CLUSTER_OPTIONS:
        raise ValueError(f"--cluster must be one of {', '.join(CLUSTER_OPTIONS)} (got {value!r})")
    return parts


@dataclass(frozen=True)
class Clusters:
    """Vote counts per cluster row and cell.

    Attributes
    ----------
    by : the clustering dimensions, ``("annotator",)``, ``("prompt",)`` or ``("annotator", "prompt")``
    members : csr matrix (n_rows, n_cells): votes of each row in each cell of the counts
    codes : int array (n_rows, len(by)): each row's cluster in every dimension (0-based, dense)
    n_levels : number of clusters in each dimension
    weighted : csr matrix (n_rows, n_cells), optional: each row's summed vote weights in each cell
        divided by the cell's mean vote weight, i.e. how many of the cell's average votes the row's own
        votes are worth; only when the weights differ within some cell (``None``: ``members`` is that)
    """

    by: tuple[str, ...]
    members: sp.csr_matrix
    codes: IntArray
    n_levels: tuple[int, ...]
    weighted: sp.csr_matrix | None = None

    @property
    def label(self) -> str:
        return ",".join(self.by)

    @property
    def resampled(self) -> sp.csr_matrix:
        """What a cluster brings to each cell, in votes at the cell's mean weight: the cluster sandwich
        sums scores with it and the cluster bootstrap draws rounds from it, so a cluster whose votes
        weigh more than its cell's average counts for more (``members`` when the weights are equal)."""
        return self.members if self.weighted is None else self.weighted

    def dimension_members(self, d: int) -> sp.csr_matrix:
        """Rows summed to the clusters of dimension ``d`` alone (n_levels[d] x n_cells)."""
        n_rows = self.codes.shape[0]
        collapse = sp.csr_matrix(
            (np.ones(n_rows), (self.codes[:, d], np.arange(n_rows))), shape=(self.n_levels[d], n_rows)
        )
        out: sp.csr_matrix = (collapse @ self.members).tocsr()
        return out


def _cell_keys(
    model_a: IntArray,
    model_b: IntArray,
    outcome: npt.NDArray[np.integer],
    sided: npt.NDArray[np.bool_] | None,
    n: int,
) -> IntArray:
    key = (model_a.astype(np.int64) * n + model_b) * 4 + outcome.astype(np.int64)
    if sided is not None:
        key = key * 2 + sided.astype(np.int64)
    return key


def _dense_codes(ids: IntArray) -> IntArray:
    """Ids renumbered 0, 1, ... in order of first appearance (one hash pass).

    Votes come in vote-id order from the store and in the same order from its export, where the ids are
    different (stored annotator and prompt ids against a file's judge names and question ids): numbering
    clusters by first appearance gives both the same clusters in the same order, so a cluster bootstrap
    draws the same rounds from either.
    """
    codes, _ = pd.factorize(ids, sort=False)
    return np.asarray(codes, dtype=np.int64)


def cluster_cells(battles: Battles, counts: PairCounts, by: tuple[str, ...] | str) -> Clusters:
    """Aggregate ``battles`` per cluster into the cells of ``counts`` (made by ``battles.counts()``).

    Parameters
    ----------
    battles : Battles
        With ``annotator`` and/or ``prompt`` ids as ``by`` needs; a vote without an id (negative) is a
        cluster of its own.
    counts : PairCounts
        The cells the fit uses; time-bucketed counts are refused (one cell per pair, outcome and side).
    by : clustering dimensions, or a string for :func:`parse_cluster`

    Raises
    ------
    ValueError
        Unknown dimension, missing ids, or counts that are not the aggregate of these battles.
    """
    dims = parse_cluster(by) if isinstance(by, str) else tuple(by)
    if not dims or ",".join(dims) not in CLUSTER_OPTIONS:
        raise ValueError(f"cluster by one of {', '.join(CLUSTER_OPTIONS)}")
    if counts.time is not None:
        raise ValueError("clustered intervals need counts without time buckets")
    n = len(battles.models)
    if counts.models != battles.models:
        raise ValueError("counts and battles must share their models")
    sided = battles.sided if counts.sided is not None else None
    if counts.sided is not None and sided is None:
        sided = np.ones(len(battles), dtype=bool)
    vote_key = _cell_keys(battles.model_a, battles.model_b, battles.outcome, sided, n)
    cell_key = _cell_keys(counts.model_a, counts.model_b, counts.outcome, counts.sided, n)
    size = n * n * 4 * (2 if sided is not None else 1)
    if size <= 50_000_000:  # a direct lookup table: one random access per vote
        table = np.full(size, -1, dtype=np.int64)
        table[cell_key] = np.arange(counts.n_cells)
        cell = table[vote_key]
        if np.any(cell < 0):
            raise ValueError("counts are not the aggregate of these battles")
    else:
        order = np.argsort(cell_key, kind="stable")
        pos = np.minimum(np.searchsorted(cell_key[order], vote_key), len(order) - 1)
        if np.any(cell_key[order][pos] != vote_key):
            raise ValueError("counts are not the aggregate of these battles")
        cell = order[pos]
    codes_per_dim: list[IntArray] = []
    levels: list[int] = []
    for dim in dims:
        ids = battles.annotator if dim == "annotator" else battles.prompt
        if ids is None:
            raise ValueError(f"clustering by {dim} needs {dim} ids on the battles")
        ids = np.asarray(ids, dtype=np.int64).copy()
        missing = ids < 0
        if missing.any():  # a vote without an id stands alone
            ids[missing] = int(ids.max(initial=0)) + 1 + np.arange(int(missing.sum()))
        code = _dense_codes(ids)
        codes_per_dim.append(code)
        levels.append(int(code.max()) + 1)
    if len(dims) == 1:
        row = codes_per_dim[0]
        codes = np.arange(levels[0], dtype=np.int64)[:, None]
    else:
        joint = codes_per_dim[0] * levels[1] + codes_per_dim[1]
        uniq, row = np.unique(joint, return_inverse=True)
        codes = np.column_stack([uniq // levels[1], uniq % levels[1]]).astype(np.int64)
    members = sp.csr_matrix((np.ones(len(battles)), (row, cell)), shape=(codes.shape[0], counts.n_cells))
    members.sum_duplicates()
    if not np.allclose(np.asarray(members.sum(axis=0)).ravel(), counts.vote_counts):
        raise ValueError("counts are not the aggregate of these battles (vote numbers differ)")
    return Clusters(
        by=dims,
        members=members,
        codes=codes,
        n_levels=tuple(levels),
        weighted=_weighted_members(battles, counts, row, cell, codes.shape[0]),
    )


def _weighted_members(
    battles: Battles, counts: PairCounts, row: IntArray, cell: IntArray, n_rows: int
) -> sp.csr_matrix | None:
    """Each cluster row's vote weights per cell, in units of the cell's mean vote weight; None when no
    vote's weight differs from its cell's mean (then the vote counts say it all)."""
    if battles.weight is None or not counts.is_weighted:
        return None
    weight = np.asarray(battles.weight, dtype=np.float64)
    votes = counts.vote_counts
    mean = np.divide(counts.count, votes, out=np.zeros_like(votes), where=votes > 0)
    if np.allclose(weight, mean[cell], rtol=1e-12, atol=0.0):
        return None
    if not np.allclose(np.bincount(cell, weights=weight, minlength=counts.n_cells), counts.count):
        raise ValueError("counts are not the aggregate of these battles (weights differ)")
    # A cell of weight 0 carries nothing whoever cast its votes.
    share = np.divide(weight, mean[cell], out=np.zeros_like(weight), where=mean[cell] > 0)
    out = sp.csr_matrix((share, (row, cell)), shape=(n_rows, counts.n_cells))
    out.sum_duplicates()
    return out


def choose_clusters(battles: Battles, counts: PairCounts, cluster: str) -> Clusters | None:
    """The clusters a ``--cluster`` value asks for, or None for votes treated as independent.

    ``auto`` clusters by annotator when the battles name at least :data:`MIN_CLUSTERS` of them (fewer
    give a cluster bootstrap too coarse to trust), else leaves the votes independent.

    Raises
    ------
    ValueError
        An unknown value, or ids the clustering needs and the battles lack.
    """
    if cluster.strip().lower() == "auto":
        if battles.annotator is None or not np.any(battles.annotator >= 0):
            return None
        found = cluster_cells(battles, counts, "annotator")
        return found if found.n_levels[0] >= MIN_CLUSTERS else None
    by = parse_cluster(cluster)
    return cluster_cells(battles, counts, by) if by else None


def _n_ids(ids: IntArray | None) -> int:
    return 0 if ids is None else int(np.unique(ids[ids >= 0]).size)


def clustering_record(battles: Battles | None, asked: str, chosen: Clusters | None) -> dict[str, Any]:
    """What a board's metadata says about its clustering: what was asked (``auto``, a dimension), what
    was used (the dimensions, or ``none``), how many annotators and prompts the votes name, and why."""
    n_annotators = _n_ids(None if battles is None else battles.annotator)
    n_prompts = _n_ids(None if battles is None else battles.prompt)
    if chosen is not None:
        sizes = ", ".join(f"{n} {d}s" for d, n in zip(chosen.by, chosen.n_levels, strict=True))
        reason = f"votes resampled and summed by cluster ({sizes})"
    elif n_annotators == 0:
        reason = "the votes name no annotators: treated as independent"
    else:
        reason = (
            f"{n_annotators} annotators, fewer than {MIN_CLUSTERS}: a cluster bootstrap that coarse is not"
            " trusted, so the votes are treated as independent"
        )
    return {
        "asked": asked.strip().lower(),
        "used": chosen.label if chosen is not None else "none",
        "annotators": n_annotators,
        "prompts": n_prompts,
        "min_clusters": MIN_CLUSTERS,
        "reason": reason,
    }
