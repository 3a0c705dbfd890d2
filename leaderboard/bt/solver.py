"""The one Newton trust-region driver of the package: every likelihood fitted by Newton's method runs here.

The Bradley-Terry engine's cells (:mod:`leaderboard.bt.cells`), the composite of humans and judges
(:mod:`leaderboard.composite.likelihood`) and the rater-ability model
(:mod:`leaderboard.quality.rater_likelihood`) each hand :func:`newton_trust_region` their objective (a
negative log posterior per unit weight), its analytic gradient and its Hessian, and get the posterior
mode. A trust region rather than a line search, because two of these likelihoods are not concave
everywhere: a discrimination multiplies the ratings (``eta = a u``), so far from the optimum the Hessian
can be indefinite, and the trust region still steps downhill where a plain Newton step would not. Near
the optimum the step is the Newton step, so convergence is quadratic.

One outer loop (scipy's trust-region iteration: accept a step when the objective falls by enough of what
the quadratic model predicted, and widen or narrow the region by that ratio), two ways to solve the
quadratic model inside the region, chosen by the Hessian's form:

- dense (a few hundred parameters: the engine's cells, the composite): the exact solution of Moré and
  Sorensen (scipy's ``trust-exact``), a few Cholesky factorisations per step;
- sparse (one parameter per annotator: thousands, and an annotator's parameters touch only the shared
  ones): Steihaug's truncated conjugate gradients (scipy's ``trust-ncg``), which only multiply by the
  Hessian, so a step costs its non-zeros rather than a dense factorisation.

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
import scipy.sparse as sp
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
    hessian: Callable[[FloatArray], FloatArray] | Callable[[FloatArray], sp.sparray | sp.spmatrix],
    x0: FloatArray,
    *,
    tol: float,
    max_iter: int,
    sparse: bool = False,
) -> NewtonSolution:
    """Minimise a smooth objective from ``x0`` by Newton's method in a trust region.

    Parameters
    ----------
    value_grad : callable
        ``x -> (f(x), grad f(x))``: the objective to minimise (a negative log posterior, per unit weight
        so that ``tol`` means the same for a hundred votes as for millions) and its gradient. A value
        that is not finite (an overflow far from the optimum) counts as ``+inf``: the step is refused and
        the trust region shrinks.
    hessian : callable
        ``x -> Hessian of f at x`` (symmetric; it may be indefinite away from the optimum): a dense array,
        or a scipy sparse matrix with ``sparse``.
    x0 : array
        The start (a warm start for a refit or a bootstrap round).
    tol : float
        Stop when the gradient's Euclidean norm is below this.
    max_iter : int
    sparse : bool
        The Hessian is sparse: the quadratic model is solved by truncated conjugate gradients (Steihaug),
        with the Hessian made once per point and multiplied by as often as the model needs; otherwise
        exactly (Moré and Sorensen).

    Returns
    -------
    NewtonSolution
    """

    def guarded(x: FloatArray) -> tuple[float, FloatArray]:
        value, grad = value_grad(x)
        return (value if math.isfinite(value) else math.inf), grad

    options = {"gtol": tol, "maxiter": max_iter}
    if sparse:
        made: dict[bytes, sp.csr_matrix] = {}

        def times(x: FloatArray, p: FloatArray) -> FloatArray:
            key = x.tobytes()
            if key not in made:  # the Hessian at a new point: made once, the old one dropped
                made.clear()
                made[key] = sp.csr_matrix(hessian(x))
            out: FloatArray = np.asarray(made[key] @ p, dtype=np.float64)
            return out

        result = optimize.minimize(guarded, x0, jac=True, hessp=times, method="trust-ncg", options=options)
    else:
        result = optimize.minimize(guarded, x0, jac=True, hess=hessian, method="trust-exact", options=options)
    message = "" if result.success else str(result.message)
    return NewtonSolution(np.asarray(result.x, dtype=np.float64), int(result.nit), message)
