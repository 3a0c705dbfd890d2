"""One rating scale for human votes and LLM-judge verdicts: the source-aware composite Bradley-Terry fit.

Pooling judge verdicts with human votes as if they were one source biases the board (judges prefer the
left answer and their own family) and overstates the evidence (a judge's verdict and a human's vote on
the same battle are not independent). The model (:mod:`leaderboard.composite.model`) gives every source
its own discrimination, position, ties and self-preference and every judge its own view of each model,
a random effect whose spread is estimated first (:mod:`leaderboard.composite.spread`). Fits, refits and
bootstrap rounds run on the aggregated cells (:mod:`leaderboard.composite.likelihood`) through the
package's one Newton trust-region driver.

Intervals come from the cluster-robust sandwich, one cluster per battle (every source's votes on one
battle, and a judge's two orders of it), or from a bootstrap that resamples those battles. The
sandwich's meat is built from per-battle score sums (a sparse battle-by-parameter matrix), and a
bootstrap round is a multinomial draw over battles mapped to cell sums through a sparse battle-by-cell
matrix.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from leaderboard.bt.bootstrap import draw_multinomial
from leaderboard.bt.intervals import percentile_intervals
from leaderboard.composite.layout import ParameterLayout, carry_start, make_layout
from leaderboard.composite.likelihood import (
    VoteCells,
    check_connected,
    cluster_scores,
    log_posterior_hessian,
    log_posterior_value,
    make_vote_cells,
    maximise_posterior,
)
from leaderboard.composite.model import CompositeData, CompositeFit, CompositeOptions, confounded_positions
from leaderboard.composite.spread import deviation_spread, random_variance, spread_uncertainty

__all__ = ["bootstrap_composite", "fit_composite", "fit_on_cells", "standard_errors"]

FloatArray = npt.NDArray[np.float64]

_DEFAULTS = CompositeOptions()

# cluster draws held at once by the bootstrap (rounds per block times battles): about 40 MB of counts
_BLOCK_DRAWS = 5_000_000


def fit_composite(
    data: CompositeData,
    options: CompositeOptions = _DEFAULTS,
    *,
    weights: FloatArray | None = None,
    with_cov: bool = True,
    x0: FloatArray | None = None,
) -> CompositeFit:
    """Fit the source-aware composite model; ``weights`` multiplies the vote weights (the bootstrap).

    A source whose position term is confounded with the ratings (:func:`confounded_positions`) gets no
    position term (0) and is named with the reason in ``position_fixed``: fitting it would trade
    rating differences for an arbitrary left-side advantage and report thousands of points of both.

    With ``options.deviations`` each judge's per-model deviations are a random effect whose spread is
    estimated first (:func:`~leaderboard.composite.spread.estimate_deviation_sd`, unless
    ``options.deviation_sd_elo`` fixes it) and whose prior enters the fit; the covariance then carries
    that spread (:func:`fit_on_cells`).
    """
    check_connected(data)
    sd, p_value, loose, tau2_var = deviation_spread(data, options, weights)
    lay = make_layout(data, options, sd)
    cells = make_vote_cells(data, options, lay)
    if x0 is not None and len(x0) != lay.n_params:
        x0 = None
    if x0 is None and loose is not None:
        x0 = carry_start(loose, lay)
    fit = fit_on_cells(data, options, lay, cells, cells.stats(weights), weights, with_cov, x0, tau2_var)
    return replace(fit, deviation_p_value=p_value)


def fit_on_cells(
    data: CompositeData,
    options: CompositeOptions,
    lay: ParameterLayout,
    cells: VoteCells,
    stats: FloatArray,
    weights: FloatArray | None,
    with_cov: bool,
    x0: FloatArray | None,
    tau2_var: FloatArray | None = None,
) -> CompositeFit:
    """Fit on the cells and, with ``with_cov``, the covariance ``B (M + P) B``: ``B`` the inverse of the
    penalised information (the deviations' prior included), ``M`` the battle-clustered score products and
    ``P`` the deviations' prior precision. ``P`` is the variance of the prior's score when the deviations
    are random (``delta ~ N(0, tau^2)``); without it the sandwich would hold this judge's deviations fixed
    and report how well the judge's own view is measured, not the human ratings. Under the model
    ``M + P`` is about ``B^-1``, so the covariance is about the posterior one, which carries ``tau``;
    ``tau2_var`` (the sampling variance of each estimated ``tau_s^2``) adds what the plug-in spread
    leaves out (:func:`~leaderboard.composite.spread.spread_uncertainty`)."""
    solution = maximise_posterior(lay, cells, stats, options, x0)
    x, converged, n_iter = solution.x, solution.converged, solution.n_iter
    # the likelihood: the log posterior less the priors and the deviations' Jacobian
    ll = (
        log_posterior_value(x, lay, cells, stats)
        + 0.5 * float(lay.prior @ (x - lay.centre) ** 2)
        + float(lay.view_dims @ x)
    )
    theta, log_a, pos, log_nu, sp_ = lay.split(x)
    unit = options.scale / np.log(options.base)
    p = lay.n_params
    cov = np.full((p, p), np.nan)
    se_full = np.full(lay.n_models + 4 * lay.n_sources, np.nan)
    if with_cov:
        battle = np.arange(len(data.model_a)) if data.battle is None else np.asarray(data.battle)
        cluster = np.unique(battle, return_inverse=True)[1].astype(np.int64)
        info = -log_posterior_hessian(x, lay, cells, stats)
        bread = np.linalg.pinv(info)
        scores = cluster_scores(x, lay, cells, cluster, weights)
        meat = (scores.T @ scores).toarray()
        cov = bread @ (meat + np.diag(lay.random)) @ bread
        if tau2_var is not None and np.any(tau2_var > 0):
            cov = cov + spread_uncertainty(x, info, meat, lay, tau2_var)
        se_full = standard_errors(cov, lay, log_a)
    m, s = lay.n_models, lay.n_sources
    return CompositeFit(
        models=data.models,
        sources=data.sources,
        rating=options.initial + unit * (theta - theta.mean()),
        discrimination=np.exp(log_a),
        position=unit * pos,
        self_preference=unit * sp_,
        nu=np.exp(log_nu),
        log_likelihood=ll,
        converged=converged,
        n_iter=n_iter,
        x=x,
        cov=cov,
        rating_se=unit * se_full[:m],
        discrimination_se=se_full[m : m + s],
        position_se=unit * se_full[m + s : m + 2 * s],
        self_preference_se=unit * se_full[m + 2 * s : m + 3 * s],
        options=options,
        position_fixed=(
            {data.sources[k]: why for k, why in confounded_positions(data).items()}
            if options.position
            else {}
        ),
        deviation_sd=unit * np.sqrt(random_variance(lay)),
        deviation=unit * lay.deviation(x),
        deviation_p_value=np.full(s, np.nan),
    )


def standard_errors(cov: FloatArray, lay: ParameterLayout, log_a: FloatArray) -> FloatArray:
    """Standard errors of the centred ratings, discriminations (delta method), positions and
    self-preferences, laid out as ``[models | a per source | pos | sp | spare]`` (NaN where fixed)."""
    m, s = lay.n_models, lay.n_sources
    out = np.full(m + 4 * s, np.nan)
    n_theta = m - 1
    centre = np.eye(m) - 1.0 / m
    lift = np.zeros((m, n_theta))
    lift[1:, :] = np.eye(n_theta)
    t_map = centre @ lift
    out[:m] = np.sqrt(np.clip(np.diag(t_map @ cov[:n_theta, :n_theta] @ t_map.T), 0, None))
    cuts = np.cumsum(lay.sizes)
    diag = np.sqrt(np.clip(np.diag(cov), 0, None))
    out[m + lay.learn_a] = diag[cuts[0] : cuts[1]] * np.exp(log_a[lay.learn_a])
    out[m + s + lay.learn_pos] = diag[cuts[1] : cuts[2]]
    out[m + 2 * s + lay.learn_sp] = diag[cuts[3] : cuts[4]]
    return out


def bootstrap_composite(
    data: CompositeData,
    options: CompositeOptions = _DEFAULTS,
    *,
    rounds: int = 200,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Percentile intervals of the ratings from a bootstrap over battles (every vote of a battle moves
    together); returns ``(low, high, samples)``. The multinomial draws are the package's one sampler.

    The judges' deviations are random effects: resampling battles redraws the votes but not the judges'
    views, so each round also redraws the deviations' prior mean from ``N(0, tau_s^2)`` (a randomised
    prior: its score then varies by the prior precision, the ``P`` of the sandwich in :func:`fit_on_cells`),
    with ``tau_s`` held at the full data's estimate (not re-estimated per round: that would cost a loose
    fit per round). So, unlike the sandwich (:func:`~leaderboard.composite.spread.spread_uncertainty`),
    these intervals leave out the spread's own sampling uncertainty: with a panel of judges that is
    several points of coverage."""
    battle = np.arange(len(data.model_a)) if data.battle is None else np.asarray(data.battle)
    codes = np.unique(battle, return_inverse=True)[1].astype(np.int64)
    n_groups = int(codes.max()) + 1
    check_connected(data)
    sd, _, loose, _ = deviation_spread(data, options, None)
    lay = make_layout(data, options, sd)
    cells = make_vote_cells(data, options, lay)
    per_cluster = cells.by_cluster(codes, n_groups)
    rng = np.random.default_rng(seed)
    start_x = None if loose is None else carry_start(loose, lay)
    base = fit_on_cells(data, options, lay, cells, cells.stats(), None, False, start_x)
    random_sd = np.sqrt(np.divide(1.0, lay.random, out=np.zeros_like(lay.random), where=lay.random > 0))
    samples = np.empty((rounds, len(data.models)))
    unit = options.scale / np.log(options.base)
    block = max(1, min(rounds, _BLOCK_DRAWS // n_groups))
    for start in range(0, rounds, block):
        size = min(block, rounds - start)
        draws = draw_multinomial(np.ones(n_groups, dtype=np.int64), size, rng).astype(float)
        round_stats = np.asarray(per_cluster.T @ draws.T).T.reshape(size, 3, cells.n_cells)
        for r in range(size):
            round_lay = (
                replace(lay, centre=rng.normal(0.0, 1.0, lay.n_params) * random_sd) if sd is not None else lay
            )
            x = maximise_posterior(round_lay, cells, round_stats[r].T, options, base.x).x
            theta = lay.split(x)[0]
            samples[start + r] = options.initial + unit * (theta - theta.mean())
    low, high = percentile_intervals(samples, level)
    return low, high, samples
