"""Plain Bradley-Terry on pair statistics: a batched Newton solver and the pairwise curvature.

With a tie scored as half a win, the plain likelihood depends on the votes only through
:class:`~leaderboard.data.PairStats`, so everything here costs O(pairs). :func:`solve_bt_batch`
maximises many such likelihoods that share one pair list at once: it polishes the scikit-learn optimum of
:func:`leaderboard.bt.fit.fit_bt` to machine precision and refits a block of bootstrap rounds in one go.
:func:`pair_curvature` gives the Fisher information and the sandwich's meat of a plain fit.

Convention: ``theta`` is the natural-log strength, rows summing to zero.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from leaderboard.data import PairStats

__all__ = ["PairSystem", "pair_curvature", "pair_log_likelihood", "solve_bt_batch"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Largest Newton step (natural-log units) taken at once; keeps far starts from overshooting.
_MAX_STEP = 2.0


class PairSystem:
    """The pair list of a problem, with the index arrays a batched solver needs (made once and passed to
    :func:`solve_bt_batch` by a caller that solves many problems on the same pairs)."""

    def __init__(self, lo: IntArray, hi: IntArray, n_models: int) -> None:
        self.lo = lo
        self.hi = hi
        self.m = n_models
        n_pairs = len(lo)
        rows = np.concatenate([lo, hi])
        cols = np.concatenate([np.arange(n_pairs), np.arange(n_pairs)])
        vals = np.concatenate([np.ones(n_pairs), -np.ones(n_pairs)])
        # incidence (models x pairs): +1 at lo, -1 at hi
        self.incidence = sp.csr_matrix((vals, (rows, cols)), shape=(n_models, n_pairs))
        m = n_models
        self.lap_index = np.concatenate([lo * m + lo, hi * m + hi, lo * m + hi, hi * m + lo])

    def gradient(self, theta: FloatArray, n: FloatArray, s: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Log-likelihood gradient (B x M) and the per-pair probabilities ``p`` (B x P)."""
        d = theta[:, self.lo] - theta[:, self.hi]
        p = _expit(d)
        r = s - n * p
        g = np.asarray(self.incidence @ r.T).T
        return g, p

    def gradient_t(self, theta_t: FloatArray, half_n_t: FloatArray, c_t: FloatArray) -> FloatArray:
        """Log-likelihood gradient in pair-major layout, theta (M x B) -> (M x B).

        With ``p = (1 + tanh(d / 2)) / 2`` the residual ``s - n p`` is ``c - (n / 2) tanh(d / 2)``
        where ``c = s - n / 2`` and ``n / 2`` (P x B) are computed once per solve; in place, so one
        (P x B) buffer serves the whole evaluation.
        """
        r = theta_t[self.lo]
        r -= theta_t[self.hi]
        r *= 0.5
        np.tanh(r, out=r)
        r *= half_n_t
        np.subtract(c_t, r, out=r)
        g: FloatArray = np.asarray(self.incidence @ r)
        return g

    def laplacian(self, w: FloatArray) -> FloatArray:
        """Weighted graph Laplacians, one per row of ``w`` (B x P) -> (B x M x M)."""
        b = w.shape[0]
        mm = self.m * self.m
        offsets = (np.arange(b) * mm)[:, None]
        index = (offsets + self.lap_index[None, :]).ravel()
        weights = np.concatenate([w, w, -w, -w], axis=1).ravel()
        out: FloatArray = np.bincount(index, weights=weights, minlength=b * mm).astype(np.float64)
        return out.reshape(b, self.m, self.m)


def _expit(x: FloatArray) -> FloatArray:
    out: FloatArray = 0.5 * (1.0 + np.tanh(0.5 * x))
    return out


def _log_likelihood(theta: FloatArray, pairs: PairSystem, n: FloatArray, s: FloatArray) -> FloatArray:
    d = theta[:, pairs.lo] - theta[:, pairs.hi]
    ll = -(s * np.logaddexp(0.0, -d) + (n - s) * np.logaddexp(0.0, d))
    out: FloatArray = ll.sum(axis=1)
    return out


