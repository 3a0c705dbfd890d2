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
position, ties and self-preference, soft verdicts and battle clusters, and a dense Hessian. Here the
annotators may be thousands, most with a few votes: one shared position and tie parameter, a prior
instead of a fixed reference, and a sparse Hessian.

Fitted by Newton's method in a trust region on the negative log-posterior per unit weight (the
likelihood, its analytic gradient and sparse Hessian: :mod:`leaderboard.quality.rater_likelihood`; the
driver the Bradley-Terry engine uses too). Standard errors are the sandwich of the analytic Hessian of
the penalised objective and the per-vote scores, computed when the parameter vector is small enough for
a dense inverse (:data:`MAX_SANDWICH_PARAMS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from leaderboard.battles import Battles
from leaderboard.bt.cells import davidson_row_terms
from leaderboard.quality.rater_likelihood import RaterProblem, maximise_posterior

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
#: Tolerance of the fits made while the spread is estimated (per unit weight; the last fit uses the
#: caller's ``tol``): enough for a spread to 5%.
_ROUGH_TOL = 1e-6
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
    n_iter : Newton trust-region iterations (over every fit an estimated ``position_sd`` takes)
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
    max_iter, tol : iteration limit of each fit and its tolerance on the gradient per unit weight (in the
        variables scaled by the curvature, :func:`leaderboard.quality.rater_likelihood.maximise_posterior`)

    Raises
    ------
    ValueError
        No annotator ids, a non-positive prior, fewer than two models, or votes that give no finite fit.
    RuntimeError
        When the fit stops before the optimum.
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
    problem = RaterProblem(battles, codes, int(fitted.size), prior_sd, sd)
    rough = max(tol, _ROUGH_TOL) if estimate else tol  # the estimate needs no exact fit until it settles
    x0 = _start(battles, problem)
    x, n_iter = maximise_posterior(problem, x0, max_iter, rough)
    if estimate and problem.has_offsets and _spread_of_offsets(problem, x)[3] < _SPREAD_P:
        sd = _START_POSITION_SD
        problem.lam_b = 1.0 / sd**2
        x, more = maximise_posterior(
            problem, x0, max_iter, rough
        )  # not from the tight fit: its a_k absorbed sides
        n_iter += more
        for _ in range(_ESTIMATE_REFITS):
            old, (sd, free, info, _) = sd, _spread_of_offsets(problem, x)
            if abs(sd - old) <= _ESTIMATE_RTOL * old:
                sd = old  # settled: the fit made with it is polished below
                break
            problem.lam_b = 1.0 / sd**2
            x = x.copy()
            x[problem.i_b : problem.i_nu] = free * info / (info + problem.lam_b)  # re-shrunk: a near start
            x, more = maximise_posterior(problem, x, max_iter, rough)
            n_iter += more
    if rough != tol:
        x, more = maximise_posterior(problem, x, max_iter, tol)
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


def _spread_of_offsets(problem: RaterProblem, x: FloatArray) -> tuple[float, FloatArray, FloatArray, float]:
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


def _start(battles: Battles, problem: RaterProblem) -> FloatArray:
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
