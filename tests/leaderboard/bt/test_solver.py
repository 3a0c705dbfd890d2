"""The one Newton trust-region driver: dense and sparse Hessians reach the same optimum, an overflow far
from it is refused rather than taken, a fit that cannot reach its tolerance says so, and one that stalls
in rounding at the optimum stops there as settled when asked to."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from leaderboard.bt.solver import newton_trust_region

FloatArray = npt.NDArray[np.float64]

#: A logistic log-loss on fixed rows: smooth, convex, with a known optimum found by many Newton steps.
ROWS = np.random.default_rng(0).normal(0.0, 1.0, (400, 6))
TARGET = (np.random.default_rng(1).random(400) < 1 / (1 + np.exp(-ROWS @ np.linspace(-1, 1, 6)))).astype(
    float
)
TOL = 1e-9


def value_grad(x: FloatArray) -> tuple[float, FloatArray]:
    d = ROWS @ x
    loss = TARGET * np.logaddexp(0.0, -d) + (1.0 - TARGET) * np.logaddexp(0.0, d)
    grad: FloatArray = ROWS.T @ (1 / (1 + np.exp(-d)) - TARGET) / len(d)
    return float(loss.mean()), grad


def hessian(x: FloatArray) -> FloatArray:
    p = 1 / (1 + np.exp(-(ROWS @ x)))
    out: FloatArray = (ROWS * (p * (1 - p))[:, None]).T @ ROWS / len(p)
    return out


def test_dense_and_sparse_reach_the_same_optimum() -> None:
    dense = newton_trust_region(value_grad, hessian, np.zeros(6), tol=TOL, max_iter=100)
    sparse = newton_trust_region(
        value_grad, lambda x: sp.csr_matrix(hessian(x)), np.zeros(6), tol=TOL, max_iter=100, sparse=True
    )
    assert dense.converged and sparse.converged and dense.message == ""
    assert np.linalg.norm(value_grad(dense.x)[1]) < TOL
    np.testing.assert_allclose(sparse.x, dense.x, atol=1e-8)


def test_a_step_into_overflow_is_refused_not_taken() -> None:
    """``sqrt(1 + x^2)`` from ``x = 10``: its curvature falls away from 0, so Newton's step overshoots to the
    far side, where this objective is not finite (an overflow, say). The step is refused, the region
    shrinks, and the fit still converges to 0."""
    overflowed = []

    def fragile(x: FloatArray) -> tuple[float, FloatArray]:
        grad: FloatArray = x / np.sqrt(1 + x**2)
        if x[0] < -0.5:
            overflowed.append(float(x[0]))
            return float("nan"), grad
        return float(np.sqrt(1 + x[0] ** 2)), grad

    def curvature(x: FloatArray) -> FloatArray:
        out: FloatArray = np.atleast_2d((1 + x**2) ** -1.5)
        return out

    solution = newton_trust_region(fragile, curvature, np.array([10.0]), tol=TOL, max_iter=100)
    assert overflowed, "some step went past the finite region"
    assert solution.converged and abs(float(solution.x[0])) < 1e-6


def test_a_fit_that_cannot_reach_its_tolerance_says_so() -> None:
    short = newton_trust_region(value_grad, hessian, np.zeros(6), tol=TOL, max_iter=1)
    assert not short.converged and short.message and short.n_iter == 1


def test_a_tolerance_below_rounding_stalls_unless_settling_is_allowed() -> None:
    """``tol`` 1e-20 is below what the objective's rounding can verify: without ``settled_gtol`` the fit
    ends refused (not converged); with it, it stops at the same optimum as settled."""
    stalled = newton_trust_region(value_grad, hessian, np.zeros(6), tol=1e-20, max_iter=100)
    settled = newton_trust_region(
        value_grad, hessian, np.zeros(6), tol=1e-20, max_iter=100, settled_gtol=1e-6
    )
    assert not stalled.converged
    assert settled.converged and settled.n_iter <= stalled.n_iter
    reference = newton_trust_region(value_grad, hessian, np.zeros(6), tol=TOL, max_iter=100)
    np.testing.assert_allclose(settled.x, reference.x, atol=1e-8)
