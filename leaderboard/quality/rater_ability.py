"""Annotator reliability: Davidson ratings in which each annotator's votes carry their own discrimination.

Some annotators (careful humans, a strong judge) separate the models sharply; others vote close to a
coin. A fit that counts every vote alike lets the noisy ones flatten the ratings; the rater-ability model
(as in am-ELO, Liu et al. 2025) gives annotator ``k`` a discrimination ``a_k > 0`` that multiplies the
whole linear predictor of its votes,

    eta = a_k (theta_left - theta_right + alpha),

with the common left-side advantage ``alpha`` (only on votes whose side is known) and Davidson ties
(``P(tie) = nu / (e^{eta/2} + e^{-eta/2} + nu)``, the likelihood pieces of
:func:`leaderboard.bt.cells.davidson_row_terms`). ``log a_k`` has a normal prior centred at 0 with standard
deviation ``prior_sd``: an annotator with a handful of votes stays near ``a = 1``, and the prior fixes the
scale that the product ``a_k * theta`` leaves free. Votes with no annotator id count with ``a = 1``; so do
votes of annotators the fit has not seen (a forecast for a newcomer is the prior's).

How it differs from :mod:`leaderboard.composite.fit`, which also gives each source a discrimination: the
composite is for a few sources (the human pool fixed at ``a = 1`` and some LLM judges), each with its own
position, ties and self-preference, soft verdicts and battle clusters, and a finite-difference Hessian
(one gradient per parameter). Here the annotators may be thousands, most with a few votes: one shared
position and tie parameter, a prior instead of a fixed reference, and an analytic Hessian.

Fitted by L-BFGS on the negative log-posterior per unit weight with its analytic gradient; every sum over
votes is a ``bincount`` or a sparse product, never a Python loop. Standard errors are the sandwich of the
analytic Hessian of the penalised objective and the per-vote scores, computed when the parameter vector
is small enough for a dense inverse (:data:`MAX_SANDWICH_PARAMS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy import optimize

from leaderboard.battles import Battles
from leaderboard.bt.cells import davidson_row_terms
from leaderboard.data import Outcome

__all__ = [
    "DEFAULT_POSITION_SD",
    "DEFAULT_PRIOR_SD",
    "ESTIMATE",
    "MAX_SANDWICH_PARAMS",
    "RaterAbilityFit",
    "fit_rater_ability",
    "rater_ability_proba",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Prior standard deviation of ``log a_k``: ``a`` within a factor of about 2.7 either way at 95%.
DEFAULT_PRIOR_SD = 0.5
#: Parameter vectors longer than this get no sandwich standard errors (a dense inverse would not fit).
MAX_SANDWICH_PARAMS = 3000
#: ``position_sd`` that asks for the offsets' standard deviation to be estimated (empirical Bayes).
ESTIMATE = "estimate"
#: A fixed prior standard deviation of each annotator's position offset (nats; about 87 Elo) for callers
#: that want one; the held-out comparison estimates it instead (LLM judges of one board differ by
#: hundreds of Elo in side bias, human voters may not differ at all).
DEFAULT_POSITION_SD = 0.5
#: Floor of the estimated standard deviation (nats): below it the offsets are the shared term anyway.
_MIN_POSITION_SD = 0.01
#: Cochran's p-value of the annotators' side terms (from the fit with offsets held near 0) below which the
#: offsets are estimated; at or above it they stay at the floor (one fit: the usual case of human voters
#: who share one side bias, at the cost of the shared-term model).
_SPREAD_P = 0.05
#: Where an estimate restarts (nats, about 350 Elo): loose enough that the fitted offsets are close to
#: the un-shrunk ones, so the first moment estimate is near its fixed point (from the tight fit it
#: creeps up over many refits: discriminations and ratings absorb part of each side bias meanwhile).
_START_POSITION_SD = 2.0
#: Refits for the estimate at most, and the relative change of the estimate that ends them.
_ESTIMATE_REFITS = 6
_ESTIMATE_RTOL = 0.05
#: L-BFGS tolerance of the fits made while the spread is estimated (per unit weight; the last fit uses
#: the caller's ``tol``): enough for a spread to 5%.
_ROUGH_TOL = 1e-6
#: Bound on ``|log a_k|`` in the optimiser (a factor of 400), far beyond what the prior allows.
_LOG_A_BOUND = 6.0
_ELO_PER_NAT = 400.0 / math.log(10.0)


@dataclass(frozen=True)
class RaterAbilityFit:
    """A fitted rater-ability model.

    Attributes
    ----------
    models : model names; ``theta`` (natural-log strengths, centred) is aligned with them
    position : left-side advantage in natural-log units (0, and ``has_position`` False, when no vote
        knows its side)
    log_nu : Davidson ``log nu`` (None when the votes hold no tie: ties would then be impossible)
    annotators : the annotator codes fitted (``Battles.annotator`` values), increasing
    labels : their names (``annotator-<code>`` where the votes name none)
    log_a : ``log a_k`` per fitted annotator; ``discrimination`` is ``exp(log_a)``
    se_log_a, se_position, se_log_nu : sandwich standard errors (NaN when not computed)
    n_votes : votes per fitted annotator
    prior_sd : the prior's standard deviation of ``log a_k``
    log_likelihood : at the optimum, without the prior
    n_iter : L-BFGS iterations
    """

    models: tuple[str, ...]
    theta: FloatArray
    position: float
    log_nu: float | None
    annotators: IntArray
    labels: tuple[str, ...]
    log_a: FloatArray
    se_log_a: FloatArray
    se_position: float
    se_log_nu: float
    n_votes: IntArray
    prior_sd: float
    log_likelihood: float
    n_iter: int
    has_position: bool = True
    position_sd: float | None = None
    position_offsets: FloatArray = field(default_factory=lambda: np.zeros(0))
    se_annotator_position: FloatArray = field(default_factory=lambda: np.zeros(0))

    @property
    def discrimination(self) -> FloatArray:
        out: FloatArray = np.exp(self.log_a)
        return out

    @property
    def rating(self) -> FloatArray:
        """Ratings on the Elo scale (400 points per factor 10, mean 1000)."""
        out: FloatArray = _ELO_PER_NAT * self.theta + 1000.0
        return out

    @property
    def n_params(self) -> int:
        return (
            len(self.models)
            + int(self.has_position)
            + int(self.log_nu is not None)
            + len(self.annotators)
            + len(self.position_offsets)
        )

    def vote_discrimination(self, annotator: IntArray | None, n: int) -> FloatArray:
        """``a`` of each of ``n`` votes by annotator code: 1 for a vote without one or by a newcomer."""
        return self._per_vote(self.discrimination, 1.0, annotator, n)

    def vote_position(self, annotator: IntArray | None, n: int) -> FloatArray:
        """The left-side advantage of each of ``n`` votes by annotator code (nats): the common term plus
        the annotator's offset, the common term alone for a vote without one or by a newcomer."""
        if self.position_offsets.size == 0:
            return np.full(n, self.position)
        return self._per_vote(self.position + self.position_offsets, self.position, annotator, n)

    def _per_vote(self, values: FloatArray, default: float, annotator: IntArray | None, n: int) -> FloatArray:
        out = np.full(n, default)
        if annotator is None or self.annotators.size == 0:
            return out
        codes = np.asarray(annotator, dtype=np.int64)
        pos = np.clip(np.searchsorted(self.annotators, codes), 0, self.annotators.size - 1)
        known = (codes >= 0) & (self.annotators[pos] == codes)
        out[known] = values[pos[known]]
        return out

    def describe(self, *, level: float = 0.95) -> dict[str, object]:
        """JSON-ready: position (Elo) and ``nu`` with Wald intervals, each annotator's ``a`` with its
        interval (``exp`` of the interval of ``log a``); with per-annotator offsets also their standard
        deviation and each annotator's own left-side advantage (common term plus offset, Elo of rating,
        before its discrimination) with its sandwich interval."""
        from scipy.stats import norm

        z = float(norm.ppf(0.5 + level / 2))

        def finite(x: float) -> float | None:
            return x if math.isfinite(x) else None

        p, sp_ = self.position * _ELO_PER_NAT, self.se_position * _ELO_PER_NAT
        out: dict[str, object] = {
            "level": level,
            "prior_sd_log_discrimination": self.prior_sd,
            "position_advantage_elo": {
                "value": p,
                "ci_low": finite(p - z * sp_),
                "ci_high": finite(p + z * sp_),
            },
            "annotators": [
                {
                    "annotator": self.labels[k],
                    "votes": int(self.n_votes[k]),
                    "discrimination": float(math.exp(self.log_a[k])),
                    "ci_low": finite(math.exp(self.log_a[k] - z * self.se_log_a[k])),
                    "ci_high": finite(math.exp(self.log_a[k] + z * self.se_log_a[k])),
                }
                for k in range(len(self.labels))
            ],
        }
        if self.position_sd is not None and self.position_offsets.size == len(self.labels):
            out["position_sd_elo"] = self.position_sd * _ELO_PER_NAT
            rows = out["annotators"]
            if not isinstance(rows, list):
                raise TypeError("annotator rows must be a list")
            for k, row in enumerate(rows):
                own = (self.position + float(self.position_offsets[k])) * _ELO_PER_NAT
                se = float(self.se_annotator_position[k]) * _ELO_PER_NAT
                row["position_elo"] = {
                    "value": own,
                    "ci_low": finite(own - z * se),
                    "ci_high": finite(own + z * se),
                }
        if self.log_nu is not None:
            out["tie_propensity_nu"] = {
                "value": math.exp(self.log_nu),
                "ci_low": finite(math.exp(self.log_nu - z * self.se_log_nu)),
                "ci_high": finite(math.exp(self.log_nu + z * self.se_log_nu)),
            }
        return out


