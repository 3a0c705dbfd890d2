"""One rating scale for human votes and LLM-judge verdicts: the source-aware composite Bradley-Terry fit.

Pooling judge verdicts with human votes as if they were one source biases the board (judges prefer the
left answer and their own family) and overstates the evidence (a judge's verdict and a human's vote on
the same battle are not independent). Here every vote carries its source, and each source ``s`` has

- a discrimination ``a_s`` (how steep its win curve is; the human pool, source 0, is fixed at 1), so the
  ratings stay on the human scale,
- its own left-side advantage ``pos_s`` and Davidson tie parameter ``nu_s``,
- for a judge, a self-preference ``sp_s`` added for the models of its own family,

with the linear predictor ``eta = a_s * (theta_a - theta_b + pos_s * sided + sp_s * (f_a - f_b))``
(position and self-preference are in rating units, so they read in Elo). Soft verdicts (a probability
or a five-level verdict) enter as a fractional outcome ``y``: ``y log P(left) + (1 - y) log P(right)``.
Intervals come from the cluster-robust sandwich, one cluster per battle (every source's votes on one
battle, and a judge's two orders of it), or from a bootstrap that resamples those battles.

The parameter count is small (models plus a few per source), so the fit is L-BFGS on the analytic
gradient with a finite-difference Hessian; with every extra term off and equal weights it is exactly
the plain Bradley-Terry likelihood of the pooled votes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["CompositeData", "CompositeFit", "CompositeOptions", "bootstrap_composite", "fit_composite"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class CompositeOptions:
    """Which per-source terms the composite fit learns (all on by default)."""

    discrimination: bool = True
    position: bool = True
    ties: bool = True
    self_preference: bool = True
    scale: float = 400.0
    base: float = 10.0
    initial: float = 1000.0
    max_iter: int = 2000


@dataclass(frozen=True)
class CompositeData:
    """One row per vote or verdict.

    Attributes
    ----------
    models, sources : names; source 0 is the human pool (discrimination fixed at 1)
    model_a, model_b, source : int arrays indexing them
    score : float array in [0, 1], the left side's share of the win (1, 0, or fractional for soft
        verdicts); ignored where ``tie`` is set
    tie : bool array, a tie verdict (with ties off it scores 0.5)
    weight : per-vote weight (``None``: 1)
    sided : whether the vote knows which answer was on the left (``None``: all do)
    battle : cluster id per vote: every vote on one battle shares it (``None``: each vote its own)
    family : per source, the family of models it prefers (``None`` for no family); ``model_family``
        maps a model index to its family
    """

    models: tuple[str, ...]
    sources: tuple[str, ...]
    model_a: IntArray
    model_b: IntArray
    source: IntArray
    score: FloatArray
    tie: npt.NDArray[np.bool_]
    weight: FloatArray | None = None
    sided: npt.NDArray[np.bool_] | None = None
    battle: IntArray | None = None
    family: Mapping[int, str] = field(default_factory=dict)
    model_family: Sequence[str | None] = ()

    def __post_init__(self) -> None:
        n = int(np.shape(self.model_a)[0])
        for name in ("model_b", "source", "score", "tie"):
            if int(np.shape(getattr(self, name))[0]) != n:
                raise ValueError(f"{name} must have one entry per vote ({n})")
        for name in ("weight", "sided", "battle"):
            value = getattr(self, name)
            if value is not None and int(np.shape(value)[0]) != n:
                raise ValueError(f"{name} must have one entry per vote ({n})")
        if n == 0:
            raise ValueError("no votes")
        m, s = len(self.models), len(self.sources)
        if m < 2 or s < 1:
            raise ValueError("need at least two models and one source")
        for name, top in (("model_a", m), ("model_b", m), ("source", s)):
            idx = np.asarray(getattr(self, name))
            if idx.min() < 0 or idx.max() >= top:
                raise ValueError(f"{name} index out of range")
        if np.any(np.asarray(self.model_a) == np.asarray(self.model_b)):
            raise ValueError("a model cannot battle itself")
        score = np.asarray(self.score, dtype=float)
        if not np.all(np.isfinite(score)) or score.min() < 0 or score.max() > 1:
            raise ValueError("scores must lie in [0, 1]")
        if self.weight is not None:
            w = np.asarray(self.weight, dtype=float)
            if not np.all(np.isfinite(w)) or w.min() < 0:
                raise ValueError("weights must be finite and non-negative")
        if self.model_family and len(self.model_family) != m:
            raise ValueError("model_family must name one family (or None) per model")


@dataclass(frozen=True)
class CompositeFit:
    """The fitted composite: ratings on the human scale and the per-source terms, with covariance.

    ``rating`` is in rating points (mean ``initial``); ``discrimination`` per source; ``position`` and
    ``self_preference`` in rating points per source (0 where not learned); ``nu`` the Davidson tie
    parameter per source (0 with ties off). ``cov`` is the cluster-robust covariance of the free
    parameters, ``rating_se`` the standard errors of the ratings in rating points.
    """

    models: tuple[str, ...]
    sources: tuple[str, ...]
    rating: FloatArray
    discrimination: FloatArray
    position: FloatArray
    self_preference: FloatArray
    nu: FloatArray
    log_likelihood: float
    converged: bool
    n_iter: int
    x: FloatArray
    cov: FloatArray
    rating_se: FloatArray
    discrimination_se: FloatArray
    position_se: FloatArray
    self_preference_se: FloatArray
    options: CompositeOptions

    def probabilities(self, model_a: IntArray, model_b: IntArray, source: int = 0) -> FloatArray:
        """Forecasts ``(left wins, tie, right wins)`` per row as ``source`` would vote, sides known (no
        family term: a forecast of the human pool, or of a judge on models outside its family)."""
        unit = self.options.scale / np.log(self.options.base)
        u = (self.rating[model_a] - self.rating[model_b] + self.position[source]) / unit
        eta = self.discrimination[source] * u
        nu = self.nu[source]
        denominator = np.exp(eta / 2) + np.exp(-eta / 2) + nu
        probs: FloatArray = np.stack([np.exp(eta / 2), np.full_like(eta, nu), np.exp(-eta / 2)], axis=1)
        out: FloatArray = probs / denominator[:, None]
        return out

    def intervals(self, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
        """Normal (Wald) intervals of the ratings from the sandwich covariance."""
        from scipy.stats import norm

        z = float(norm.ppf(0.5 + level / 2))
        return self.rating - z * self.rating_se, self.rating + z * self.rating_se


@dataclass(frozen=True)
class _Layout:
    """Where each block of parameters sits in the free vector ``x``."""

    n_models: int
    n_sources: int
    learn_a: IntArray  # source indices with a learned discrimination
    learn_pos: IntArray
    learn_nu: IntArray
    learn_sp: IntArray

    @property
    def sizes(self) -> tuple[int, int, int, int, int]:
        return (
            self.n_models - 1,
            len(self.learn_a),
            len(self.learn_pos),
            len(self.learn_nu),
            len(self.learn_sp),
        )

    @property
    def n_params(self) -> int:
        return sum(self.sizes)

    def split(self, x: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        """Full per-model and per-source arrays from the free vector (model 0 at 0 before centring)."""
        cuts = np.cumsum(self.sizes)
        theta = np.concatenate([[0.0], x[: cuts[0]]])
        log_a = np.zeros(self.n_sources)
        log_a[self.learn_a] = x[cuts[0] : cuts[1]]
        pos = np.zeros(self.n_sources)
        pos[self.learn_pos] = x[cuts[1] : cuts[2]]
        log_nu = np.full(self.n_sources, -np.inf)
        log_nu[self.learn_nu] = x[cuts[2] : cuts[3]]
        sp = np.zeros(self.n_sources)
        sp[self.learn_sp] = x[cuts[3] : cuts[4]]
        return theta, log_a, pos, log_nu, sp


def _layout(data: CompositeData, options: CompositeOptions) -> _Layout:
    s = len(data.sources)
    present = np.unique(np.asarray(data.source))
    judges = present[present > 0]
    has_family = np.array([j for j in judges if data.family.get(int(j)) is not None], dtype=np.int64)
    tied = np.unique(np.asarray(data.source)[np.asarray(data.tie, dtype=bool)])
    sided = (
        np.ones(len(data.source), dtype=bool) if data.sided is None else np.asarray(data.sided, dtype=bool)
    )
    with_side = np.unique(np.asarray(data.source)[sided])
    return _Layout(
        n_models=len(data.models),
        n_sources=s,
        learn_a=judges.astype(np.int64) if options.discrimination else np.zeros(0, np.int64),
        learn_pos=with_side.astype(np.int64) if options.position else np.zeros(0, np.int64),
        learn_nu=tied.astype(np.int64) if options.ties else np.zeros(0, np.int64),
        learn_sp=has_family if options.self_preference else np.zeros(0, np.int64),
    )


@dataclass(frozen=True)
class _Votes:
    a: IntArray
    b: IntArray
    src: IntArray
    y: FloatArray
    t: FloatArray
    w: FloatArray
    side: FloatArray
    fam: FloatArray  # f_a - f_b for the vote's source family (0 when the source has none)


def _votes(data: CompositeData, options: CompositeOptions, weights: FloatArray | None = None) -> _Votes:
    n = len(data.model_a)
    tie = np.asarray(data.tie, dtype=bool)
    y = np.where(tie, 0.5, np.asarray(data.score, dtype=float))
    t = (tie & options.ties).astype(float)
    w = np.ones(n) if data.weight is None else np.asarray(data.weight, dtype=float)
    if weights is not None:
        w = w * weights
    side = np.ones(n) if data.sided is None else np.asarray(data.sided, dtype=float)
    src = np.asarray(data.source, dtype=np.int64)
    a = np.asarray(data.model_a, dtype=np.int64)
    b = np.asarray(data.model_b, dtype=np.int64)
    fam = np.zeros(n)
    if data.model_family:
        for s, family in data.family.items():
            if family is None:
                continue
            member = np.array([f == family for f in data.model_family], dtype=float)
            rows = src == s
            fam[rows] = member[a[rows]] - member[b[rows]]
    return _Votes(a, b, src, y, t, w, side, fam)


def _per_vote(
    x: FloatArray, lay: _Layout, v: _Votes
) -> tuple[float, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Log-likelihood, and per vote: d l / d eta, d l / d log nu, eta, and the rating-unit predictor."""
    theta, log_a, pos, log_nu, sp = lay.split(x)
    u = theta[v.a] - theta[v.b] + pos[v.src] * v.side + sp[v.src] * v.fam
    eta = np.exp(log_a[v.src]) * u
    nu = np.exp(log_nu[v.src])
    half = np.abs(eta) / 2
    # D = e^{eta/2} + e^{-eta/2} + nu, computed as e^{|eta|/2} (1 + e^{-|eta|} + nu e^{-|eta|/2})
    inner = 1 + np.exp(-2 * half) + nu * np.exp(-half)
    log_d = half + np.log(inner)
    diff = np.sign(eta) * (1 - np.exp(-2 * half)) / inner  # (e^{eta/2} - e^{-eta/2}) / D
    nu_share = nu * np.exp(-half) / inner  # nu / D
    with np.errstate(divide="ignore", invalid="ignore"):
        tie_term = np.where(v.t > 0, v.t * log_nu[v.src], 0.0)
    ll = float(np.sum(v.w * ((1 - v.t) * (v.y - 0.5) * eta + tie_term - log_d)))
    g_eta = v.w * ((1 - v.t) * (v.y - 0.5) - diff / 2)
    g_nu = v.w * (v.t - nu_share)
    return ll, g_eta, g_nu, eta, u