def solve_bt_batch(
    lo: IntArray,
    hi: IntArray,
    n: FloatArray,
    s: FloatArray,
    *,
    n_models: int,
    theta0: FloatArray | None = None,
    fixed_hessian: FloatArray | None = None,
    fixed_inverse: FloatArray | None = None,
    ridge: float = 0.0,
    tol: float = 1e-10,
    max_iter: int = 100,
    max_fixed_iter: int = 30,
    system: PairSystem | None = None,
) -> tuple[FloatArray, BoolArray, int]:
    """Maximise B plain-BT log-likelihoods that share one pair list, all at once.

    Parameters
    ----------
    lo, hi : int arrays, shape (P,)
        The pairs.
    n, s : float arrays, shape (B, P)
        Battles per pair and the score of ``lo`` (wins plus half the ties), one row per problem.
    n_models : int
    theta0 : array, shape (M,) or (B, M), optional
        Warm start (natural-log strengths); zero by default.
    fixed_hessian : array, shape (M, M), optional
        A Laplacian close to every problem's Hessian (say the full data's): first iterate
        ``theta += (L0 + J)^-1 g`` with it, which costs one small matrix product per iteration, then
        finish the rows that have not converged with full Newton steps.
    fixed_inverse : array, shape (M, M), optional
        ``inv(fixed_hessian + ridge I + 1 / M)`` made beforehand, instead of ``fixed_hessian``, by a
        caller that solves many batches against one Hessian (the same iterations, one inversion).
    ridge : float
        Penalty ``ridge / 2 * |theta|^2`` (0: the maximum-likelihood estimate).
    tol : float
        Converged when the largest step is below ``tol`` (natural-log units).
    max_iter, max_fixed_iter : int
        Iteration limits of the full Newton and of the fixed-Hessian phase.
    system : PairSystem, optional
        ``PairSystem(lo, hi, n_models)`` made beforehand (the same answer, without rebuilding it).

    Returns
    -------
    theta : array, shape (B, M), each row summing to zero
    converged : bool array, shape (B,)
    n_iter : int, the largest number of iterations any row used
    """
    n = np.atleast_2d(np.asarray(n, dtype=np.float64))
    s = np.atleast_2d(np.asarray(s, dtype=np.float64))
    b = n.shape[0]
    m = n_models
    if system is None:
        pairs = PairSystem(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64), m)
    elif system.m != m or not (np.array_equal(system.lo, lo) and np.array_equal(system.hi, hi)):
        raise ValueError("the pair system was made for other pairs")
    else:
        pairs = system
    theta = (
        np.zeros((b, m)) if theta0 is None else np.array(np.broadcast_to(theta0, (b, m)), dtype=np.float64)
    )
    theta -= theta.mean(axis=1, keepdims=True)
    converged = np.zeros(b, dtype=bool)
    iters = 0
    centre = np.full((m, m), 1.0 / m)
    active = np.arange(b)
    if fixed_hessian is not None and fixed_inverse is not None:
        raise ValueError("give the fixed Hessian or its inverse, not both")
    if fixed_inverse is not None and fixed_inverse.shape != (m, m):
        raise ValueError(f"the fixed inverse has shape {fixed_inverse.shape}, expected ({m}, {m})")
    if fixed_hessian is not None and max_fixed_iter > 0:
        fixed_inverse = np.linalg.inv(fixed_hessian + ridge * np.eye(m) + centre)
    if fixed_inverse is not None and max_fixed_iter > 0:
        # Pair-major layout (pairs x problems): gathering whole rows of theta and the sparse product
        # with the incidence matrix both run on contiguous memory, about twice as fast as row-major.
        k = fixed_inverse
        theta_t = np.ascontiguousarray(theta.T)
        half_n_t = np.ascontiguousarray(0.5 * n.T)
        c_t = np.ascontiguousarray(s.T) - half_n_t
        cols = np.arange(b)
        for it in range(max_fixed_iter):
            if cols.size == 0:
                break
            g_t = pairs.gradient_t(theta_t, half_n_t, c_t)
            if ridge:
                g_t -= ridge * theta_t
            step_t = k @ g_t
            big = np.abs(step_t).max(axis=0)
            step_t *= np.minimum(1.0, _MAX_STEP / np.maximum(big, 1e-300))[None, :]
            theta_t += step_t
            iters = max(iters, it + 1)
            done = big < tol
            if done.any():
                theta[cols] = theta_t.T
                converged[cols[done]] = True
                cols = cols[~done]
                keep = np.flatnonzero(~done)
                theta_t = np.ascontiguousarray(theta_t[:, keep])
                half_n_t = np.ascontiguousarray(half_n_t[:, keep])
                c_t = np.ascontiguousarray(c_t[:, keep])
        theta[cols] = theta_t.T
        active = cols
    eye = ridge * np.eye(m) + centre
    for it in range(max_iter):
        if active.size == 0:
            break
        th = theta[active]
        g, p = pairs.gradient(th, n[active], s[active])
        g -= ridge * th
        lap = pairs.laplacian(n[active] * p * (1.0 - p)) + eye
        try:
            step = np.linalg.solve(lap, g[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            step = np.einsum("bij,bj->bi", np.linalg.pinv(lap), g)
        big = np.abs(step).max(axis=1)
        step *= np.minimum(1.0, _MAX_STEP / np.maximum(big, 1e-300))[:, None]
        theta[active] = th + step
        iters = max(iters, it + 1)
        done = big < tol
        converged[active[done]] = True
        active = active[~done]
    theta -= theta.mean(axis=1, keepdims=True)
    return theta, converged, iters


def pair_log_likelihood(theta: FloatArray, stats: PairStats) -> float:
    """Plain-BT log-likelihood of natural-log strengths ``theta`` (M,), a tie scoring half a win."""
    pairs = PairSystem(stats.lo, stats.hi, stats.n_models)
    return float(_log_likelihood(theta[None, :], pairs, stats.n[None, :], stats.score_lo[None, :])[0])


def pair_curvature(theta: FloatArray, stats: PairStats) -> tuple[FloatArray, FloatArray]:
    """Fisher information and the sum of per-vote score outer products, both w.r.t. ``theta`` (M x M).

    Parameters
    ----------
    theta : array, shape (M,)
        Natural-log strengths.
    stats : PairStats

    Returns
    -------
    hessian : the Hessian of the negative log-likelihood, ``sum_pairs n p (1 - p)`` on the pair Laplacian
    score_outer : ``sum_votes g g^T``, the meat of the sandwich (Huber 1967, White 1980)
    """
    pairs = PairSystem(stats.lo, stats.hi, stats.n_models)
    p = _expit(theta[stats.lo] - theta[stats.hi])
    hessian = pairs.laplacian((stats.n * p * (1 - p))[None, :])[0]
    meat_w = stats.wins_lo * (1 - p) ** 2 + stats.wins_hi * p**2 + stats.ties * (0.5 - p) ** 2
    score_outer = pairs.laplacian(meat_w[None, :])[0]
    return hessian, score_outer