class _Problem:
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
        grad[: self.n_linear] = self.D.T @ (wl * a)
        if self.has_nu:
            grad[self.i_nu] = float(self.w @ l_t)
        log_a = x[self.i_a :]
        grad[self.i_a :] = self.A.T @ (wl * a * d) - self.lam * log_a
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

    def hessian(self, x: FloatArray) -> FloatArray:
        """Hessian of the negative log-posterior (not per unit weight)."""
        jac, d, a, _, (_, l_u, _, l_uu, l_ut, l_tt) = self.jacobian(x)
        h: FloatArray = -(jac.T @ sp.diags(self.w * l_uu) @ jac).toarray()
        # eta's own second derivatives: d2 eta / d log a d(linear) = a dD, d2 eta / d log a^2 = eta
        cross = (self.A.T @ sp.diags(self.w * l_u * a) @ self.D).toarray()
        h[self.i_a :, : self.n_linear] -= cross
        h[: self.n_linear, self.i_a :] -= cross.T
        h[self.i_a :, self.i_a :] -= np.diag(self.A.T @ (self.w * l_u * a * d))
        if self.has_nu:
            col = -(jac.T @ (self.w * l_ut))
            h[:, self.i_nu] += col
            h[self.i_nu, :] += col
            h[self.i_nu, self.i_nu] = -float(self.w @ l_tt)
        h[self.i_a :, self.i_a :] += self.lam * np.eye(self.k)
        h[self.i_b : self.i_nu, self.i_b : self.i_nu] += self.lam_b * np.eye(self.n_b)
        return h

    def curvature_scale(self, x: FloatArray) -> FloatArray:
        """A step size per parameter, ``1 / sqrt`` of the Hessian's diagonal per unit weight: a strength
        seen in 40,000 votes and a discrimination seen in 40 differ in curvature a thousandfold, which
        L-BFGS crosses slowly unless the variables are scaled (a diagonal preconditioner)."""
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


