"""One Bradley-Terry fit for every method: :func:`fit_bt` on counts and a
:class:`~leaderboard.bt.spec.BTSpec`.

Plain Bradley-Terry (``BTSpec()``) takes the Chatbot Arena recipe: scikit-learn's ``LogisticRegression``
without intercept and without penalty, on rows ``+ln(base)`` at the first model's column and
``-ln(base)`` at the second's, weighted by counts (a win counts 2 for the winner, a tie 1 for each side).
Because a tie scores half a win, that likelihood depends on the votes only through
:class:`~leaderboard.data.PairStats`, so the rows are two per unordered pair; a batched Newton method on
the same statistics (:mod:`leaderboard.bt.newton`) then polishes the optimum to machine precision.

Every other member of the family (position advantage, Davidson ties, time weights, a prior, style
covariates, the probit link of Thurstone-Mosteller with Glenn-David ties) is fitted by Newton's method
on the aggregated cells (:mod:`leaderboard.bt.cells`).

Conventions: ``theta`` is the natural-log strength, ``coef = theta / ln(base)`` is scikit-learn's
coefficient, ratings are ``scale * coef + initial`` with ``sum(coef) == 0`` (or shifted to an anchor).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.special import ndtr
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from leaderboard.bt.cells import Cells, Layout, Objective, design_matrix, make_cells, maximise
from leaderboard.bt.newton import pair_curvature, pair_log_likelihood, solve_bt_batch
from leaderboard.bt.probit import PROBIT_NATS, probit_proba, tau_for_tie_rate
from leaderboard.bt.spec import (
    BTSpec,
    DisconnectedComparisonError,
    NonConvergenceError,
    UnboundedRatingWarning,
    check_comparison_graph,
)
from leaderboard.data import Outcome, PairCounts, PairStats, collapse_pairs

__all__ = ["BTFit", "ExtraTerm", "fit_bt", "predict_proba"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: A centred strength this far out (natural-log units, about 5000 Elo) means there is no finite maximum.
_MAX_ABS_THETA = 28.8
_PLAIN = BTSpec()


@dataclass(frozen=True)
class ExtraTerm:
    """A fitted parameter besides the ratings: its name, its index in ``BTFit.x`` and how it is reported
    (``points``: in rating points, ``scale / ln(base)`` per natural-log unit; ``exp``: as ``exp(x)``)."""

    name: str
    index: int
    kind: Literal["points", "exp"]


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
    log_likelihood : at the optimum, ties scored as half a win and half a loss (vote units) unless
        Davidson; weighted by the time weights; without the prior
    hessian : Hessian of the negative (penalised) log-likelihood with respect to ``x``
    score_outer : sum over votes of the outer products of per-vote scores w.r.t. ``x`` (sandwich meat)
    n_votes : number of votes
    unbounded : models flagged by :class:`~leaderboard.bt.spec.UnboundedRatingWarning`
    ridge : the ridge penalty used by the plain path (0 for the plain MLE)
    stats : the pair statistics of the votes fitted
    spec : the member of the family fitted
    x : the parameter vector the curvature refers to: ``coef`` for plain fits, the optimiser's vector
        (strengths with the last model at 0, position, style, ``log nu``) otherwise
    coef_map : linear map ``x -> coef`` (M x len(x)); None when ``x`` is ``coef``
    extra_terms : the fitted parameters besides the ratings
    position : left-side advantage(s) in natural-log units, shape (0,), (1,) or (M,)
    log_nu : Davidson ``log nu``, or Glenn-David ``log tau`` with the probit link (None for half-win ties)
    gamma : style coefficients (natural-log units per unit covariate)
    feature_names : names of the style covariates
    tie_rate : weighted share of ties among the votes fitted (the tie forecast of non-Davidson fits)
    cells : the engine rows of a non-plain fit (what its bootstrap resamples)
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
    spec: BTSpec = _PLAIN
    x: FloatArray = field(default_factory=lambda: np.zeros(0))
    coef_map: FloatArray | None = None
    extra_terms: tuple[ExtraTerm, ...] = ()
    position: FloatArray = field(default_factory=lambda: np.zeros(0))
    log_nu: float | None = None
    gamma: FloatArray = field(default_factory=lambda: np.zeros(0))
    feature_names: tuple[str, ...] = ()
    tie_rate: float = 0.0
    cells: Cells | None = None

    @property
    def ratings(self) -> FloatArray:
        """Alias of ``rating``."""
        return self.rating

    @property
    def theta(self) -> FloatArray:
        """Natural-log strengths (``coef * ln(base)``)."""
        out: FloatArray = self.coef * math.log(self.base)
        return out

    @property
    def nu(self) -> float:
        """Davidson tie propensity, or Glenn-David threshold with the probit link (0 without either)."""
        return 0.0 if self.log_nu is None else math.exp(self.log_nu)

    @property
    def n_params(self) -> int:
        """Free parameters of the three-outcome forecast (a tie rate counts as one when not Davidson)."""
        return int(len(self.models) + self.position.shape[0] + self.gamma.shape[0])

    def coef_of(self, x: FloatArray) -> FloatArray:
        """Centred log-``base`` strengths of parameter vectors ``x`` (one per row, or one vector)."""
        if self.coef_map is None:
            return x
        out: FloatArray = x @ self.coef_map.T
        return out

    def extras_of(self, x: FloatArray) -> dict[str, float]:
        """The fitted extra parameters of a parameter vector, as reported (points or ``exp``)."""
        per_nat = self.scale / math.log(self.base)
        return {
            t.name: (per_nat * float(x[t.index]) if t.kind == "points" else math.exp(float(x[t.index])))
            for t in self.extra_terms
        }


def _fit_sklearn(stats: PairStats, base: float, *, max_iter: int, tol: float) -> tuple[FloatArray, bool, int]:
    """Two weighted rows per pair: lo beats hi (weight ``2 wins_lo + ties``) and the reverse."""
    x_pair = design_matrix(stats.lo, stats.hi, stats.n_models, value=math.log(base))
    p = len(stats.lo)
    x = sp.vstack([x_pair, x_pair]).tocsr()
    y = np.concatenate([np.ones(p, dtype=np.int64), np.zeros(p, dtype=np.int64)])
    w = np.concatenate([2 * stats.wins_lo + stats.ties, 2 * stats.wins_hi + stats.ties])
    keep = w > 0
    model = LogisticRegression(C=np.inf, fit_intercept=False, solver="lbfgs", tol=tol, max_iter=max_iter)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(x[keep], y[keep], sample_weight=w[keep])
    converged = not any(issubclass(c.category, ConvergenceWarning) for c in caught)
    coef = np.asarray(model.coef_[0], dtype=np.float64)
    return coef - coef.mean(), converged, int(np.max(model.n_iter_))


def _offset(
    models: tuple[str, ...], coef: FloatArray, anchor: tuple[str, float] | None, scale: float, initial: float
) -> float:
    if anchor is None:
        return initial
    name, value = anchor
    if name not in models:
        raise ValueError(f"anchor model {name!r} is not among the models")
    return float(value) - scale * float(coef[models.index(name)])


def _tie_rate(counts: PairCounts) -> float:
    total = float(counts.count.sum())
    tied = (counts.outcome == Outcome.TIE) | (counts.outcome == Outcome.BOTHBAD)
    return float(counts.count[tied].sum()) / total if total > 0 else 0.0


def fit_bt(
    counts: PairCounts,
    *,
    spec: BTSpec = _PLAIN,
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
    """Maximum-likelihood (or, with a prior, MAP) fit of a member of the Bradley-Terry family.

    Parameters
    ----------
    counts : PairCounts
        Aggregated battles (with ``time`` per cell for time weights; one cell per battle when
        ``spec.features`` holds per-battle covariates).
    spec : BTSpec
        What to fit; the plain spec takes scikit-learn's L-BFGS plus a Newton polish on pair statistics,
        the others Newton's method (scipy ``trust-exact``) on the cells.
    anchor : (model, rating), optional
        Shift all ratings so that this model has this rating (default: mean rating ``initial``).
    scale, base, initial : float
        ``rating = scale * log_base(strength) + initial``.
    polish : bool
        Plain path: finish with Newton steps so the result is the exact optimum to machine precision
        (scikit-learn stops at ``tol``); ``False`` returns scikit-learn's coefficients as they are.
    max_iter, tol : int, float
        Iteration limit and tolerance (scikit-learn's L-BFGS, or the gradient norm per vote).
    on_unbounded : ``"warn"`` or ``"raise"``
        Plain path, when some models only won or only lost: warn with ``UnboundedRatingWarning`` and
        fit with ``unbounded_ridge`` (a weak Gaussian prior keeps numbers finite), or raise
        :class:`~leaderboard.bt.spec.DisconnectedComparisonError`. Other specs need a prior then.

    Returns
    -------
    BTFit

    Raises
    ------
    DisconnectedComparisonError
        Models never compared (directly or through others), or unbounded ones with ``on_unbounded="raise"``.
    NonConvergenceError
        If the optimiser stops before the optimum, or the optimum lies at infinity.
    ValueError
        Davidson ties without a single tie.
    """
    if on_unbounded not in ("warn", "raise"):
        raise ValueError("on_unbounded must be 'warn' or 'raise'")
    if not spec.is_plain:
        return _fit_cells(
            counts, spec, anchor=anchor, scale=scale, base=base, initial=initial, tol=tol, max_iter=max_iter
        )
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
    offset = _offset(models, coef, anchor, scale, initial)
    hessian, score_outer = pair_curvature(coef * ln_base, stats)
    if counts.is_weighted or np.any(counts.weight_spread > 0):
        # The sandwich's meat sums squared vote weights, each vote's own (``weight_sq``) where the
        # counts know them, else at its cell's mean weight (:attr:`PairCounts.squared_weights`).
        squared = counts.squared_weights
        _, score_outer = pair_curvature(coef * ln_base, collapse_pairs(replace(counts, count=squared)))
    return BTFit(
        models=models,
        rating=scale * coef + offset,
        coef=coef,
        offset=offset,
        scale=scale,
        base=base,
        initial=initial,
        anchor=anchor,
        converged=converged,
        n_iter=n_iter,
        solver=solver,
        log_likelihood=pair_log_likelihood(coef * ln_base, stats),
        hessian=ln_base**2 * hessian,
        score_outer=ln_base**2 * score_outer,
        n_votes=counts.n_votes,
        unbounded=unbounded,
        ridge=ridge,
        stats=stats,
        x=coef,
        tie_rate=_tie_rate(counts),
    )


def _extra_terms(
    layout: Layout, models: tuple[str, ...], names: tuple[str, ...], link: str
) -> tuple[ExtraTerm, ...]:
    terms: list[ExtraTerm] = []
    start = layout.position_slice.start
    if layout.n_position == 1:
        terms.append(ExtraTerm("position_advantage_elo", start, "points"))
    elif layout.n_position > 1:
        terms.extend(
            ExtraTerm(f"position_advantage_elo:{m}", start + k, "points") for k, m in enumerate(models)
        )
    if layout.has_nu:
        name = "tie_threshold_tau" if link == "probit" else "tie_propensity_nu"
        terms.append(ExtraTerm(name, layout.size - 1, "exp"))
    start = layout.feature_slice.start
    terms.extend(ExtraTerm(f"style_{name}_elo", start + k, "points") for k, name in enumerate(names))
    return tuple(terms)


def _fit_cells(
    counts: PairCounts,
    spec: BTSpec,
    *,
    anchor: tuple[str, float] | None,
    scale: float,
    base: float,
    initial: float,
    tol: float,
    max_iter: int,
) -> BTFit:
    """The general path: Newton's method (scipy ``trust-exact``) on the cells of
    :mod:`leaderboard.bt.cells`."""
    cells = make_cells(counts, spec)
    m = cells.n_models
    live = cells.count > 0
    if spec.has_tie_parameter and spec.nu_fixed is None and not np.any((cells.outcome == Outcome.TIE) & live):
        raise ValueError("a tie parameter needs at least one tie; with none it is 0 (use bt or tm)")
    if spec.position != "none" and cells.sided is not None and not np.any(cells.sided & live):
        raise ValueError("a left-side advantage needs battles with a known side; these have none")
    used = counts if spec.both_bad == "tie" else _without_both_bad(counts)
    stats = collapse_pairs(used)
    unbounded = check_comparison_graph(stats, counts.models, with_prior=spec.prior_sd is not None)
    if unbounded:
        raise NonConvergenceError(
            "no finite maximum-likelihood ratings: some models only won or only lost against the rest"
            f" ({', '.join(unbounded[:5])}); add votes or a prior (prior_sd)"
        )
    ln_base = math.log(base)
    layout = Layout.of(spec, m)
    objective = Objective(cells, spec, layout, nat_per_point=ln_base / scale)
    x0 = np.zeros(layout.size)
    cw = cells.count * cells.weight
    tie_rate = float(cw[cells.outcome == Outcome.TIE].sum() / cw.sum())
    if layout.has_nu:
        start = tau_for_tie_rate(tie_rate) if spec.link == "probit" else max(tie_rate, 1e-3)
        x0[-1] = math.log(start)
    x, n_iter, message = maximise(objective, x0, tol=tol, max_iter=max_iter)
    if message:
        raise NonConvergenceError(
            f"Bradley-Terry fit ({spec.position} position, {spec.ties} ties) did not converge: {message}"
        )
    # x -> centred coef: embed the free strengths (last model at 0), centre, change the log base
    embed = np.zeros((m, layout.size))
    embed[: m - 1, : m - 1] = np.eye(m - 1)
    coef_map = (np.eye(m) - 1.0 / m) @ embed / ln_base
    coef = coef_map @ x
    if np.max(np.abs(coef * ln_base)) > _MAX_ABS_THETA:
        raise NonConvergenceError(
            "ratings diverge: some model only wins or only loses, or the comparison graph is disconnected;"
            " add a prior (prior_sd) or more votes"
        )
    offset = _offset(counts.models, coef, anchor, scale, initial)
    log_nu = float(x[-1]) if layout.has_nu else objective.theta_fixed
    return BTFit(
        models=counts.models,
        rating=scale * coef + offset,
        coef=coef,
        offset=offset,
        scale=scale,
        base=base,
        initial=initial,
        anchor=anchor,
        converged=True,
        n_iter=n_iter,
        solver="trust-exact",
        log_likelihood=objective.loglik(x),
        hessian=objective.hess(x) * objective.total,
        score_outer=objective.meat(x),
        n_votes=counts.n_votes,
        unbounded=unbounded,
        ridge=0.0,
        stats=stats,
        spec=spec,
        x=x,
        coef_map=coef_map,
        extra_terms=_extra_terms(layout, counts.models, cells.feature_names, spec.link),
        position=x[layout.position_slice].copy(),
        log_nu=log_nu,
        gamma=x[layout.feature_slice].copy(),
        feature_names=cells.feature_names,
        tie_rate=tie_rate,
        cells=cells,
    )


def _without_both_bad(counts: PairCounts) -> PairCounts:
    keep = counts.outcome != Outcome.BOTHBAD
    return PairCounts(
        models=counts.models,
        model_a=counts.model_a[keep],
        model_b=counts.model_b[keep],
        outcome=counts.outcome[keep],
        count=counts.count[keep],
        time=None if counts.time is None else counts.time[keep],
        votes=None if counts.votes is None else counts.votes[keep],
        sided=None if counts.sided is None else counts.sided[keep],
        weight_sq=None if counts.weight_sq is None else counts.weight_sq[keep],
    )


def predict_proba(
    fit: BTFit, left: IntArray, right: IntArray, *, features: FloatArray | None = None
) -> FloatArray:
    """Three-outcome forecasts ``[P(left wins), P(tie), P(right wins)]`` for battles.

    A probit fit uses the normal curve (Glenn-David with a tie threshold, :mod:`leaderboard.bt.probit`).
    A Davidson fit gives ``e^h / D``, ``nu / D`` and ``e^-h / D`` with ``D = e^h + e^-h + nu`` and ``h``
    half the linear predictor; a fit without a tie parameter forecasts a tie at its fitted tie rate and
    splits the rest by its win probability, so every method can be scored on the same three outcomes.

    Parameters
    ----------
    fit : BTFit
    left, right : int arrays, shape (n,)
        Left and right model of each battle.
    features : array, shape (n, n_features), optional
        Style covariates (left minus right); required when the fit has some.

    Returns
    -------
    array, shape (n, 3)
    """
    beta = fit.theta
    u = beta[left] - beta[right]
    if fit.position.shape[0] == 1:
        u = u + fit.position[0]
    elif fit.position.shape[0] > 1:
        u = u + fit.position[left]
    if fit.gamma.shape[0]:
        if features is None:
            raise ValueError("this fit has style covariates; pass features")
        u = u + np.asarray(features) @ fit.gamma
    if fit.log_nu is None:
        p_left = ndtr(u / PROBIT_NATS) if fit.spec.link == "probit" else 1.0 / (1.0 + np.exp(-u))
        return np.column_stack(
            [(1 - fit.tie_rate) * p_left, np.full_like(u, fit.tie_rate), (1 - fit.tie_rate) * (1 - p_left)]
        )
    if fit.spec.link == "probit":
        return probit_proba(u, fit.log_nu)
    h = 0.5 * u
    log_d = np.logaddexp(np.logaddexp(h, -h), fit.log_nu)
    return np.column_stack([np.exp(h - log_d), np.exp(fit.log_nu - log_d), np.exp(-h - log_d)])
