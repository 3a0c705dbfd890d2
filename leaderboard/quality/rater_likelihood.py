"""The rater-ability model's likelihood: the Davidson linear predictor of each vote scaled by its
annotator's discrimination, with its analytic gradient, sparse Hessian and per-vote scores, and its fit
through the package's Newton trust-region driver.

A vote by annotator ``k`` has the linear predictor ``eta = a_k d``, ``d = theta_left - theta_right +
(alpha + b_k) * sided``; the likelihood's pieces in ``eta`` and ``log nu`` are
:func:`leaderboard.bt.cells.davidson_row_terms`. Every sum over votes is a ``bincount`` or a sparse
product, never a Python loop.

The fit runs through :func:`leaderboard.bt.solver.newton_trust_region`, the Bradley-Terry engine's
driver, with the Hessian sparse and the quadratic model solved by conjugate gradients rather than
factorised (``sparse=True``): the parameters grow with the annotators (a discrimination each, and a side
offset each with ``position_sd``), thousands for a board's voters, where a dense Hessian is ``p^2``
numbers and its factorisation ``p^3`` work per step. An annotator's parameters touch only the shared
ones (strengths, position, ties) and each other, so the Hessian has about ``models^2 + 4 annotators x
models`` non-zeros and a product with it costs that. The variables are scaled by the Hessian's diagonal
(a strength seen in 40,000 votes and a discrimination seen in 40 differ in curvature a thousandfold), so
the trust region is an ellipsoid fitted to the curvature and the conjugate gradients converge in a few
steps. The likelihood is not concave (``a_k`` multiplies ``d``); the trust region steps downhill where
the Hessian is indefinite.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from leaderboard.battles import Battles
from leaderboard.bt.cells import davidson_row_terms
from leaderboard.bt.solver import newton_trust_region
from leaderboard.data import Outcome

__all__ = ["RaterProblem", "maximise_posterior"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Where a fit also stops, as settled, when its steps are refused at a smaller scaled gradient than this
#: (per unit weight): the decrease a step would bring is lost in the rounding of the objective
#: (:func:`leaderboard.bt.solver.newton_trust_region`).
_SETTLED_GTOL = 1e-6
#: The largest scaled gradient (per unit weight) a fit that stopped short of its tolerance may leave and
#: still count: a fit stops short where the decrease its next step promises is lost in the rounding of
#: the objective (a prior a billion times steeper than the votes, say), which is its optimum to the
#: precision of the arithmetic; beyond this the fit raises.
_STOPPED_GRADIENT = 1e-5


class RaterProblem:
    """The votes in the optimiser's terms, and the objective with its gradient, Hessian and scores.

    Parameter vector: strengths of all models but the last (held at 0), the position term when some vote
    knows its side, then (with ``position_sd``) one position offset ``b_k`` per annotator, ``log nu``
    when some vote is a tie, then ``log a_k`` per annotator. The offsets enter the linear predictor like
    the common term, so they are columns of ``D`` and every derivative below covers them unchanged; only
    their prior (precision ``lam_b``) is added.
    """

    def __init__(
        self,
        battles: Battles,
        codes: IntArray,
        n_annotators: int,
        prior_sd: float,
        position_sd: float | None = None,
    ) -> None:
        m = len(battles.models)
        self.m = m
        self.left = battles.model_a
        self.right = battles.model_b
        outcome = battles.outcome.astype(np.int64)
        self.sign = (outcome == Outcome.MODEL_A).astype(np.float64) - (outcome == Outcome.MODEL_B)
        self.is_tie = ((outcome == Outcome.TIE) | (outcome == Outcome.BOTHBAD)).astype(np.float64)
        self.w = np.ones(len(battles)) if battles.weight is None else np.asarray(battles.weight, np.float64)
        self.total = float(self.w.sum())
        self.side = np.ones(len(battles)) if battles.sided is None else battles.sided.astype(np.float64)
        self.has_position = bool(np.any(self.side > 0))
        self.has_nu = bool(np.any(self.is_tie > 0))
        self.codes = codes  # dense annotator index per vote, -1 for a vote counted with a = 1
        self.rated = codes >= 0
        self.k = n_annotators
        self.lam = 1.0 / prior_sd**2
        self.has_offsets = position_sd is not None and self.has_position and n_annotators > 0
        self.lam_b = 0.0 if position_sd is None else 1.0 / position_sd**2
        self.i_pos = m - 1
        self.i_b = self.i_pos + int(self.has_position)
        self.n_b = n_annotators if self.has_offsets else 0
        self.i_nu = self.i_b + self.n_b
        self.i_a = self.i_nu + int(self.has_nu)
        self.size = self.i_a + n_annotators
        self.n_linear = self.i_nu  # strengths, position and offsets: what eta is linear in
        rows = np.arange(len(battles))
        # d -> the linear predictor before the discrimination: strengths (last model dropped) and position
        parts = [(self.left, 1.0), (self.right, -1.0)]
        r = np.concatenate([rows[side < m - 1] for side, _ in parts])
        c = np.concatenate([side[side < m - 1] for side, _ in parts])
        v = np.concatenate([np.full(int((side < m - 1).sum()), s) for side, s in parts])
        if self.has_position:
            r, c, v = (
                np.concatenate([r, rows]),
                np.concatenate([c, np.full(rows.size, self.i_pos)]),
                np.concatenate([v, self.side]),
            )
        if self.has_offsets:
            sided = self.rated & (self.side != 0)
            r, c, v = (
                np.concatenate([r, rows[sided]]),
                np.concatenate([c, self.i_b + codes[sided]]),
                np.concatenate([v, self.side[sided]]),
            )
        self.D = sp.csr_matrix((v, (r, c)), shape=(len(battles), self.n_linear))
        self.A = sp.csr_matrix(
            (np.ones(int(self.rated.sum())), (rows[self.rated], codes[self.rated])),
            shape=(len(battles), max(n_annotators, 0)),
        )
        self.Dt = sp.csr_matrix(self.D.T)  # transposed once: the Hessian's products run over votes
        self.At = sp.csr_matrix(self.A.T)

    def unpack(self, x: FloatArray) -> tuple[FloatArray, float | None, FloatArray]:
        """(d per vote, log nu, a per vote)."""
        d = self.D @ x[: self.n_linear]
        t = float(x[self.i_nu]) if self.has_nu else None
        a = np.ones(d.shape[0])
        a[self.rated] = np.exp(x[self.i_a + self.codes[self.rated]])
        return d, t, a

    def terms(self, x: FloatArray) -> tuple[FloatArray, FloatArray, float | None, tuple[FloatArray, ...]]:
        d, t, a = self.unpack(x)
        return d, a, t, davidson_row_terms(a * d, self.sign, self.is_tie, t)

    def value_grad(self, x: FloatArray) -> tuple[float, FloatArray]:
        d, a, _, (ll, l_u, l_t, _, _, _) = self.terms(x)
        grad = np.zeros(self.size)
        wl = self.w * l_u
        grad[: self.n_linear] = self.Dt @ (wl * a)
        if self.has_nu:
            grad[self.i_nu] = float(self.w @ l_t)
        log_a = x[self.i_a :]
        grad[self.i_a :] = self.At @ (wl * a * d) - self.lam * log_a
        b = x[self.i_b : self.i_nu]
        grad[self.i_b : self.i_nu] -= self.lam_b * b
        value = -float(self.w @ ll) + 0.5 * self.lam * float(log_a @ log_a) + 0.5 * self.lam_b * float(b @ b)
        return value / self.total, -grad / self.total

    def jacobian(
        self, x: FloatArray
    ) -> tuple[sp.csr_matrix, FloatArray, FloatArray, float | None, tuple[FloatArray, ...]]:
        """Per-vote derivative of ``eta`` in the parameters (the ``log nu`` column is 0), with the terms."""
        d, a, t, terms = self.terms(x)
        eta = a * d
        blocks = [sp.diags(a) @ self.D]
        if self.has_nu:
            blocks.append(sp.csr_matrix((d.shape[0], 1)))
        blocks.append(sp.diags(eta) @ self.A)
        return sp.hstack(blocks).tocsr(), d, a, t, terms

    def sparse_hessian(self, x: FloatArray) -> sp.csr_matrix:
        """Hessian of the negative log-posterior (not per unit weight), sparse, block by block.

        With ``c = -w l_uu`` per vote (the Gauss-Newton weight) and ``eta = a d``: the linear block
        ``D^T diag(c a^2) D``; the discriminations against it ``A^T diag(c a eta - w l_u a) D`` (the
        second term is ``eta``'s own second derivative, ``d2 eta / d log a_k d(linear) = a_k dD``); the
        discriminations' diagonal ``A^T (c eta^2 - w l_u eta)`` (an annotator's votes touch only its own
        ``a_k``; ``d2 eta / d log a_k^2 = eta``); the log-nu row and column from ``l_ut`` and ``l_tt``;
        and the priors. Made from the votes in a few sparse products, without the per-vote Jacobian.
        """
        d, a, _, (_, l_u, _, l_uu, l_ut, l_tt) = self.terms(x)
        eta = a * d
        c = -self.w * l_uu
        wl = self.w * l_u
        rows: list[IntArray] = []
        cols: list[IntArray] = []
        vals: list[FloatArray] = []

        def place(block: sp.coo_matrix, row0: int, col0: int, *, mirror: bool = False) -> None:
            rows.append(block.row + row0)
            cols.append(block.col + col0)
            vals.append(block.data)
            if mirror:
                rows.append(block.col + col0)
                cols.append(block.row + row0)
                vals.append(block.data)

        place(sp.coo_matrix(self.Dt @ (sp.diags(c * a * a) @ self.D)), 0, 0)
        place(sp.coo_matrix(self.At @ (sp.diags(c * a * eta - wl * a) @ self.D)), self.i_a, 0, mirror=True)
        diag = np.zeros(self.size)
        diag[self.i_a :] = self.At @ (c * eta * eta - wl * eta) + self.lam
        diag[self.i_b : self.i_nu] += self.lam_b
        if self.has_nu:
            diag[self.i_nu] = -float(self.w @ l_tt)
            nu_col = np.zeros(self.size)
            nu_col[: self.n_linear] = -(self.Dt @ (self.w * l_ut * a))
            nu_col[self.i_a :] = -(self.At @ (self.w * l_ut * eta))
            place(sp.coo_matrix(nu_col[:, None]), 0, self.i_nu, mirror=True)
        place(sp.coo_matrix(sp.diags(diag)), 0, 0)
        n = self.size
        out: sp.csr_matrix = sp.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)
        )
        return out

    def hessian(self, x: FloatArray) -> FloatArray:
        """:meth:`sparse_hessian` as a dense array (for the sandwich of a fit with few parameters)."""
        out: FloatArray = self.sparse_hessian(x).toarray()
        return out

    def curvature_scale(self, x: FloatArray) -> FloatArray:
        """A step size per parameter, ``1 / sqrt`` of the Hessian's diagonal per unit weight: a strength
        seen in 40,000 votes and a discrimination seen in 40 differ in curvature a thousandfold: scaled by
        it, the trust region fits the curvature and the conjugate gradients need few steps (a diagonal
        preconditioner)."""
        scale: FloatArray = 1.0 / np.sqrt(np.maximum(self.hessian_diagonal(x) / self.total, 1e-8))
        return scale

    def hessian_diagonal(self, x: FloatArray) -> FloatArray:
        """The Hessian's diagonal without a dense matrix: exact for the strengths, position and offsets
        (``eta`` is linear in them), the Gauss-Newton part for ``log a_k``."""
        d, a, _, (_, l_u, _, l_uu, _, l_tt) = self.terms(x)
        eta = a * d
        diag = np.empty(self.size)
        diag[: self.n_linear] = self.D.multiply(self.D).T @ (-self.w * l_uu * a**2)
        if self.has_nu:
            diag[self.i_nu] = -float(self.w @ l_tt)
        diag[self.i_a :] = self.A.T @ (-self.w * l_uu * eta**2) + self.lam
        diag[self.i_b : self.i_nu] += self.lam_b
        return diag

    def meat(self, x: FloatArray) -> FloatArray:
        """Sum over votes of ``w^2 g g^T`` (per-vote scores of the log-likelihood)."""
        jac, _, _, _, (_, l_u, l_t, _, _, _) = self.jacobian(x)
        scores = sp.diags(l_u) @ jac
        if self.has_nu:  # the jacobian's log-nu column is 0: the scores' is l_t
            n = l_t.shape[0]
            scores = scores + sp.csr_matrix((l_t, (np.arange(n), np.full(n, self.i_nu))), shape=scores.shape)
        out: FloatArray = (scores.T @ sp.diags(self.w**2) @ scores).toarray()
        return out


def maximise_posterior(
    problem: RaterProblem, x0: FloatArray, max_iter: int, tol: float
) -> tuple[FloatArray, int]:
    """The posterior mode from ``x0`` and the trust-region iterations it took: Newton's method in a
    trust region (:func:`leaderboard.bt.solver.newton_trust_region`, sparse) on the variables scaled by
    :meth:`RaterProblem.curvature_scale` at ``x0``; ``tol`` bounds the scaled gradient per unit weight.

    Raises
    ------
    RuntimeError
        When the fit stops short of the tolerance with a gradient still above ``_STOPPED_GRADIENT``.
    """
    scale = problem.curvature_scale(x0)
    rescale = sp.diags(scale)

    def value_grad(z: FloatArray) -> tuple[float, FloatArray]:
        value, grad = problem.value_grad(scale * z)
        return value, scale * grad

    def hessian(z: FloatArray) -> sp.csr_matrix:
        out: sp.csr_matrix = (
            sp.csr_matrix(rescale @ problem.sparse_hessian(scale * z) @ rescale) / problem.total
        )
        return out

    solution = newton_trust_region(
        value_grad,
        hessian,
        x0 / scale,
        tol=tol,
        max_iter=max_iter,
        sparse=True,
        settled_gtol=max(tol, _SETTLED_GTOL),
    )
    if not solution.converged and float(np.max(np.abs(value_grad(solution.x)[1]))) > _STOPPED_GRADIENT:
        raise RuntimeError(f"rater-ability fit did not converge: {solution.message}")
    return scale * solution.x, solution.n_iter