def fit_rater_ability(
    battles: Battles,
    *,
    labels: tuple[str, ...] | None = None,
    prior_sd: float = DEFAULT_PRIOR_SD,
    position_sd: float | Literal["estimate"] | None = None,
    standard_errors: bool = True,
    max_iter: int = 2000,
    tol: float = 1e-9,
) -> RaterAbilityFit:
    """Fit ratings, position, ties and one discrimination per annotator (see the module docstring).

    Parameters
    ----------
    battles : votes with ``annotator`` codes (negative: no annotator, counted with ``a = 1``)
    labels : names of the annotator codes (default ``battles.annotator_names``)
    prior_sd : standard deviation of the normal prior on ``log a_k``
    position_sd : with a value, each annotator also gets its own left-side offset ``b_k`` (nats) on the
        common term, with a normal prior of this standard deviation (a random effect); ``"estimate"``:
        that standard deviation is estimated from the fit (DerSimonian-Laird moments of the un-shrunk
        offsets, refitted until it settles), starting from a fit with (nearly) shared position;
        None: one shared position term
    standard_errors : compute the sandwich standard errors (when the parameters are few enough)
    max_iter, tol : L-BFGS iteration limit and projected-gradient tolerance (per unit weight)

    Raises
    ------
    ValueError
        No annotator ids, a non-positive prior, fewer than two models, or votes that give no finite fit.
    RuntimeError
        When L-BFGS stops before the optimum.
    """
    if battles.annotator is None:
        raise ValueError("the rater-ability model needs annotator ids on the votes")
    if not prior_sd > 0 or not math.isfinite(prior_sd):
        raise ValueError("prior_sd must be a positive number")
    if isinstance(position_sd, str) and position_sd != ESTIMATE:
        raise ValueError(f"position_sd must be a positive number, {ESTIMATE!r} or None")
    if isinstance(position_sd, float | int) and (not position_sd > 0 or not math.isfinite(position_sd)):
        raise ValueError("position_sd must be a positive number")
    if len(battles.models) < 2 or len(battles) == 0:
        raise ValueError("the rater-ability model needs votes between at least two models")
    names = labels if labels is not None else battles.annotator_names
    raw = np.asarray(battles.annotator, dtype=np.int64)
    fitted, dense = np.unique(raw[raw >= 0], return_inverse=True)
    codes = np.full(raw.shape[0], -1, dtype=np.int64)
    codes[raw >= 0] = dense
    estimate = position_sd == ESTIMATE
    # an estimate first fits with the offsets held near 0 (in effect the shared term): when the votes
    # show no spread between annotators' side terms, that fit is the answer; when they do, it restarts
    # loose, where the fitted offsets are nearly each annotator's own, and comes down
    sd = _MIN_POSITION_SD if estimate else position_sd if isinstance(position_sd, float | int) else None
    problem = _Problem(battles, codes, int(fitted.size), prior_sd, sd)
    rough = max(tol, _ROUGH_TOL) if estimate else tol  # the estimate needs no exact fit until it settles
    x0 = _start(battles, problem)
    x, n_iter = _maximise(problem, x0, max_iter, rough)
    if estimate and problem.has_offsets and _spread_of_offsets(problem, x)[3] < _SPREAD_P:
        sd = _START_POSITION_SD
        problem.lam_b = 1.0 / sd**2
        x, more = _maximise(problem, x0, max_iter, rough)  # not from the tight fit: its a_k absorbed sides
        n_iter += more
        for _ in range(_ESTIMATE_REFITS):
            old, (sd, free, info, _) = sd, _spread_of_offsets(problem, x)
            if abs(sd - old) <= _ESTIMATE_RTOL * old:
                sd = old  # settled: the fit made with it is polished below
                break
            problem.lam_b = 1.0 / sd**2
            x = x.copy()
            x[problem.i_b : problem.i_nu] = free * info / (info + problem.lam_b)  # re-shrunk: a near start
            x, more = _maximise(problem, x, max_iter, rough)
            n_iter += more
    if rough != tol:
        x, more = _maximise(problem, x, max_iter, tol)
        n_iter += more
    theta = np.append(x[: problem.m - 1], 0.0)
    theta -= theta.mean()
    if float(np.max(np.abs(theta))) > 28.8:
        raise ValueError(
            "ratings diverge: some model only wins or only loses, or the comparisons are in parts"
        )
    se = np.full(problem.size, math.nan)
    offsets = slice(problem.i_b, problem.i_nu)
    se_own = np.full(problem.n_b, math.nan)
    if standard_errors and problem.size <= MAX_SANDWICH_PARAMS:
        try:
            bread = np.asarray(np.linalg.inv(problem.hessian(x)), dtype=np.float64)
            cov = bread @ problem.meat(x) @ bread
            se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
            if problem.has_offsets:
                se[problem.i_pos], se_own = _offset_errors(bread, cov, problem.i_pos, offsets)
        except np.linalg.LinAlgError:
            pass
    d, t, a = problem.unpack(x)
    ll = davidson_row_terms(a * d, problem.sign, problem.is_tie, t)[0]
    return RaterAbilityFit(
        models=battles.models,
        theta=theta,
        position=float(x[problem.i_pos]) if problem.has_position else 0.0,
        log_nu=t,
        annotators=fitted.astype(np.int64),
        labels=tuple(names[c] if c < len(names) else f"annotator-{c}" for c in fitted.tolist()),
        log_a=x[problem.i_a :].copy(),
        se_log_a=se[problem.i_a :].copy(),
        se_position=float(se[problem.i_pos]) if problem.has_position else math.nan,
        se_log_nu=float(se[problem.i_nu]) if problem.has_nu else math.nan,
        n_votes=np.bincount(dense, minlength=fitted.size).astype(np.int64),
        prior_sd=prior_sd,
        log_likelihood=float(problem.w @ ll),
        n_iter=n_iter,
        has_position=problem.has_position,
        position_sd=sd if problem.has_offsets else None,
        position_offsets=x[offsets].copy(),
        se_annotator_position=se_own,
    )


