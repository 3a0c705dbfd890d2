"""The composite's likelihood on aggregated cells, its analytic derivatives, and its fit through the
package's Newton trust-region driver.

The votes are aggregated once into cells, one per (source, left model, right model, side known): a
cell's likelihood depends on its votes only through three weighted sums (weight, signed score, ties),
so fits, refits and bootstrap rounds cost the number of cells, not of votes. Soft verdicts (a
probability or a five-level verdict) enter as a fractional outcome ``y``:
``y log P(left) + (1 - y) log P(right)``. With every extra term off and equal weights the likelihood is
exactly the plain Bradley-Terry likelihood of the pooled votes.

The log posterior is fitted by :func:`leaderboard.bt.solver.newton_trust_region`, the same driver as
the Bradley-Terry engine's cells, on the analytic gradient and Hessian (assembled from per-cell 8 x 8
blocks). It is not concave everywhere (a discrimination multiplies the ratings, ``eta = a u``, and the
deviations' Jacobian adds ``-k log a``), which the trust region handles: where the Hessian is indefinite
it still steps uphill, and near the optimum it takes Newton steps. No bounds: a step that overflows
counts as an infinite loss and the region shrinks, and the weak priors of
:class:`~leaderboard.composite.model.CompositeOptions` give the optimum a finite place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from leaderboard.bt.cells import davidson_row_terms
from leaderboard.bt.solver import NewtonSolution, newton_trust_region
from leaderboard.bt.spec import DisconnectedComparisonError
from leaderboard.composite.layout import ParameterLayout
from leaderboard.composite.model import CompositeData, CompositeOptions

__all__ = [
    "FIT_TOL",
    "SETTLED_GTOL",
    "CellTerms",
    "VoteCells",
    "cell_terms",
    "check_connected",
    "cluster_scores",
    "log_posterior",
    "log_posterior_gradient",
    "log_posterior_hessian",
    "log_posterior_value",
    "make_vote_cells",
    "maximise_posterior",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Where a fit stops: the Euclidean norm of the log posterior's gradient per unit weight. Newton's steps
#: converge quadratically, so the last step usually lands far below it.
FIT_TOL = 1e-9
#: Where a fit also stops, as settled, when its steps are refused at a smaller gradient than this: the
#: decrease a step would bring is lost in the rounding of the objective
#: (:func:`leaderboard.bt.solver.newton_trust_region`; a fifth of the bootstrap rounds end so).
SETTLED_GTOL = 1e-6


@dataclass(frozen=True)
class VoteCells:
    """The votes aggregated once per (source, left model, right model, side known): the likelihood of a
    cell depends on its votes only through three weighted sums, so a fit never touches the votes.

    Per vote ``contrib`` holds ``w * (1, (1 - t)(y - 1/2), t)`` (weight, signed score, tie); a cell's
    statistics ``(W, Y, T)`` are their sums, and its log-likelihood is
    ``Y eta + T log nu - W log D(eta, nu)``. A bootstrap round or a reweighting only changes the sums.
    The family term ``f_a - f_b`` is a function of (source, pair), so it is a cell attribute too.
    """

    a: IntArray
    b: IntArray
    src: IntArray
    side: FloatArray
    fam: FloatArray
    vote_cell: IntArray
    contrib: FloatArray  # (votes, 3)
    groups: tuple[tuple[int, IntArray], ...]  # per source present: its cells
    # (cells, 8): parameter columns of theta_a, theta_b, log a, position, self-preference, log nu, and the
    # source's deviations of a and of b (-1: none)
    cols: IntArray

    @property
    def n_cells(self) -> int:
        return len(self.a)

    def stats(self, weights: FloatArray | None = None) -> FloatArray:
        """``(W, Y, T)`` per cell (rows), the votes multiplied by ``weights`` when given."""
        c = self.contrib if weights is None else self.contrib * weights[:, None]
        return np.stack(
            [np.bincount(self.vote_cell, weights=c[:, k], minlength=self.n_cells) for k in range(3)], axis=1
        )

    def by_cluster(self, cluster: IntArray, n_clusters: int) -> sp.csr_matrix:
        """Clusters (rows) by cell statistics (columns ``k * cells + cell``): a round's statistics are
        its cluster draw counts times this matrix."""
        n = self.n_cells
        rows = np.tile(cluster, 3)
        cols = np.concatenate([k * n + self.vote_cell for k in range(3)])
        out: sp.csr_matrix = sp.csr_matrix((self.contrib.T.ravel(), (rows, cols)), shape=(n_clusters, 3 * n))
        out.sum_duplicates()
        return out


def make_vote_cells(data: CompositeData, options: CompositeOptions, lay: ParameterLayout) -> VoteCells:
    """The votes of ``data`` as :class:`VoteCells`, with each cell's parameter columns under ``lay``."""
    n = len(data.model_a)
    tie = np.asarray(data.tie, dtype=bool)
    y = np.where(tie, 0.5, np.asarray(data.score, dtype=float))
    t = (tie & options.ties).astype(float)
    w = np.ones(n) if data.weight is None else np.asarray(data.weight, dtype=float)
    side = np.ones(n, dtype=np.int64) if data.sided is None else np.asarray(data.sided, dtype=np.int64)
    src = np.asarray(data.source, dtype=np.int64)
    a = np.asarray(data.model_a, dtype=np.int64)
    b = np.asarray(data.model_b, dtype=np.int64)
    m = np.int64(lay.n_models)
    key = ((src * m + a) * m + b) * 2 + side
    uniq, vote_cell = np.unique(key, return_inverse=True)
    c_side = uniq % 2
    c_b = (uniq // 2) % m
    c_a = (uniq // (2 * m)) % m
    c_src = uniq // (2 * m * m)
    fam = np.zeros(len(uniq))
    if data.model_family:
        for s, family in data.family.items():
            if family is None:
                continue
            member = np.array([f == family for f in data.model_family], dtype=float)
            rows = c_src == s
            fam[rows] = member[c_a[rows]] - member[c_b[rows]]
    contrib = w[:, None] * np.stack([np.ones(n), (1 - t) * (y - 0.5), t], axis=1)
    cols = np.full((len(uniq), 8), -1, dtype=np.int64)
    cols[:, 0] = c_a - 1  # model 0 is the reference: -1 means no column
    cols[:, 1] = c_b - 1
    offset = lay.n_models - 1
    where: list[IntArray] = []
    for learned in (lay.learn_a, lay.learn_pos, lay.learn_nu, lay.learn_sp):
        at = np.full(lay.n_sources, -1, dtype=np.int64)
        at[learned] = offset + np.arange(len(learned))
        where.append(at[c_src])
        offset += len(learned)
    la_col, pos_col, nu_col, sp_col = where
    cols[:, 2] = la_col
    cols[:, 3] = np.where(c_side > 0, pos_col, -1)
    cols[:, 4] = np.where(fam != 0, sp_col, -1)
    cols[:, 5] = nu_col
    dev_at = np.full(lay.n_sources, -1, dtype=np.int64)
    dev_at[lay.learn_dev] = offset + lay.n_models * np.arange(len(lay.learn_dev))
    has_dev = dev_at[c_src] >= 0
    cols[:, 6] = np.where(has_dev, dev_at[c_src] + c_a, -1)
    cols[:, 7] = np.where(has_dev, dev_at[c_src] + c_b, -1)
    groups = tuple((int(s), np.flatnonzero(c_src == s)) for s in np.unique(c_src))
    return VoteCells(
        c_a, c_b, c_src, c_side.astype(float), fam, vote_cell.astype(np.int64), contrib, groups, cols
    )


@dataclass(frozen=True)
class CellTerms:
    """Per cell at one point: the linear predictor, its derivatives ``d eta / d x`` in the cell's eight
    parameter slots (:attr:`VoteCells.cols`; the log-nu slot holds 0), and the log-likelihood's derivatives
    per unit weight in ``eta`` and ``t = log nu`` at a zero score (:func:`~leaderboard.bt.cells.
    davidson_row_terms`; the likelihood is linear in the score and the tie share, which the cell sums
    add back)."""

    eta: FloatArray
    jac: FloatArray  # (cells, 8)
    ll0: FloatArray
    l_u: FloatArray
    l_t: FloatArray
    l_uu: FloatArray
    l_ut: FloatArray
    l_tt: FloatArray


def cell_terms(x: FloatArray, lay: ParameterLayout, cells: VoteCells) -> CellTerms:
    """Every cell's :class:`CellTerms` at ``x``: the Davidson pieces of
    :func:`~leaderboard.bt.cells.davidson_row_terms`, source by source (each with its own tie
    parameter, or half-win ties where it learns none)."""
    theta, log_a, pos, log_nu, sp_ = lay.split(x)
    scale_a = np.exp(log_a[cells.src])
    u = theta[cells.a] - theta[cells.b] + pos[cells.src] * cells.side + sp_[cells.src] * cells.fam
    if len(lay.learn_dev):
        dev = lay.deviation(x)
        u = u + dev[cells.src, cells.a] - dev[cells.src, cells.b]
    eta = scale_a * u
    parts = np.zeros((6, cells.n_cells))
    learned_nu = set(lay.learn_nu.tolist())
    zero = np.zeros(cells.n_cells)
    for s, rows in cells.groups:
        nu_s = float(log_nu[s]) if s in learned_nu else None
        for k, values in enumerate(davidson_row_terms(eta[rows], zero[rows], zero[rows], nu_s)):
            parts[k, rows] = values
    jac = np.stack(
        [scale_a, -scale_a, eta, scale_a * cells.side, scale_a * cells.fam, zero, scale_a, -scale_a], axis=1
    )
    return CellTerms(eta, jac, *parts)


def log_posterior(
    x: FloatArray, lay: ParameterLayout, cells: VoteCells, stats: FloatArray, order: int
) -> tuple[float, FloatArray | None, FloatArray | None]:
    """The log posterior (the log-likelihood ``sum Y eta + T log nu - W log D`` over cells plus the
    terms' weak priors, :class:`~leaderboard.composite.model.CompositeOptions`) and, for ``order`` 1 and
    2, its analytic gradient and Hessian, assembled from per-cell 8 x 8 blocks by ``bincount`` (no sparse
    matrices: a cell touches at most eight parameters). The deviations' prior is centred on
    ``lay.centre`` (0 but in a bootstrap round, :func:`leaderboard.composite.fit.bootstrap_composite`).

    The Hessian is the chain rule through ``eta = a u`` and ``t = log nu``: ``l_uu J J^T`` plus the
    ``l_ut`` and ``l_tt`` blocks, plus the score times the second derivative of ``eta``, which is non-zero
    only in the log-discrimination row and column (``d2 eta / d log a d x = d eta / d x``).
    """
    terms = cell_terms(x, lay, cells)
    _, _, _, log_nu, _ = lay.split(x)
    w, y, tie = stats[:, 0], stats[:, 1], stats[:, 2]
    with np.errstate(invalid="ignore"):
        tie_term = np.where(tie > 0, tie * log_nu[cells.src], 0.0)
    off = x - lay.centre
    value = float(np.sum(w * terms.ll0 + y * terms.eta + tie_term)) - 0.5 * float(lay.prior @ off**2)
    value -= float(lay.view_dims @ x)
    if order < 1:
        return value, None, None
    p = lay.n_params
    cols = cells.cols
    on = cols >= 0
    g_eta = y + w * terms.l_u
    local_g = terms.jac * g_eta[:, None]
    local_g[:, 5] = tie + w * terms.l_t
    grad: FloatArray = np.bincount(cols[on], weights=local_g[on], minlength=p) - lay.prior * off
    grad -= lay.view_dims
    if order < 2:
        return value, grad, None
    jac = terms.jac
    block = (w * terms.l_uu)[:, None, None] * jac[:, :, None] * jac[:, None, :]
    block[:, 2, :] += g_eta[:, None] * jac
    block[:, :, 2] += g_eta[:, None] * jac
    block[:, 2, 2] -= g_eta * terms.eta
    cross = (w * terms.l_ut)[:, None] * jac
    block[:, :, 5] += cross
    block[:, 5, :] += cross
    block[:, 5, 5] = w * terms.l_tt
    both = on[:, :, None] & on[:, None, :]
    flat = cols[:, :, None] * p + cols[:, None, :]
    hess: FloatArray = (
        np.bincount(flat[both], weights=block[both], minlength=p * p).reshape(p, p).astype(np.float64)
    )
    return value, grad, (hess + hess.T) / 2 - np.diag(lay.prior)


def log_posterior_value(x: FloatArray, lay: ParameterLayout, cells: VoteCells, stats: FloatArray) -> float:
    """The log posterior alone (:func:`log_posterior`)."""
    return log_posterior(x, lay, cells, stats, 0)[0]


def log_posterior_gradient(
    x: FloatArray, lay: ParameterLayout, cells: VoteCells, stats: FloatArray
) -> tuple[float, FloatArray]:
    """The log posterior and its gradient (:func:`log_posterior`)."""
    value, grad, _ = log_posterior(x, lay, cells, stats, 1)
    if grad is None:
        raise RuntimeError("no gradient")
    return value, grad


def log_posterior_hessian(
    x: FloatArray, lay: ParameterLayout, cells: VoteCells, stats: FloatArray
) -> FloatArray:
    """The log posterior's Hessian (:func:`log_posterior`)."""
    hess = log_posterior(x, lay, cells, stats, 2)[2]
    if hess is None:
        raise RuntimeError("no Hessian")
    return hess


def cluster_scores(
    x: FloatArray, lay: ParameterLayout, cells: VoteCells, cluster: IntArray, weights: FloatArray | None
) -> sp.csr_matrix:
    """Score sums per battle (rows) and parameter (columns), sparse: a vote's score is its cell's
    ``d eta / d x`` times its own ``y``-dependent factor (and a tie factor in the log-nu slot), summed
    over the battle's votes."""
    terms = cell_terms(x, lay, cells)
    c = cells.contrib if weights is None else cells.contrib * weights[:, None]
    cell = cells.vote_cell
    local = terms.jac[cell] * (c[:, 1] + c[:, 0] * terms.l_u[cell])[:, None]
    local[:, 5] = c[:, 2] + c[:, 0] * terms.l_t[cell]
    cols = cells.cols[cell]
    on = cols >= 0
    rows = np.broadcast_to(cluster[:, None], cols.shape)
    out: sp.csr_matrix = sp.csr_matrix(
        (local[on], (rows[on], cols[on])), shape=(int(cluster.max()) + 1, lay.n_params)
    )
    return out


def maximise_posterior(
    lay: ParameterLayout,
    cells: VoteCells,
    stats: FloatArray,
    options: CompositeOptions,
    x0: FloatArray | None,
) -> NewtonSolution:
    """The posterior mode from ``x0`` (a warm start for a refit or a bootstrap round; ``None``: every term
    at 0 and a moderate tie parameter), by :func:`leaderboard.bt.solver.newton_trust_region` on the log
    posterior per unit weight, at most ``options.max_iter`` iterations."""
    if x0 is None:
        x0 = np.zeros(lay.n_params)
        cuts = np.cumsum(lay.sizes)
        x0[cuts[2] : cuts[3]] = math.log(0.5)  # a moderate starting tie parameter
    total = max(1.0, float(np.sum(stats[:, 0])))

    def value_grad(x: FloatArray) -> tuple[float, FloatArray]:
        value, grad = log_posterior_gradient(x, lay, cells, stats)
        return -value / total, -grad / total

    def hessian(x: FloatArray) -> FloatArray:
        out: FloatArray = -log_posterior_hessian(x, lay, cells, stats) / total
        return out

    return newton_trust_region(
        value_grad, hessian, x0, tol=FIT_TOL, max_iter=options.max_iter, settled_gtol=SETTLED_GTOL
    )


def check_connected(data: CompositeData) -> None:
    """Refuse votes whose models fall into groups never compared with each other (no common scale).

    Raises
    ------
    DisconnectedComparisonError
    """
    m = len(data.models)
    graph = sp.coo_matrix((np.ones(len(data.model_a)), (data.model_a, data.model_b)), shape=(m, m))
    if connected_components(graph, directed=False)[0] > 1:
        raise DisconnectedComparisonError("the models fall into groups never compared with each other")