def _score_rows(x: FloatArray, lay: _Layout, v: _Votes) -> tuple[float, list[tuple[IntArray, FloatArray]]]:
    """The log-likelihood and the per-vote score as (parameter index, value) columns."""
    ll, g_eta, g_nu, eta, u = _per_vote(x, lay, v)
    _, log_a, _, _, _ = lay.split(x)
    scale_a = np.exp(log_a[v.src])
    g_u = g_eta * scale_a
    n_theta = lay.n_models - 1
    cols: list[tuple[IntArray, FloatArray]] = []
    cols.append((v.a - 1, g_u))  # model 0 is the reference: index -1 dropped below
    cols.append((v.b - 1, -g_u))
    offset = n_theta
    for learned, value in (
        (lay.learn_a, g_eta * eta),
        (lay.learn_pos, g_u * v.side),
        (lay.learn_nu, g_nu),
        (lay.learn_sp, g_u * v.fam),
    ):
        where = np.full(lay.n_sources, -1, dtype=np.int64)
        where[learned] = offset + np.arange(len(learned))
        idx = where[v.src]
        cols.append((np.where(idx >= 0, idx, -1), np.where(idx >= 0, value, 0.0)))
        offset += len(learned)
    return ll, cols


def _gradient(x: FloatArray, lay: _Layout, v: _Votes) -> tuple[float, FloatArray]:
    ll, cols = _score_rows(x, lay, v)
    grad = np.zeros(lay.n_params + 1)
    for idx, value in cols:
        grad += np.bincount(idx + 1, weights=value, minlength=lay.n_params + 1)
    return ll, grad[1:]


