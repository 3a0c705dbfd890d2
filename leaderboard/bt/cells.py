"""The general Bradley-Terry likelihood over aggregated cells, its one design matrix and its optimiser.

With ``h`` half the linear predictor of a cell (left model ``i``, right model ``j``)

    u = beta_i - beta_j + alpha [+ alpha_i] + x . gamma,      h = u / 2,

the three outcomes have probabilities

    P(left wins) = e^h / D,   P(right wins) = e^-h / D,   P(tie) = nu / D,   D = e^h + e^-h + nu,

which is Davidson's (1970) model ``pi_i / (pi_i + pi_j + nu sqrt(pi_i pi_j))`` divided through by
``sqrt(pi_i pi_j)``, with ``pi = exp(beta)``. ``alpha`` is the common left-side advantage (the arena twin
of White's first move, Pires and Bueno Filho 2020), ``alpha_i`` an optional per-model one, ``gamma`` the
style coefficients. Plain Bradley-Terry is ``nu = 0`` with a tie scored as half a win and half a loss (the
Chatbot Arena convention); its log-likelihood in ``h`` is exactly the Davidson one without the ``log nu``
term, so the two share all derivatives. ``nu = exp(t)`` keeps the tie propensity positive.

The probit link (Thurstone-Mosteller, Glenn-David ties) replaces these three probabilities by the normal
ones of :mod:`leaderboard.bt.probit` on the same linear predictor; everything else is shared.

Ratings are identified by fixing the last model at 0 during the fit (centring or anchoring comes after).
Gradients and Hessians are analytic; the optimiser is the package's one Newton trust-region driver
(:mod:`leaderboard.bt.solver`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from leaderboard.bt.probit import RowTerms, probit_row_terms
from leaderboard.bt.solver import newton_trust_region
from leaderboard.bt.spec import BTSpec
from leaderboard.data import Outcome, PairCounts

__all__ = ["Cells", "Layout", "Objective", "davidson_row_terms", "design_matrix", "make_cells", "maximise"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Cells:
    """Rows the engine fits: aggregated cells, each with a vote count, a weight and style covariates.

    ``outcome`` is 0 (left wins), 1 (right wins) or 2 (tie; both-bad already mapped or dropped).
    ``count`` is the number of votes (what the bootstrap resamples), ``weight`` the mean weight of a vote
    (vote weights times time decay), ``features`` the style covariates (left minus right), shape
    (n_rows, n_features), ``sided`` whether the row's left side is known (``None``: every row's is); a row
    without a known side gets no position term, so the left-side advantage never learns from it.
    ``spread`` is the variance of the votes' weights within each row (``None``: they are equal): the
    likelihood needs only a row's weight total, but the variance of that total is a sum over its votes,
    ``count * (weight**2 + spread)``, so the sandwich's meat and the bootstrap's rounds need it.
    """

    models: tuple[str, ...]
    left: IntArray
    right: IntArray
    outcome: IntArray
    count: FloatArray
    weight: FloatArray
    features: FloatArray
    feature_names: tuple[str, ...] = ()
    sided: npt.NDArray[np.bool_] | None = None
    spread: FloatArray | None = None

    @property
    def n_models(self) -> int:
        return len(self.models)

    def with_count(self, count: FloatArray) -> Cells:
        return replace(self, count=count)


def make_cells(counts: PairCounts, spec: BTSpec) -> Cells:
    """Turn :class:`PairCounts` into engine rows: map or drop both-bad, compute time weights.

    Parameters
    ----------
    counts : PairCounts
        Aggregated votes; for style control, one cell per battle with its covariates in
        ``spec.features``.
    spec : BTSpec
        Its ``half_life`` and ``now`` give the decay weights ``0.5 ** ((now - time) / half_life)``
        (``now`` defaults to the latest cell's time).

    Returns
    -------
    Cells
    """
    outcome = counts.outcome.astype(np.int64).copy()
    keep = np.ones(counts.n_cells, dtype=bool)
    if spec.both_bad == "exclude":
        keep = outcome != Outcome.BOTHBAD
    outcome[outcome == Outcome.BOTHBAD] = Outcome.TIE
    n_features = spec.n_features
    feats = np.zeros((counts.n_cells, 0)) if spec.features is None else np.asarray(spec.features, np.float64)
    if feats.shape[0] != counts.n_cells:
        raise ValueError("features must have one row per cell")
    names = spec.feature_names
    if len(names) != n_features:
        names = tuple(f"x{k}" for k in range(n_features))
    # ``count`` may hold summed vote weights; the bootstrap resamples votes, the fit uses their weights.
    votes = np.asarray(counts.vote_counts, dtype=np.float64)
    weight = np.divide(counts.count, votes, out=np.ones(counts.n_cells), where=votes > 0)
    spread = counts.weight_spread
    if spec.half_life is not None:
        if counts.time is None:
            raise ValueError("time weights need PairCounts with a time per cell")
        ref = float(np.max(counts.time)) if spec.now is None else float(spec.now)
        decay = 0.5 ** ((ref - counts.time) / spec.half_life)
        weight = weight * decay
        spread = spread * decay**2
    return Cells(
        models=counts.models,
        left=counts.model_a[keep].astype(np.int64),
        right=counts.model_b[keep].astype(np.int64),
        outcome=outcome[keep],
        count=votes[keep],
        weight=weight[keep],
        features=feats[keep],
        feature_names=names,
        sided=None if counts.sided is None else counts.sided[keep],
        spread=spread[keep] if np.any(spread[keep] > 0) else None,
    )


@dataclass(frozen=True)
class Layout:
    """Where each block of parameters sits in the optimiser's vector: strengths (the last model's
    dropped), position advantages, style coefficients, then ``log nu`` when it is fitted."""

    n_models: int
    n_position: int
    has_nu: bool
    n_features: int

    @classmethod
    def of(cls, spec: BTSpec, n_models: int) -> Layout:
        n_position = {"none": 0, "common": 1, "per-model": n_models}[spec.position]
        has_nu = spec.has_tie_parameter and spec.nu_fixed is None
        return cls(n_models, n_position, has_nu, spec.n_features)

    @property
    def n_linear(self) -> int:
        return self.n_models - 1 + self.n_position + self.n_features

    @property
    def size(self) -> int:
        return self.n_linear + int(self.has_nu)

    @property
    def position_slice(self) -> slice:
        start = self.n_models - 1
        return slice(start, start + self.n_position)

    @property
    def feature_slice(self) -> slice:
        start = self.n_models - 1 + self.n_position
        return slice(start, start + self.n_features)


def design_matrix(
    left: IntArray,
    right: IntArray,
    n_models: int,
    *,
    value: float = 1.0,
    reference: int | None = None,
    n_position: int = 0,
    features: FloatArray | None = None,
    sided: npt.NDArray[np.bool_] | None = None,
) -> sp.csr_matrix:
    """Sparse design of the linear predictor: ``+value`` at the left model's column, ``-value`` at the
    right's, then position columns (one common, or one per left model) and the style covariates.

    Parameters
    ----------
    left, right : int arrays, shape (n_rows,)
    n_models : int
    value : float
        The entry of a model column (``ln 10`` gives scikit-learn coefficients in log10 units).
    reference : int, optional
        A model whose column is dropped (its strength held at 0); all models have one when None.
    n_position : 0, 1 or ``n_models``
    features : array, shape (n_rows, n_features), optional
    sided : bool array, shape (n_rows,), optional
        Rows whose left side is known; the others get 0 in the position columns (all rows when None).

    Returns
    -------
    scipy.sparse.csr_matrix, shape (n_rows, model columns + n_position + n_features)
    """
    n_rows = left.shape[0]
    rows = np.arange(n_rows)
    n_cols_models = n_models if reference is None else n_models - 1
    parts_r: list[IntArray] = []
    parts_c: list[IntArray] = []
    parts_v: list[FloatArray] = []
    for side, sign in ((left, value), (right, -value)):
        mask = np.ones(n_rows, dtype=bool) if reference is None else side != reference
        col = (
            side[mask] if reference is None else np.where(side[mask] > reference, side[mask] - 1, side[mask])
        )
        parts_r.append(rows[mask])
        parts_c.append(col)
        parts_v.append(np.full(int(mask.sum()), sign))
    known = np.ones(n_rows, dtype=bool) if sided is None else np.asarray(sided, dtype=bool)
    if n_position == 1:
        parts_r.append(rows[known])
        parts_c.append(np.full(int(known.sum()), n_cols_models, dtype=np.int64))
        parts_v.append(np.ones(int(known.sum())))
    elif n_position > 1:
        parts_r.append(rows[known])
        parts_c.append(n_cols_models + left[known])
        parts_v.append(np.ones(int(known.sum())))
    feats = np.zeros((n_rows, 0)) if features is None else features
    start = n_cols_models + n_position
    for k in range(feats.shape[1]):
        parts_r.append(rows)
        parts_c.append(np.full(n_rows, start + k, dtype=np.int64))
        parts_v.append(feats[:, k])
    return sp.csr_matrix(
        (np.concatenate(parts_v), (np.concatenate(parts_r), np.concatenate(parts_c))),
        shape=(n_rows, start + feats.shape[1]),
    )


def davidson_row_terms(u: FloatArray, sign: FloatArray, is_tie: FloatArray, theta: float | None) -> RowTerms:
    """Per-row Davidson log-likelihood in the linear predictor ``u`` and ``t = log nu``, with its first and
    second derivatives: ``(ll, l_u, l_t, l_uu, l_ut, l_tt)``.

    ``sign`` is +1 for a left win, -1 for a right win and 0 for a tie; ``is_tie`` is 1 for a tie. With
    ``theta`` None the ties score half a win (plain Bradley-Terry) and the ``t`` derivatives are 0. Every
    model that puts a Davidson likelihood on a linear predictor (this engine, the rater-ability model of
    :mod:`leaderboard.quality.rater_ability`) takes its pieces from here.
    """
    h = 0.5 * u
    pair = np.logaddexp(h, -h)
    if theta is not None:
        log_d = np.logaddexp(pair, theta)
        pt = np.exp(theta - log_d)
    else:
        log_d = pair
        pt = np.zeros_like(h)
    pw = np.exp(h - log_d)
    pl = np.exp(-h - log_d)
    diff = pw - pl
    ll = sign * h + is_tie * (0.0 if theta is None else theta) - log_d
    return (
        ll,
        0.5 * (sign - diff),
        is_tie - pt,
        -0.25 * (pw + pl - diff**2),
        0.5 * pt * diff,
        pt**2 - pt,
    )


class Objective:
    """Negative penalised log-likelihood per unit weight, with its gradient, Hessian and per-vote scores.

    ``nat_per_point`` converts rating points to natural-log strength (``ln(base) / scale``), so the
    prior's standard deviation can be given in rating points.
    """

    def __init__(self, cells: Cells, spec: BTSpec, layout: Layout, *, nat_per_point: float) -> None:
        self.cells = cells
        self.layout = layout
        self.X = design_matrix(
            cells.left,
            cells.right,
            layout.n_models,
            reference=layout.n_models - 1,
            n_position=layout.n_position,
            features=cells.features if layout.n_features else None,
            sided=cells.sided,
        )
        self.sign = np.where(cells.outcome == Outcome.MODEL_A, 1.0, 0.0) - np.where(
            cells.outcome == Outcome.MODEL_B, 1.0, 0.0
        )
        self.is_tie = (cells.outcome == Outcome.TIE).astype(np.float64)
        self.theta_fixed = None if spec.nu_fixed is None else math.log(spec.nu_fixed)
        self.link = spec.link
        self.set_count(cells.count)
        n = layout.n_models
        if spec.prior_sd is not None:
            lam = 1.0 / (spec.prior_sd * nat_per_point) ** 2
            centring = np.eye(n) - 1.0 / n
            self.prior = lam * centring[: n - 1, : n - 1]
        else:
            self.prior = np.zeros((n - 1, n - 1))

    def set_count(self, count: FloatArray) -> None:
        self.cw = count * self.cells.weight
        self.total = float(self.cw.sum())
        if self.total <= 0:
            raise ValueError("no votes to fit")

    def _theta(self, x: FloatArray) -> float | None:
        """The log tie parameter (fitted, fixed, or None for half-win ties)."""
        return float(x[-1]) if self.layout.has_nu else self.theta_fixed

    def row_terms(self, x: FloatArray) -> RowTerms:
        """Per-row log-likelihood and its derivatives in the linear predictor ``u`` and the log tie
        parameter ``t``: ``(ll, l_u, l_t, l_uu, l_ut, l_tt)`` (the probit link's in
        :mod:`leaderboard.bt.probit`)."""
        u = self.X @ x[: self.layout.n_linear]
        theta = self._theta(x)
        if self.link == "probit":
            return probit_row_terms(u, self.sign, self.is_tie, theta)
        return davidson_row_terms(u, self.sign, self.is_tie, theta)

    def _penalty(self, x: FloatArray) -> tuple[float, FloatArray]:
        beta = x[: self.layout.n_models - 1]
        grad = self.prior @ beta
        return 0.5 * float(beta @ grad), grad

    def scores(self, x: FloatArray) -> FloatArray:
        """Per-vote score vectors (gradient of one vote's log-likelihood), one row per cell."""
        _, l_u, l_t, _, _, _ = self.row_terms(x)
        lin: FloatArray = self.X.multiply(l_u[:, None]).toarray()
        if self.layout.has_nu:
            out: FloatArray = np.column_stack([lin, l_t])
            return out
        return lin

    def value_grad(self, x: FloatArray) -> tuple[float, FloatArray]:
        ll_rows, l_u, l_t, _, _, _ = self.row_terms(x)
        ll = float(self.cw @ ll_rows)
        grad = np.empty(self.layout.size)
        grad[: self.layout.n_linear] = self.X.T @ (l_u * self.cw)
        if self.layout.has_nu:
            grad[-1] = float(self.cw @ l_t)
        pen, pen_grad = self._penalty(x)
        grad[: self.layout.n_models - 1] -= pen_grad
        return (-ll + pen) / self.total, -grad / self.total

    def hess(self, x: FloatArray) -> FloatArray:
        """Hessian of the objective (the observed information per unit weight, plus the prior)."""
        _, _, _, l_uu, l_ut, l_tt = self.row_terms(x)
        out = np.empty((self.layout.size, self.layout.size))
        n_lin = self.layout.n_linear
        out[:n_lin, :n_lin] = -(self.X.T @ self.X.multiply((l_uu * self.cw)[:, None])).toarray()
        if self.layout.has_nu:
            cross = -(self.X.T @ (l_ut * self.cw))
            out[:n_lin, -1] = cross
            out[-1, :n_lin] = cross
            out[-1, -1] = -float(self.cw @ l_tt)
        nb = self.layout.n_models - 1
        out[:nb, :nb] += self.prior
        return out / self.total

    def loglik(self, x: FloatArray) -> float:
        return float(self.cw @ self.row_terms(x)[0])

    def meat(self, x: FloatArray) -> FloatArray:
        """Sum over votes of the outer products of their weighted scores, ``sum_v w_v^2 g g^T``: per row
        ``count (weight^2 + spread) g g^T``, the squared weights of its own votes, not of their mean."""
        scores = self.scores(x)
        cells = self.cells
        w2 = (
            cells.count * cells.weight**2
            if cells.spread is None
            else cells.count * (cells.weight**2 + cells.spread)
        )
        out: FloatArray = scores.T @ (scores * w2[:, None])
        return out


def maximise(
    objective: Objective, x0: FloatArray, *, tol: float, max_iter: int
) -> tuple[FloatArray, int, str]:
    """Maximise the (penalised) likelihood from ``x0`` with the package's Newton trust-region driver
    (:func:`leaderboard.bt.solver.newton_trust_region`, scipy's ``trust-exact``).

    Parameters
    ----------
    objective : Objective
    x0 : array
        Start, in the optimiser's parametrisation (a warm start for bootstrap rounds).
    tol : float
        Gradient tolerance of the per-vote objective.
    max_iter : int

    Returns
    -------
    x : the optimum found
    n_iter : iterations used
    message : empty on success, else the optimiser's reason for stopping
    """
    solution = newton_trust_region(objective.value_grad, objective.hess, x0, tol=tol, max_iter=max_iter)
    return solution.x, solution.n_iter, solution.message
