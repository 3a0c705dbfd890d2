"""Plain Bradley-Terry maximum likelihood on aggregated counts.

The point fit is the Chatbot Arena recipe: scikit-learn's ``LogisticRegression`` without intercept and
without penalty, on rows ``+ln(base)`` at the first model's column and ``-ln(base)`` at the second's,
weighted by counts (a win counts 2 for the winner, a tie 1 for each side). Because a tie scores half a
win, the likelihood depends on the votes only through :class:`~leaderboard.data.PairStats`, so the rows
are two per unordered pair, whatever the number of votes.

The same likelihood is also solved here by a batched Newton method on those statistics
(:func:`solve_bt_batch`): it polishes the scikit-learn optimum to machine precision and refits a thousand
bootstrap rounds at once. Tests check one against the other.

Conventions: ``theta`` is the natural-log strength, ``coef = theta / ln(base)`` is scikit-learn's
coefficient, ratings are ``scale * coef + initial`` with ``sum(coef) == 0`` (or shifted to an anchor).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from leaderboard.data import PairCounts, PairStats, collapse_pairs

__all__ = [
    "BTFit",
    "DisconnectedComparisonError",
    "NonConvergenceError",
    "UnboundedRatingWarning",
    "check_comparison_graph",
    "fit_bt",
    "solve_bt_batch",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Largest Newton step (natural-log units) taken at once; keeps far starts from overshooting.
_MAX_STEP = 2.0


class DisconnectedComparisonError(ValueError):
    """The comparison graph falls into parts never compared with each other: no common scale exists."""


class NonConvergenceError(RuntimeError):
    """The optimiser stopped before the optimum; its numbers would be garbage, so none are returned."""


class UnboundedRatingWarning(UserWarning):
    """Some models only won or only lost (against a part of the field): their MLE is infinite.

    The fit then adds a small ridge penalty so the numbers stay finite; those ratings are not MLEs.
    """


@dataclass(frozen=True)
class BTFit:
    """A fitted Bradley-Terry model; arrays aligned with ``models``.

    Attributes
    ----------
    models : tuple of str
    rating : ratings, ``scale * coef + offset``
    coef : log-``base`` strengths (scikit-learn's ``coef_``), summing to zero
    offset : ``initial``, or the shift that puts the anchor at its rating
    scale, base, initial : the rating scale
    anchor : (model, rating) or None
    converged, n_iter, solver : how the optimum was reached
    log_likelihood : at the optimum, ties scored as half a win and half a loss (vote units)
    hessian : Hessian of the negative log-likelihood with respect to ``coef`` (Fisher information)
    score_outer : sum over votes of the outer products of per-vote scores (the sandwich's meat)
    n_votes : number of votes (summed weights)
    unbounded : models flagged by :class:`UnboundedRatingWarning`
    ridge : the ridge penalty used (0 for the plain MLE)
    stats : the sufficient statistics the fit used
    """

    models: tuple[str, ...]
    rating: FloatArray
    coef: FloatArray
    offset: float
    scale: float
    base: float
    initial: float
    anchor: tuple[str, float] | None
    converged: bool
    n_iter: int
    solver: str
    log_likelihood: float
    hessian: FloatArray
    score_outer: FloatArray
    n_votes: float
    unbounded: tuple[str, ...]
    ridge: float
    stats: PairStats

    @property
    def ratings(self) -> FloatArray:
        """Alias of ``rating``."""
        return self.rating

    @property
    def theta(self) -> FloatArray:
        """Natural-log strengths (``coef * ln(base)``)."""
        out: FloatArray = self.coef * math.log(self.base)
        return out


class _Pairs:
    """The pair list of a problem, with the index arrays a batched solver needs."""

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


def _log_likelihood(theta: FloatArray, pairs: _Pairs, n: FloatArray, s: FloatArray) -> FloatArray:
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
    ridge: float = 0.0,
    tol: float = 1e-10,
    max_iter: int = 100,
    max_fixed_iter: int = 30,
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
    ridge : float
        Penalty ``ridge / 2 * |theta|^2`` (0: the maximum-likelihood estimate).
    tol : float
        Converged when the largest step is below ``tol`` (natural-log units).
    max_iter, max_fixed_iter : int
        Iteration limits of the full Newton and of the fixed-Hessian phase.

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
    pairs = _Pairs(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64), m)
    theta = (
        np.zeros((b, m)) if theta0 is None else np.array(np.broadcast_to(theta0, (b, m)), dtype=np.float64)
    )
    theta -= theta.mean(axis=1, keepdims=True)
    converged = np.zeros(b, dtype=bool)
    iters = 0
    centre = np.full((m, m), 1.0 / m)
    active = np.arange(b)
    if fixed_hessian is not None and max_fixed_iter > 0:
        # Pair-major layout (pairs x problems): gathering whole rows of theta and the sparse product
        # with the incidence matrix both run on contiguous memory, about twice as fast as row-major.
        k = np.linalg.inv(fixed_hessian + ridge * np.eye(m) + centre)
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


def check_comparison_graph(stats: PairStats, models: tuple[str, ...]) -> tuple[str, ...]:
    """Raise if the models cannot be put on one scale; name the models whose MLE is infinite.

    Raises
    ------
    DisconnectedComparisonError
        If a model has no battles or the models fall into groups never compared with each other.

    Returns
    -------
    tuple of str
        Models in a part of the field that only won or only lost against the rest (empty when the
        "beats or ties" graph is strongly connected, the condition for a finite MLE; Zermelo 1929,
        Ford 1957).
    """
    m = stats.n_models
    if m < 2:
        raise DisconnectedComparisonError("need at least two models")
    battles = np.bincount(stats.lo, weights=stats.n, minlength=m) + np.bincount(
        stats.hi, weights=stats.n, minlength=m
    )
    idle = [models[i] for i in np.flatnonzero(battles <= 0)]
    if idle:
        raise DisconnectedComparisonError(f"models without any battle: {', '.join(idle)}")
    keep = stats.n > 0
    graph = sp.csr_matrix((np.ones(int(keep.sum())), (stats.lo[keep], stats.hi[keep])), shape=(m, m))
    n_parts, labels = connected_components(graph, directed=False)
    if n_parts > 1:
        groups = [[models[i] for i in np.flatnonzero(labels == k)] for k in range(n_parts)]
        shown = "; ".join("{" + ", ".join(g[:5]) + (", ..." if len(g) > 5 else "") + "}" for g in groups[:5])
        raise DisconnectedComparisonError(
            f"the comparison graph has {n_parts} parts never compared with each other: {shown}"
        )
    score_lo = stats.score_lo
    score_hi = stats.n - score_lo
    src = np.concatenate([stats.lo[score_lo > 0], stats.hi[score_hi > 0]])
    dst = np.concatenate([stats.hi[score_lo > 0], stats.lo[score_hi > 0]])
    beats = sp.csr_matrix((np.ones(len(src)), (src, dst)), shape=(m, m))
    n_strong, strong = connected_components(beats, directed=True, connection="strong")
    if n_strong == 1:
        return ()
    # components that are not the largest one are pushed to +/- infinity relative to it
    sizes = np.bincount(strong)
    main = int(np.argmax(sizes))
    return tuple(models[i] for i in np.flatnonzero(strong != main))


def _design(stats: PairStats, base: float) -> tuple[sp.csr_matrix, IntArray, FloatArray]:
    """Two weighted rows per pair: lo beats hi (weight ``2 wins_lo + ties``) and the reverse."""
    p = len(stats.lo)
    ln_base = math.log(base)
    rows = np.repeat(np.arange(p), 2)
    cols = np.stack([stats.lo, stats.hi], axis=1).ravel()
    vals = np.tile([ln_base, -ln_base], p)
    x_pair = sp.csr_matrix((vals, (rows, cols)), shape=(p, stats.n_models))
    x = sp.vstack([x_pair, x_pair]).tocsr()
    y = np.concatenate([np.ones(p, dtype=np.int64), np.zeros(p, dtype=np.int64)])
    w = np.concatenate([2 * stats.wins_lo + stats.ties, 2 * stats.wins_hi + stats.ties])
    keep = w > 0
    return x[keep], y[keep], w[keep]


def _fit_sklearn(stats: PairStats, base: float, *, max_iter: int, tol: float) -> tuple[FloatArray, bool, int]:
    x, y, w = _design(stats, base)
    model = LogisticRegression(C=np.inf, fit_intercept=False, solver="lbfgs", tol=tol, max_iter=max_iter)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(x, y, sample_weight=w)
    converged = not any(issubclass(c.category, ConvergenceWarning) for c in caught)
    coef = np.asarray(model.coef_[0], dtype=np.float64)
    return coef - coef.mean(), converged, int(np.max(model.n_iter_))


def fit_bt(
    counts: PairCounts,
    *,
    anchor: tuple[str, float] | None = None,
    scale: float = 400.0,
    base: float = 10.0,
    initial: float = 1000.0,
    polish: bool = True,
    max_iter: int = 1000,
    tol: float = 1e-8,
    on_unbounded: str = "warn",
    unbounded_ridge: float = 1e-3,
) -> BTFit:
    """Bradley-Terry maximum likelihood with scikit-learn's ``LogisticRegression`` on aggregated rows.

    Parameters
    ----------
    counts : PairCounts
        Aggregated battles (both-bad counts as a tie).
    anchor : (model, rating), optional
        Shift all ratings so that this model has this rating (default: mean rating ``initial``).
    scale, base, initial : float
        ``rating = scale * log_base(strength) + initial``.
    polish : bool
        Finish with Newton steps on the sufficient statistics, so the result is the exact optimum to
        machine precision (scikit-learn's L-BFGS stops at ``tol``); ``False`` returns scikit-learn's
        coefficients as they are.
    max_iter, tol : L-BFGS limits passed to scikit-learn.
    on_unbounded : ``"warn"`` or ``"raise"``
        What to do when some models only won or only lost: warn with :class:`UnboundedRatingWarning`
        and fit with ``unbounded_ridge`` (a weak Gaussian prior keeps numbers finite), or raise
        :class:`DisconnectedComparisonError`.

    Returns
    -------
    BTFit

    Raises
    ------
    DisconnectedComparisonError
        Models never compared (directly or through others), or unbounded ones with ``on_unbounded="raise"``.
    NonConvergenceError
        If the optimiser stops before the optimum.
    """
    if on_unbounded not in ("warn", "raise"):
        raise ValueError("on_unbounded must be 'warn' or 'raise'")
    models = counts.models
    stats = collapse_pairs(counts)
    unbounded = check_comparison_graph(stats, models)
    m = len(models)
    ln_base = math.log(base)
    n_pair = stats.n[None, :]
    s_pair = stats.score_lo[None, :]
    ridge = 0.0
    if unbounded:
        message = (
            "the maximum-likelihood rating is infinite: these models only won or only lost against "
            f"the rest of the field: {', '.join(unbounded[:10])}{', ...' if len(unbounded) > 10 else ''}"
        )
        if on_unbounded == "raise":
            raise DisconnectedComparisonError(message)
        warnings.warn(
            message + f" (fitting with ridge {unbounded_ridge} instead)", UnboundedRatingWarning, stacklevel=2
        )
        ridge = unbounded_ridge
        theta, ok, n_iter = solve_bt_batch(stats.lo, stats.hi, n_pair, s_pair, n_models=m, ridge=ridge)
        if not ok[0]:
            raise NonConvergenceError(f"ridge-penalised Newton did not converge in {n_iter} iterations")
        theta_hat = theta[0]
        solver = "newton+ridge"
        converged = True
    else:
        coef_sk, converged, n_iter = _fit_sklearn(stats, base, max_iter=max_iter, tol=tol)
        theta_hat = coef_sk * ln_base
        solver = "sklearn-lbfgs"
        if polish:
            theta, ok, extra = solve_bt_batch(
                stats.lo, stats.hi, n_pair, s_pair, n_models=m, theta0=theta_hat, max_iter=max(max_iter, 1)
            )
            if not ok[0]:
                raise NonConvergenceError(
                    f"Bradley-Terry fit did not converge (L-BFGS {n_iter} iterations, Newton {extra})"
                )
            theta_hat = theta[0]
            n_iter += extra
            converged = True
            solver = "sklearn-lbfgs+newton"
        elif not converged:
            raise NonConvergenceError(f"scikit-learn's L-BFGS did not converge in {max_iter} iterations")
    coef = theta_hat / ln_base
    coef = coef - coef.mean()
    offset = initial
    if anchor is not None:
        name, value = anchor
        if name not in models:
            raise ValueError(f"anchor model {name!r} is not among the models")
        offset = float(value) - scale * float(coef[models.index(name)])
    rating = scale * coef + offset
    pairs = _Pairs(stats.lo, stats.hi, m)
    d = (coef[stats.lo] - coef[stats.hi]) * ln_base
    p = _expit(d)
    hessian = ln_base**2 * pairs.laplacian((stats.n * p * (1 - p))[None, :])[0]
    meat_w = stats.wins_lo * (1 - p) ** 2 + stats.wins_hi * p**2 + stats.ties * (0.5 - p) ** 2
    score_outer = ln_base**2 * pairs.laplacian(meat_w[None, :])[0]
    ll = float(_log_likelihood((coef * ln_base)[None, :], pairs, n_pair, s_pair)[0])
    return BTFit(
        models=models,
        rating=rating,
        coef=coef,
        offset=offset,
        scale=scale,
        base=base,
        initial=initial,
        anchor=anchor,
        converged=converged,
        n_iter=n_iter,
        solver=solver,
        log_likelihood=ll,
        hessian=hessian,
        score_outer=score_outer,
        n_votes=counts.n_votes,
        unbounded=unbounded,
        ridge=ridge,
        stats=stats,
    )