def _cluster_scores(x: FloatArray, lay: _Layout, v: _Votes, battle: IntArray) -> FloatArray:
    """Score sums per battle (rows) and parameter (columns)."""
    _, cols = _score_rows(x, lay, v)
    codes = np.unique(battle, return_inverse=True)[1]
    n_groups, p = int(codes.max()) + 1, lay.n_params
    out = np.zeros(n_groups * (p + 1))
    for idx, value in cols:
        out += np.bincount(codes * (p + 1) + idx + 1, weights=value, minlength=n_groups * (p + 1))
    return out.reshape(n_groups, p + 1)[:, 1:]


def _hessian(x: FloatArray, lay: _Layout, v: _Votes) -> FloatArray:
    """Hessian of the log-likelihood by central differences of the analytic gradient."""
    p = len(x)
    h = np.zeros((p, p))
    for k in range(p):
        step = 1e-5 * max(1.0, abs(x[k]))
        up, down = x.copy(), x.copy()
        up[k] += step
        down[k] -= step
        h[:, k] = (_gradient(up, lay, v)[1] - _gradient(down, lay, v)[1]) / (2 * step)
    return (h + h.T) / 2


def _optimise(
    lay: _Layout, v: _Votes, options: CompositeOptions, x0: FloatArray | None
) -> tuple[FloatArray, bool, int]:
    from scipy.optimize import minimize

    if x0 is None:
        x0 = np.zeros(lay.n_params)
        cuts = np.cumsum(lay.sizes)
        x0[cuts[2] : cuts[3]] = np.log(0.5)  # a moderate starting tie parameter

    def objective(x: FloatArray) -> tuple[float, FloatArray]:
        ll, grad = _gradient(x, lay, v)
        return -ll, -grad

    # bounds keep exp() finite while the optimiser explores: a discrimination in [e^-12, e^4], nu below e^5
    cuts = np.cumsum(lay.sizes)
    bounds: list[tuple[float | None, float | None]] = [(None, None)] * lay.n_params
    bounds[cuts[0] : cuts[1]] = [(-12.0, 4.0)] * (cuts[1] - cuts[0])
    bounds[cuts[2] : cuts[3]] = [(-12.0, 5.0)] * (cuts[3] - cuts[2])
    res = minimize(
        objective,
        np.clip(
            x0,
            [-np.inf if lo is None else lo for lo, _ in bounds],
            [np.inf if hi is None else hi for _, hi in bounds],
        ),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": options.max_iter, "gtol": 1e-9, "ftol": 1e-15},
    )
    return np.asarray(res.x, dtype=float), bool(res.success), int(res.nit)