def _maximise(problem: _Problem, x0: FloatArray, max_iter: int, tol: float) -> tuple[FloatArray, int]:
    """The posterior mode from ``x0`` by L-BFGS on curvature-scaled variables, and its iterations."""
    scale = problem.curvature_scale(x0)

    def scaled(z: FloatArray) -> tuple[float, FloatArray]:
        value, grad = problem.value_grad(scale * z)
        return value, scale * grad

    limit = _LOG_A_BOUND / scale[problem.i_a :]
    bounds = [(None, None)] * problem.i_a + [(-b, b) for b in limit.tolist()]
    result = optimize.minimize(
        scaled,
        x0 / scale,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": max_iter, "gtol": tol, "ftol": 1e-15, "maxcor": 20},
    )
    x = scale * np.asarray(result.x, dtype=np.float64)
    _, grad = problem.value_grad(x)
    if not result.success and float(np.max(np.abs(grad))) > 1e-5:
        raise RuntimeError(f"rater-ability fit did not converge: {result.message}")
    return x, int(result.nit)


def _spread_of_offsets(problem: _Problem, x: FloatArray) -> tuple[float, FloatArray, FloatArray, float]:
    """The offsets' standard deviation estimated from a fit (empirical Bayes, one moment step), with the
    un-shrunk offsets, their information and Cochran's p-value of their spread.

    Each annotator's own term is un-shrunk from the fit: the votes alone give ``b_k`` the information
    ``I_k`` (the Hessian's diagonal less the prior), and the fitted offset is the raw one times
    ``I_k / (I_k + lam_b)``. The raw terms with variances ``1 / I_k`` then give ``tau^2`` by
    DerSimonian and Laird's moments (:func:`leaderboard.quality.judge_position.between_variance`), as for the
    per-judge fits; a closed form, so the fit is repeated only until the estimate settles, not once per
    EM step (EM crawls when the true spread is near 0).
    """
    from leaderboard.quality.judge_position import between_variance

    block = slice(problem.i_b, problem.i_nu)
    info = np.maximum(problem.hessian_diagonal(x)[block] - problem.lam_b, 1e-12)
    raw = x[block] * (info + problem.lam_b) / info
    tau2, p_value = between_variance(x[problem.i_pos] + raw, 1.0 / info)
    return max(math.sqrt(tau2), _MIN_POSITION_SD), raw, info, p_value


