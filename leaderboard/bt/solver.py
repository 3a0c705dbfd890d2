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

__all__ = ["SETTLED_REFUSALS", "NewtonSolution", "newton_trust_region"]

FloatArray = npt.NDArray[np.float64]

#: Steps refused in a row at a point whose gradient is below ``settled_gtol`` before a fit stops there
#: (:func:`newton_trust_region`): one refusal also happens where the region was simply too wide.
SETTLED_REFUSALS = 2


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
    settled_gtol: float | None = None,
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
    settled_gtol : float, optional
        Also stop, converged, once :data:`SETTLED_REFUSALS` steps running are refused, or a step's
        promised decrease is not positive in floating point, at a point whose gradient norm is below
        this: so close to the optimum the decrease a step promises (about ``|g|^2 / 2`` over the
        curvature) is lost in the rounding of the objective, the comparison of promised and actual
        decrease is noise, and every further step would be refused until the region collapsed (a dozen
        wasted evaluations). None: stop only at ``tol``.

    Returns
    -------
    NewtonSolution
    """
    norms: dict[bytes, float] = {}  # the gradient norm at the last few points evaluated

    def guarded(x: FloatArray) -> tuple[float, FloatArray]:
        value, grad = value_grad(x)
        if settled_gtol is not None:
            if len(norms) > 2 * SETTLED_REFUSALS:
                norms.pop(next(iter(norms)))
            norms[x.tobytes()] = float(np.linalg.norm(grad))
        return (value if math.isfinite(value) else math.inf), grad

    refused = [0]
    last: list[bytes] = []

    def settled(intermediate_result: optimize.OptimizeResult) -> None:
        """Stop where steps are refused at a point whose gradient is below ``settled_gtol``."""
        key = np.asarray(intermediate_result.x, dtype=np.float64).tobytes()
        refused[0] = refused[0] + 1 if last and last[0] == key else 0
        last[:] = [key]
        if refused[0] >= SETTLED_REFUSALS and norms.get(key, math.inf) <= float(settled_gtol or 0.0):
            raise StopIteration

    callback = settled if settled_gtol is not None else None
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

        result = optimize.minimize(
            guarded, x0, jac=True, hessp=times, method="trust-ncg", options=options, callback=callback
        )
    else:
        result = optimize.minimize(
            guarded, x0, jac=True, hess=hessian, method="trust-exact", options=options, callback=callback
        )
    x = np.asarray(result.x, dtype=np.float64)
    # stopped by ``settled``, or refused a step whose promised decrease was not even positive in floating
    # point (scipy's "bad approximation"), at a gradient below settled_gtol: the optimum, to rounding
    settled_here = settled_gtol is not None and norms.get(x.tobytes(), math.inf) <= settled_gtol
    message = "" if result.success or (settled_here and result.status in (2, 99)) else str(result.message)
    return NewtonSolution(x, int(result.nit), message)