def _check_connected(data: CompositeData) -> None:
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    m = len(data.models)
    graph = coo_matrix((np.ones(len(data.model_a)), (data.model_a, data.model_b)), shape=(m, m))
    if connected_components(graph, directed=False)[0] > 1:
        from leaderboard.spec import DisconnectedComparisonError

        raise DisconnectedComparisonError("the models fall into groups never compared with each other")


def fit_composite(
    data: CompositeData,
    options: CompositeOptions = CompositeOptions(),
    *,
    weights: FloatArray | None = None,
    with_cov: bool = True,
    x0: FloatArray | None = None,
) -> CompositeFit:
    """Fit the source-aware composite model; ``weights`` multiplies the vote weights (the bootstrap)."""
    _check_connected(data)
    lay = _layout(data, options)
    v = _votes(data, options, weights)
    x, converged, n_iter = _optimise(lay, v, options, x0)
    ll, _ = _gradient(x, lay, v)
    theta, log_a, pos, log_nu, sp = lay.split(x)
    unit = options.scale / np.log(options.base)
    p = lay.n_params
    cov = np.full((p, p), np.nan)
    se_full = np.full(lay.n_models + 4 * lay.n_sources, np.nan)
    if with_cov:
        battle = np.arange(len(v.a)) if data.battle is None else np.asarray(data.battle)
        bread = np.linalg.pinv(-_hessian(x, lay, v))
        scores = _cluster_scores(x, lay, v, battle)
        cov = bread @ (scores.T @ scores) @ bread
        se_full = _standard_errors(cov, lay, log_a)
    m, s = lay.n_models, lay.n_sources
    return CompositeFit(
        models=data.models,
        sources=data.sources,
        rating=options.initial + unit * (theta - theta.mean()),
        discrimination=np.exp(log_a),
        position=unit * pos,
        self_preference=unit * sp,
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
    )


def _standard_errors(cov: FloatArray, lay: _Layout, log_a: FloatArray) -> FloatArray:
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
    options: CompositeOptions = CompositeOptions(),
    *,
    rounds: int = 200,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Percentile intervals of the ratings from a bootstrap over battles (every vote of a battle moves
    together); returns ``(low, high, samples)``. The multinomial draws are the package's one sampler."""
    from leaderboard.bootstrap import draw_multinomial
    from leaderboard.intervals import percentile_intervals

    battle = np.arange(len(data.model_a)) if data.battle is None else np.asarray(data.battle)
    codes = np.unique(battle, return_inverse=True)[1]
    n_groups = int(codes.max()) + 1
    rng = np.random.default_rng(seed)
    draws = draw_multinomial(np.ones(n_groups), rounds, rng)
    base = fit_composite(data, options, with_cov=False)
    samples = np.empty((rounds, len(data.models)))
    for r in range(rounds):
        fit = fit_composite(data, options, weights=draws[r][codes].astype(float), with_cov=False, x0=base.x)
        samples[r] = fit.rating
    low, high = percentile_intervals(samples, level)
    return low, high, samples
