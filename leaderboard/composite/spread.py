"""How far each judge's view of the models strays from the humans': the spread ``tau_s`` of its per-model
deviations, estimated by moments from a loose fit, and what estimating it adds to the covariance.

Without deviations a judge is assumed to see exactly the human ratings, and its thousands of verdicts
pin the ratings to its own view: intervals a third as wide as the human-only ones that cover the human
ratings a third of the time when judges deviate by 50 Elo (``scripts/composite_sim.py``). With them a
judge's verdicts tell the ratings at most ``tau_s`` apart from the humans', so what a judge adds shrinks
as its deviations grow. :func:`estimate_deviation_sd` says how ``tau_s`` is found.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.stats import chi2

from leaderboard.composite.layout import ParameterLayout, make_layout
from leaderboard.composite.likelihood import (
    check_connected,
    log_posterior_hessian,
    make_vote_cells,
    maximise_posterior,
)
from leaderboard.composite.model import CompositeData, CompositeOptions

__all__ = [
    "deviation_spread",
    "estimate_deviation_sd",
    "random_variance",
    "spread_moments",
    "spread_uncertainty",
]

FloatArray = npt.NDArray[np.float64]

_DEFAULTS = CompositeOptions()

# the deviations' prior in the loose fit that measures their spread: far wider than any judge's deviations
# (so they come out barely shrunk), narrow enough to keep the unidentified common shift well conditioned
_LOOSE_DEVIATION_SD_ELO = 400.0
# a judge whose deviations spread less than this (rating points) gets none: the fit is then the plain one
_MIN_DEVIATION_SD_ELO = 1.0


def estimate_deviation_sd(
    data: CompositeData, options: CompositeOptions = _DEFAULTS, weights: FloatArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """Each judge's spread ``tau_s`` of per-model deviations from the human ratings (rating points) and
    Cochran's p-value of that spread (NaN for the humans and sources not estimated).

    Empirical Bayes by moments: a loose fit (every judge's deviations under a wide prior,
    ``_LOOSE_DEVIATION_SD_ELO``, so they come out as good as un-shrunk) gives each judge's deviations
    with their covariance from the inverse Hessian (which includes the uncertainty of the ratings they
    are measured against); DerSimonian and Laird's moments, generalised to correlated estimates
    (:func:`spread_moments`), turn them into ``tau_s^2``: the spread beyond the sampling noise. A
    judge's discrimination is the steepness of its own view ``theta + delta``, whose scale the
    deviations' prior sets (the deviations take the smallest size that explains the verdicts, which
    understates the spread by ``c^2``, about 0.89 for a 50-point spread: :func:`spread_moments` divides
    it out). Closed form, no refit: the loose fit's deviations need no other un-shrinking. Chosen over
    the Laplace marginal likelihood for being one extra fit and no inner optimisation over ``tau``, and
    because moments do not collapse to 0 the way a maximum-likelihood variance can with few models. A
    spread below ``_MIN_DEVIATION_SD_ELO`` counts as 0: that judge gets no deviations at all, so when no
    judge deviates the fit is exactly the one without them.
    """
    check_connected(data)
    sd, p_value, _, _ = deviation_spread(data, options, weights)
    unit = options.scale / np.log(options.base)
    return (np.zeros(len(data.sources)) if sd is None else unit * sd), p_value


def spread_moments(
    estimate: FloatArray, cov: FloatArray, directions: FloatArray, view_norm2: float = 0.0
) -> tuple[float, float, float]:
    """The moment estimate of ``tau^2`` from one judge's loose deviations (``estimate``, covariance
    ``cov``) and Cochran's p-value: DerSimonian and Laird's estimator
    (:func:`leaderboard.quality.judge_position.between_variance`) generalised to correlated estimates, which
    these are (every deviation is measured against ratings that share the human votes).

    Directions (the columns of ``directions``) that carry no information about ``tau`` are projected
    out: the common shift (it cancels in every rating difference), the judge's own view ``theta + delta``
    (scaling the view and dividing the discrimination by the same factor leaves every prediction alone)
    and, with a self-preference, its family's members (a shift of them is the self-preference term). Only
    the loose prior sets the deviations along them: their variance there is the prior's width, not
    noise, and they would count in the degrees of freedom without adding to ``Q``. With ``P`` that
    projection, ``M = (P V P)^+`` and ``r`` its rank, ``Q = d^T M d`` is chi-squared on ``r`` degrees of
    freedom when the judge has no deviations, and ``E Q = r + tau^2 tr(M)`` otherwise, for fixed
    directions.

    The view's direction is not fixed: it is ``theta + delta``, the deviations' own. The loose fit sets
    the view's scale so the deviations are as small as they can be (orthogonal to the view), which
    measures ``c delta`` with ``c = |theta|^2 / (|theta|^2 + k tau^2)`` (``k = r + 1`` the directions
    the verdicts pin, ``|theta|^2`` the squared length of the centred ratings, ``view_norm2``): the
    moments give ``c^2 tau^2``, about 0.89 of ``tau^2`` for a 50-point spread on a board spread by 200
    points. The final fit's prior has the model's scale
    (:func:`~leaderboard.composite.layout.pinned_dims`), so the moments are divided by ``c^2``, with ``c``
    from the estimate itself (two steps of the fixed point: the second moves it by about 1%, a third by
    much less). ``view_norm2`` 0: no correction.

    Third, the estimate's own sampling variance: ``Var Q = 2 tr((M S)^2)`` with ``S = P V P + tau^2 P``
    the covariance of the projected deviations, over ``tr(M)^2``, times the ``c^-4`` of the correction
    (:func:`spread_uncertainty` carries it into the intervals).
    """
    basis, _ = np.linalg.qr(directions)
    proj = np.eye(len(estimate)) - basis @ basis.T
    inner = proj @ cov @ proj
    precision = np.linalg.pinv((inner + inner.T) / 2, rcond=1e-10, hermitian=True)
    rank = int(np.linalg.matrix_rank(precision, hermitian=True))
    if rank < 1:
        return 0.0, 1.0, 0.0
    d = proj @ estimate
    q = float(d @ precision @ d)
    moments = max(0.0, (q - rank) / float(np.trace(precision)))
    tau2 = moments
    if view_norm2 > 0:
        for _ in range(2):  # tau^2 = moments / c(tau^2)^2, c = |theta|^2 / (|theta|^2 + k tau^2)
            tau2 = moments * (1.0 + (rank + 1) * tau2 / view_norm2) ** 2
    spread = precision @ (inner + moments * proj)
    scale = tau2 / moments if moments > 0 else 1.0
    variance = 2.0 * float(np.sum(spread * spread.T)) / float(np.trace(precision)) ** 2 * scale**2
    return tau2, float(chi2.sf(q, rank)), variance


def deviation_spread(
    data: CompositeData, options: CompositeOptions, weights: FloatArray | None
) -> tuple[FloatArray | None, FloatArray, tuple[FloatArray, ParameterLayout] | None, FloatArray]:
    """``tau_s`` per source in natural-log units (``None``: no deviations), Cochran's p-values, the
    loose fit (free vector and layout) when one was run, a start for the final fit, and the sampling
    variance of each estimated ``tau_s^2`` (0 where fixed or not estimated)."""
    n_sources = len(data.sources)
    p_value = np.full(n_sources, np.nan)
    unit = options.scale / np.log(options.base)
    judges = np.unique(np.asarray(data.source))
    judges = judges[judges > 0]
    tau2_var = np.zeros(n_sources)
    if not options.deviations or not len(judges):
        return None, p_value, None, tau2_var
    if options.deviation_sd_elo is not None:
        if not np.isfinite(options.deviation_sd_elo) or options.deviation_sd_elo < 0:
            raise ValueError("deviation_sd_elo must be finite and non-negative")
        sd = np.zeros(n_sources)
        sd[judges] = options.deviation_sd_elo / unit
        return sd, p_value, None, tau2_var
    loose_sd = np.zeros(n_sources)
    loose_sd[judges] = _LOOSE_DEVIATION_SD_ELO / unit
    lay = make_layout(data, options, loose_sd, loose=True)
    cells = make_vote_cells(data, options, lay)
    stats = cells.stats(weights)
    x = maximise_posterior(lay, cells, stats, options, None).x
    bread = np.asarray(np.linalg.pinv(-log_posterior_hessian(x, lay, cells, stats)), dtype=np.float64)
    theta = lay.split(x)[0]
    sd = np.zeros(n_sources)
    for s in lay.learn_dev.tolist():
        rows = cells.src == s
        seen = np.unique(np.concatenate([cells.a[rows], cells.b[rows]]))
        if len(seen) < 4:
            continue
        cols = lay.deviation_block(s)[seen]
        directions = [np.ones(len(seen)), theta[seen] + x[cols]]
        family = data.family.get(s)
        if family is not None and s in set(lay.learn_sp.tolist()) and data.model_family:
            member = np.array([data.model_family[k] == family for k in seen], dtype=float)
            if 0 < member.sum() < len(seen):
                directions.append(member)
        if len(seen) < len(directions) + 2:
            continue
        centred = theta[seen] - theta[seen].mean()
        tau2, p_value[s], variance = spread_moments(
            x[cols], bread[np.ix_(cols, cols)], np.stack(directions, axis=1), float(centred @ centred)
        )
        tau = float(np.sqrt(tau2))
        sd[s] = tau if unit * tau >= _MIN_DEVIATION_SD_ELO else 0.0
        tau2_var[s] = variance if sd[s] > 0 else 0.0
    return sd, p_value, (x, lay), tau2_var


def spread_uncertainty(
    x: FloatArray, info: FloatArray, meat: FloatArray, lay: ParameterLayout, tau2_var: FloatArray
) -> FloatArray:
    """What the plug-in spread leaves out of the covariance: ``tau_s^2`` is estimated from about twenty
    deviations per judge (a coefficient of variation near 0.5), and the covariance ``V(tau^2)`` treats it
    as known. Second-order terms in the spread's sampling variance ``v_s`` (Kackar and Harville; Prasad
    and Rao), per judge:

    - ``J v_s J^T`` with ``J = d x / d tau_s^2 = B_(., s) (x_s - centre_s) / tau_s^4``: the ratings move
      with the estimated spread (how far to trust the judge against the humans);
    - ``-V'' v_s / 2``: ``V`` is concave in ``tau^2`` (a judge's worth saturates), so by Jensen an
      unbiased ``tau^2`` gives too small a covariance on average; ``V''`` by central differences at
      ``tau^2 (1 +- 1/2)``, holding the fit (only the prior's precision changes in ``B`` and ``P``).

    No quantile or inflation factor: both are expectations under the estimate's own sampling
    distribution, and vanish when the spread is known or when the judge's deviations are many."""
    plain = info - np.diag(lay.random)

    def sandwich(random: FloatArray) -> tuple[FloatArray, FloatArray]:
        bread = np.asarray(np.linalg.pinv(plain + np.diag(random)), dtype=np.float64)
        out: FloatArray = bread @ (meat + np.diag(random)) @ bread
        return out, bread

    base, bread = sandwich(lay.random)
    extra = np.zeros_like(base)
    for s in lay.learn_dev.tolist():
        var = float(tau2_var[s])
        if not var > 0:
            continue
        block = lay.deviation_block(s)
        t = 1.0 / float(lay.random[block[0]])
        moved = []
        for tt in (1.5 * t, 0.5 * t):
            random = lay.random.copy()
            random[block] = 1.0 / tt
            moved.append(sandwich(random)[0])
        second = (moved[0] - 2.0 * base + moved[1]) / (0.5 * t) ** 2
        jac = bread[:, block] @ (x[block] - lay.centre[block]) / t**2
        extra += var * (np.outer(jac, jac) - 0.5 * second)
    return extra


def random_variance(lay: ParameterLayout) -> FloatArray:
    """``tau_s^2`` per source (natural-log units, 0 where none) from the layout's prior."""
    out = np.zeros(lay.n_sources)
    for s in lay.learn_dev.tolist():
        out[s] = 1.0 / float(lay.random[lay.deviation_block(s)[0]])
    return out