def _offset_errors(
    bread: FloatArray, cov: FloatArray, i_pos: int, offsets: slice
) -> tuple[float, FloatArray]:
    """Standard errors of the common position term and of each annotator's own (common + offset).

    The common term is the mean of a random effect: its error must include the spread of the annotators'
    offsets, which the sandwich leaves out (it holds these annotators fixed, and the votes say nothing
    about the common term that the offsets do not absorb). Its error is therefore the posterior one, the
    inverse Hessian of the penalised objective (Laplace): about ``sqrt(1 / sum_k 1/(sd^2 + se_k^2))``,
    the random-effects error of a mean over the annotators. Each annotator's own term is a property of
    its votes: the sandwich of ``alpha + b_k``.
    """
    pos = float(math.sqrt(max(bread[i_pos, i_pos], 0.0)))
    idx = np.arange(offsets.start, offsets.stop)
    var = cov[i_pos, i_pos] + np.diag(cov)[idx] + 2.0 * cov[i_pos, idx]
    return pos, np.sqrt(np.clip(var, 0.0, None))


def _start(battles: Battles, problem: _Problem) -> FloatArray:
    """The start: every ``a = 1`` and the unweighted fit of the same model (what the prior centres on),
    or all strengths level when that fit fails (a model that only wins, say)."""
    from leaderboard.bt.fit import fit_bt
    from leaderboard.bt.spec import BTSpec

    x0 = np.zeros(problem.size)
    if problem.has_nu:
        x0[problem.i_nu] = math.log(max(float(problem.w @ problem.is_tie) / problem.total, 1e-3))
    spec = BTSpec(
        position="common" if problem.has_position else "none", ties="davidson" if problem.has_nu else "none"
    )
    try:
        plain = fit_bt(battles.counts(), spec=spec)
    except (ValueError, RuntimeError):
        return x0
    theta = plain.theta
    x0[: problem.m - 1] = theta[:-1] - theta[-1]
    if problem.has_position and plain.position.shape[0] == 1:
        x0[problem.i_pos] = float(plain.position[0])
    if problem.has_nu and plain.log_nu is not None:
        x0[problem.i_nu] = plain.log_nu
    return x0


def rater_ability_proba(fit: RaterAbilityFit, battles: Battles) -> FloatArray:
    """Forecasts ``[left wins, tie, right wins]`` of votes (coded against ``fit.models``), each scaled by
    its annotator's discrimination (1 for a vote without an annotator or by one the fit has not seen)."""
    if battles.models != fit.models:
        raise ValueError("the votes must be coded against the fit's models")
    side = np.ones(len(battles)) if battles.sided is None else battles.sided.astype(np.float64)
    position = fit.vote_position(battles.annotator, len(battles))
    d = fit.theta[battles.model_a] - fit.theta[battles.model_b] + position * side
    h = 0.5 * fit.vote_discrimination(battles.annotator, len(battles)) * d
    log_nu = -math.inf if fit.log_nu is None else fit.log_nu
    log_d = np.logaddexp(np.logaddexp(h, -h), log_nu)
    return np.column_stack([np.exp(h - log_d), np.exp(log_nu - log_d), np.exp(-h - log_d)])
