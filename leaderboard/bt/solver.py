"""The one Newton trust-region driver of the package: every likelihood fitted by Newton's method runs here.

The Bradley-Terry engine's cells (:mod:`leaderboard.bt.cells`), the composite of humans and judges
(:mod:`leaderboard.composite.likelihood`) and the rater-ability model
(:mod:`leaderboard.quality.rater_ability`) each hand :func:`newton_trust_region` their objective (a
negative log posterior per unit weight), its analytic gradient and its Hessian; the driver is scipy's
``trust-exact`` (Moré and Sorensen's exact trust-region subproblem on the full Hessian). A trust region
rather than a line search, because two of these likelihoods are not concave everywhere: a
discrimination multiplies the ratings (``eta = a u``), so far from the optimum the Hessian can be
indefinite, and the trust region still steps uphill where a plain Newton step would not. Near the
optimum the step is the Newton step, so convergence is quadratic.

The plain Bradley-Terry likelihood on pair statistics keeps its batched solver
(:func:`leaderboard.bt.newton.solve_bt_batch`): it solves a block of bootstrap rounds at once with a
fixed Hessian, which no general driver does; it is the same Newton iteration on a concave likelihood.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import optimize

__all__ = ["NewtonSolution", "newton_trust_region"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class NewtonSolution:
    """Where :func:`newton_trust_region` stopped.

    Attributes
    ----------
    x : the point reached
    n_iter : trust-region iterations used
    message : empty when the gradient fell below the tolerance, else why it stopped (the iteration
        limit, a quadratic model that no longer predicts a decrease, a failed factorisation)
    """

    x: FloatArray
    n_iter: int
    message: str

    @property
    def converged(self) -> bool:
        return not self.message


def newton_trust_region(
    value_grad: Callable[[FloatArray], tuple[float, FloatArray]],
    hessian: Callable[[FloatArray], FloatArray],
    x0: FloatArray,
    *,
    tol: float,
    max_iter: int,
) -> NewtonSolution:
    """Minimise a smooth objective from ``x0`` by Newton's method in a trust region (scipy's
    ``trust-exact``).

    Parameters
    ----------
    value_grad : callable
        ``x -> (f(x), grad f(x))``: the objective to minimise (a negative log posterior, per unit weight
        so that ``tol`` means the same for a hundred votes as for millions) and its gradient. A value
        that is not finite (an overflow far from the optimum) counts as ``+inf``: the step is refused and
        the trust region shrinks.
    hessian : callable
        ``x -> Hessian of f at x`` (dense, symmetric; it may be indefinite away from the optimum).
    x0 : array
        The start (a warm start for a refit or a bootstrap round).
    tol : float
        Stop when the gradient's Euclidean norm is below this.
    max_iter : int

    Returns
    -------
    NewtonSolution
    """

    def guarded(x: FloatArray) -> tuple[float, FloatArray]:
        value, grad = value_grad(x)
        return (value if math.isfinite(value) else math.inf), grad

    result = optimize.minimize(
        guarded,
        x0,
        jac=True,
        hess=hessian,
        method="trust-exact",
        options={"gtol": tol, "maxiter": max_iter},
    )
    message = "" if result.success else str(result.message)
    return NewtonSolution(np.asarray(result.x, dtype=np.float64), int(result.nit), message)
