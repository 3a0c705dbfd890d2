"""One rating scale for human votes and LLM-judge verdicts: the source-aware composite Bradley-Terry fit.

Pooling judge verdicts with human votes as if they were one source biases the board (judges prefer the
left answer and their own family) and overstates the evidence (a judge's verdict and a human's vote on
the same battle are not independent). Here every vote carries its source, and each source ``s`` has

- a discrimination ``a_s`` (how steep its win curve is; the human pool, source 0, is fixed at 1), so the
  ratings stay on the human scale,
- its own left-side advantage ``pos_s`` and Davidson tie parameter ``nu_s``,
- for a judge, a self-preference ``sp_s`` added for the models of its own family,

- for a judge, its own view of each model: a deviation ``delta_sm`` from the human rating, a normal
  random effect ``N(0, tau_s^2)`` (a judge ranks the models much as the humans do, never exactly),

with the linear predictor ``eta = a_s * (theta_a + delta_sa - theta_b - delta_sb + pos_s * sided + sp_s *
(f_a - f_b))`` (position, self-preference and deviations are in rating units, so they read in Elo).
Without the deviations a judge is assumed to see exactly the human ratings, and its thousands of verdicts
pin the ratings to its own view: intervals a third as wide as the human-only ones that cover the human
ratings a third of the time when judges deviate by 50 Elo (``scripts/composite_sim.py``). With them a
judge's verdicts tell the ratings at most ``tau_s`` apart from the humans', so what a judge adds shrinks
as its deviations grow (:func:`estimate_deviation_sd` says how ``tau_s`` is found).
Soft verdicts (a probability or a five-level verdict) enter as a fractional outcome ``y``:
``y log P(left) + (1 - y) log P(right)``.
Intervals come from the cluster-robust sandwich, one cluster per battle (every source's votes on one
battle, and a judge's two orders of it), or from a bootstrap that resamples those battles.

The votes are aggregated once into cells, one per (source, left model, right model, side known): a
cell's likelihood depends on its votes only through three weighted sums (weight, signed score, ties),
so fits, refits and bootstrap rounds cost the number of cells, not of votes. The parameter count is small
(models plus a few per source); the fit is L-BFGS-B within bounds polished by Newton's method on the
analytic gradient and Hessian, and a warm refit is Newton alone. The sandwich's meat is built from
per-battle score sums (a sparse battle-by-parameter matrix), and a bootstrap round is a multinomial draw
over battles mapped to cell sums through a sparse battle-by-cell matrix. With every extra term off and
equal weights the likelihood is exactly the plain Bradley-Terry likelihood of the pooled votes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

__all__ = [
    "CompositeData",
    "CompositeFit",
    "CompositeOptions",
    "bootstrap_composite",
    "confounded_positions",
    "estimate_deviation_sd",
    "fit_composite",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# the deviations' prior in the loose fit that measures their spread: far wider than any judge's deviations
# (so they come out barely shrunk), narrow enough to keep the unidentified common shift well conditioned
_LOOSE_DEVIATION_SD_ELO = 400.0
# a judge whose deviations spread less than this (rating points) gets none: the fit is then the plain one
_MIN_DEVIATION_SD_ELO = 1.0

# cluster draws held at once by the bootstrap (rounds per block times battles): about 40 MB of counts
_BLOCK_DRAWS = 5_000_000


@dataclass(frozen=True)
class CompositeOptions:
    """Which per-source terms the composite fit learns (all on by default), and their weak priors.

    A source's terms can have no finite maximum: a judge that picks the left answer on both orders of
    every battle makes "left wins" certain, and the likelihood keeps rising as its position and its
    discrimination grow, so where the fit stops is the optimiser's tolerance (850 Elo and a
    discrimination of 10 in the test). Zero-mean normal priors give the fit a unique finite optimum:
    ``prior_sd_elo`` on each position and self-preference (400 points: a 91% left-win share at the human
    steepness, far beyond any real judge, so with real data they move an estimate by a small fraction of
    its standard error) and ``prior_sd_log_discrimination`` on each log discrimination (2: a factor of 7
    either way at one standard deviation); ``None``: no prior. The ratings carry none. Such a judge's
    terms still come out large (about 500 Elo and 8 in the test: no prior weak enough to leave real
    judges alone can make "always left" look moderate); its verdicts carry nothing about the ratings,
    which stay at the human-only values.

    ``deviations``: each judge gets its own per-model deviations from the human ratings (a random effect,
    :func:`estimate_deviation_sd`), with spread ``deviation_sd_elo`` per judge when given (0: none, the
    judge assumed to see the human ratings exactly), estimated from the data when ``None``.
    """

    discrimination: bool = True
    position: bool = True
    ties: bool = True
    self_preference: bool = True
    scale: float = 400.0
    base: float = 10.0
    initial: float = 1000.0
    max_iter: int = 2000
    prior_sd_elo: float | None = 400.0
    prior_sd_log_discrimination: float | None = 2.0
    deviations: bool = True
    deviation_sd_elo: float | None = None


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
    parameters, ``rating_se`` the standard errors of the ratings in rating points. ``deviation_sd`` is
    each source's spread of per-model deviations ``tau_s`` in rating points (0: none, the humans and any
    judge whose spread the data put at 0), ``deviation`` the judges' shrunk deviations (sources by models,
    rating points), ``deviation_p_value`` Cochran's p-value of that spread (NaN where not estimated).
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
    position_fixed: dict[str, str] = field(default_factory=dict)
    deviation_sd: FloatArray = field(default_factory=lambda: np.zeros(0))
    deviation: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    deviation_p_value: FloatArray = field(default_factory=lambda: np.zeros(0))

    def probabilities(self, model_a: IntArray, model_b: IntArray, source: int = 0) -> FloatArray:
        """Forecasts ``(left wins, tie, right wins)`` per row as ``source`` would vote, sides known (no
        family term: a forecast of the human pool, or of a judge on models outside its family), a judge
        seeing the models through its own deviations."""
        unit = self.options.scale / np.log(self.options.base)
        u = (self.rating[model_a] - self.rating[model_b] + self.position[source]) / unit
        if self.deviation.size:
            u = u + (self.deviation[source, model_a] - self.deviation[source, model_b]) / unit
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
    learn_dev: IntArray  # judges with per-model deviations (a block of n_models each)
    prior: FloatArray  # per free parameter, the prior's precision (0: none)
    random: FloatArray  # the part of ``prior`` that is a random effect's (the deviations), else 0
    centre: FloatArray  # per free parameter, the prior's mean (0 but in a bootstrap round)
    # per free parameter, the deviations' Jacobian: the log posterior has ``- view_dims @ x``, non-zero
    # only at the log discriminations of judges with deviations (:func:`_view_dims`)
    view_dims: FloatArray = field(default_factory=lambda: np.zeros(0))

    @property
    def sizes(self) -> tuple[int, int, int, int, int, int]:
        return (
            self.n_models - 1,
            len(self.learn_a),
            len(self.learn_pos),
            len(self.learn_nu),
            len(self.learn_sp),
            len(self.learn_dev) * self.n_models,
        )

    def deviation(self, x: FloatArray) -> FloatArray:
        """The judges' deviations, sources by models (0 for the humans and judges without)."""
        out = np.zeros((self.n_sources, self.n_models))
        start = int(np.sum(self.sizes[:5]))
        out[self.learn_dev] = x[start:].reshape(len(self.learn_dev), self.n_models)
        return out

    def deviation_block(self, s: int) -> IntArray:
        """The columns of judge ``s``'s deviations in ``x``."""
        rank = int(np.flatnonzero(self.learn_dev == s)[0])
        start = int(np.sum(self.sizes[:5])) + rank * self.n_models
        return np.arange(start, start + self.n_models, dtype=np.int64)

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


def confounded_positions(data: CompositeData) -> dict[int, str]:
    """Sources whose left-side advantage cannot be told apart from the ratings, with the reason.

    A source's position term is learned only from pairs it saw in both orders: when each pair only ever
    appears one way round (say the better model always on the left), "the left answer wins" and "the
    better model wins" are the same statement, and the fit trades rating differences for an arbitrary
    left-side advantage (thousands of points of each). Seeing some pair both ways rules out any rating
    assignment mimicking the position term on that source's votes, so the term is identified.
    """
    src = np.asarray(data.source, dtype=np.int64)
    sided = np.ones(len(src), dtype=bool) if data.sided is None else np.asarray(data.sided, dtype=bool)
    a = np.asarray(data.model_a, dtype=np.int64)[sided]
    b = np.asarray(data.model_b, dtype=np.int64)[sided]
    src = src[sided]
    m = np.int64(len(data.models))
    ordered = np.unique((src * m + a) * m + b)  # one integer key per (source, ordered pair): a 1-D sort
    o_src, o_a, o_b = ordered // (m * m), (ordered // m) % m, ordered % m
    unordered = (o_src * m + np.minimum(o_a, o_b)) * m + np.maximum(o_a, o_b)
    pairs, shown = np.unique(unordered, return_counts=True)
    both = set((pairs[shown > 1] // (m * m)).tolist())
    return {
        int(s): "position confounded with the ratings: no pair was shown in both orders, so the left side "
        "and the better side cannot be told apart; fixed at 0"
        for s in np.unique(src)
        if int(s) not in both
    }


def _layout(
    data: CompositeData,
    options: CompositeOptions,
    deviation_sd: FloatArray | None = None,
    *,
    loose: bool = False,
) -> _Layout:
    """The free parameters; ``deviation_sd`` per source (natural-log units, 0: no deviations) gives the
    judges with deviations and their prior's spread (``None``: none). ``loose``: the fit that measures
    the deviations' spread, which sets the view's scale by the prior alone (no Jacobian,
    :func:`_view_dims`)."""
    s = len(data.sources)
    present = np.unique(np.asarray(data.source))
    judges = present[present > 0]
    has_family = np.array([j for j in judges if data.family.get(int(j)) is not None], dtype=np.int64)
    tied = np.unique(np.asarray(data.source)[np.asarray(data.tie, dtype=bool)])
    sided = (
        np.ones(len(data.source), dtype=bool) if data.sided is None else np.asarray(data.sided, dtype=bool)
    )
    with_side = np.unique(np.asarray(data.source)[sided])
    if options.position:
        fixed = confounded_positions(data)
        with_side = np.array([k for k in with_side if int(k) not in fixed], dtype=np.int64)
    learn_a = judges.astype(np.int64) if options.discrimination else np.zeros(0, np.int64)
    learn_pos = with_side.astype(np.int64) if options.position else np.zeros(0, np.int64)
    learn_nu = tied.astype(np.int64) if options.ties else np.zeros(0, np.int64)
    learn_sp = has_family if options.self_preference else np.zeros(0, np.int64)
    sd = np.zeros(s) if deviation_sd is None or not options.deviations else np.asarray(deviation_sd, float)
    learn_dev = np.array([j for j in judges if sd[int(j)] > 0], dtype=np.int64)
    random = np.repeat(sd[learn_dev] ** -2.0, len(data.models)) if len(learn_dev) else np.zeros(0)
    unit = options.scale / np.log(options.base)
    elo = 0.0 if options.prior_sd_elo is None else (unit / options.prior_sd_elo) ** 2
    log_a = 0.0 if options.prior_sd_log_discrimination is None else options.prior_sd_log_discrimination**-2
    prior = np.concatenate(
        [
            np.zeros(len(data.models) - 1),
            np.full(len(learn_a), log_a),
            np.full(len(learn_pos), elo),
            np.zeros(len(learn_nu)),
            np.full(len(learn_sp), elo),
            random,
        ]
    )
    view_dims = np.zeros(len(prior))
    if not loose and len(learn_dev) and len(learn_a):
        view_dims[len(data.models) - 1 : len(data.models) - 1 + len(learn_a)] = _view_dims(
            data, options, learn_a, learn_dev, learn_sp
        )
    return _Layout(
        n_models=len(data.models),
        n_sources=s,
        learn_a=learn_a,
        learn_pos=learn_pos,
        learn_nu=learn_nu,
        learn_sp=learn_sp,
        learn_dev=learn_dev,
        prior=prior,
        random=np.concatenate([np.zeros(len(prior) - len(random)), random]),
        centre=np.zeros(len(prior)),
        view_dims=view_dims,
    )


def _view_dims(
    data: CompositeData, options: CompositeOptions, learn_a: IntArray, learn_dev: IntArray, learn_sp: IntArray
) -> FloatArray:
    """Per learned discrimination, the number ``k_s`` of a judge's deviation directions its verdicts pin.

    The deviations' prior is a density on ``delta``, but thousands of verdicts pin the judge's view
    ``w = a_s (theta + delta)`` (``k_s`` dimensions: the models it saw, less the common shift and, with
    a self-preference, the family direction the self-preference absorbs). Integrating the deviations out
    in those coordinates brings the Jacobian ``|d delta / d w| = a_s^-k_s``, so the log posterior gets
    ``-k_s log a_s``. Without it the joint mode shrinks every judge's view (and with it the ratings, which
    it pins) towards a smaller scale: shrinking ``theta`` and ``delta`` together lowers the prior's
    penalty ``|delta|^2 / 2 tau^2`` at first order, which the human votes alone resist; the mode then sets
    ``(theta + delta) . delta = 0`` where the model has ``k_s tau^2``. The ratings came out compressed by
    about 2% per judge (a panel of three: the extreme models' intervals covered far less than 95%,
    ``scripts/composite_sim.py``)."""
    src = np.asarray(data.source)
    a = np.asarray(data.model_a)
    b = np.asarray(data.model_b)
    dev = set(learn_dev.tolist())
    sp_ = set(learn_sp.tolist()) if options.self_preference else set()
    out = np.zeros(len(learn_a))
    for i, s in enumerate(learn_a.tolist()):
        if s not in dev:
            continue
        rows = src == s
        seen = np.unique(np.concatenate([a[rows], b[rows]]))
        k = len(seen) - 1
        family = data.family.get(s)
        if family is not None and s in sp_ and data.model_family:
            members = sum(data.model_family[m] == family for m in seen.tolist())
            k -= int(0 < members < len(seen))
        out[i] = max(k, 0)
    return out


@dataclass(frozen=True)
class _Cells:
    """The votes aggregated once per (source, left model, right model, side known): the likelihood of a
    cell depends on its votes only through three weighted sums, so a fit never touches the votes.

    Per vote ``contrib`` holds ``w * (1, (1 - t)(y - 1/2), t)`` (weight, signed score, tie); a cell's
    statistics ``(W, Y, T)`` are their sums, and its log-likelihood is
    ``Y eta + T log nu - W log D(eta, nu)``. A bootstrap round or a reweighting only changes the sums.
    The family term ``f_a - f_b`` is a function of (source, pair), so it is a cell attribute too.
    """

    a: IntArray
    b: IntArray
    src: IntArray
    side: FloatArray
    fam: FloatArray
    vote_cell: IntArray
    contrib: FloatArray  # (votes, 3)
    groups: tuple[tuple[int, IntArray], ...]  # per source present: its cells
    # (cells, 8): parameter columns of theta_a, theta_b, log a, position, self-preference, log nu, and the
    # source's deviations of a and of b (-1: none)
    cols: IntArray

    @property
    def n_cells(self) -> int:
        return len(self.a)

    def stats(self, weights: FloatArray | None = None) -> FloatArray:
        """``(W, Y, T)`` per cell (rows), the votes multiplied by ``weights`` when given."""
        c = self.contrib if weights is None else self.contrib * weights[:, None]
        return np.stack(
            [np.bincount(self.vote_cell, weights=c[:, k], minlength=self.n_cells) for k in range(3)], axis=1
        )

    def by_cluster(self, cluster: IntArray, n_clusters: int) -> sp.csr_matrix:
        """Clusters (rows) by cell statistics (columns ``k * cells + cell``): a round's statistics are
        its cluster draw counts times this matrix."""
        n = self.n_cells
        rows = np.tile(cluster, 3)
        cols = np.concatenate([k * n + self.vote_cell for k in range(3)])
        out: sp.csr_matrix = sp.csr_matrix((self.contrib.T.ravel(), (rows, cols)), shape=(n_clusters, 3 * n))
        out.sum_duplicates()
        return out


def _cells(data: CompositeData, options: CompositeOptions, lay: _Layout) -> _Cells:
    n = len(data.model_a)
    tie = np.asarray(data.tie, dtype=bool)
    y = np.where(tie, 0.5, np.asarray(data.score, dtype=float))
    t = (tie & options.ties).astype(float)
    w = np.ones(n) if data.weight is None else np.asarray(data.weight, dtype=float)
    side = np.ones(n, dtype=np.int64) if data.sided is None else np.asarray(data.sided, dtype=np.int64)
    src = np.asarray(data.source, dtype=np.int64)
    a = np.asarray(data.model_a, dtype=np.int64)
    b = np.asarray(data.model_b, dtype=np.int64)
    m = np.int64(lay.n_models)
    key = ((src * m + a) * m + b) * 2 + side
    uniq, vote_cell = np.unique(key, return_inverse=True)
    c_side = uniq % 2
    c_b = (uniq // 2) % m
    c_a = (uniq // (2 * m)) % m
    c_src = uniq // (2 * m * m)
    fam = np.zeros(len(uniq))
    if data.model_family:
        for s, family in data.family.items():
            if family is None:
                continue
            member = np.array([f == family for f in data.model_family], dtype=float)
            rows = c_src == s
            fam[rows] = member[c_a[rows]] - member[c_b[rows]]
    contrib = w[:, None] * np.stack([np.ones(n), (1 - t) * (y - 0.5), t], axis=1)
    cols = np.full((len(uniq), 8), -1, dtype=np.int64)
    cols[:, 0] = c_a - 1  # model 0 is the reference: -1 means no column
    cols[:, 1] = c_b - 1
    offset = lay.n_models - 1
    where: list[IntArray] = []
    for learned in (lay.learn_a, lay.learn_pos, lay.learn_nu, lay.learn_sp):
        at = np.full(lay.n_sources, -1, dtype=np.int64)
        at[learned] = offset + np.arange(len(learned))
        where.append(at[c_src])
        offset += len(learned)
    la_col, pos_col, nu_col, sp_col = where
    cols[:, 2] = la_col
    cols[:, 3] = np.where(c_side > 0, pos_col, -1)
    cols[:, 4] = np.where(fam != 0, sp_col, -1)
    cols[:, 5] = nu_col
    dev_at = np.full(lay.n_sources, -1, dtype=np.int64)
    dev_at[lay.learn_dev] = offset + lay.n_models * np.arange(len(lay.learn_dev))
    has_dev = dev_at[c_src] >= 0
    cols[:, 6] = np.where(has_dev, dev_at[c_src] + c_a, -1)
    cols[:, 7] = np.where(has_dev, dev_at[c_src] + c_b, -1)
    groups = tuple((int(s), np.flatnonzero(c_src == s)) for s in np.unique(c_src))
    return _Cells(
        c_a, c_b, c_src, c_side.astype(float), fam, vote_cell.astype(np.int64), contrib, groups, cols
    )


@dataclass(frozen=True)
class _CellTerms:
    """Per cell at one point: the linear predictor, its derivatives ``d eta / d x`` in the cell's eight
    parameter slots (:attr:`_Cells.cols`; the log-nu slot holds 0), and the log-likelihood's derivatives
    per unit weight in ``eta`` and ``t = log nu`` at a zero score (:func:`~leaderboard.bt.cells.
    davidson_row_terms`; the likelihood is linear in the score and the tie share, which the cell sums
    add back)."""

    eta: FloatArray
    jac: FloatArray  # (cells, 8)
    ll0: FloatArray
    l_u: FloatArray
    l_t: FloatArray
    l_uu: FloatArray
    l_ut: FloatArray
    l_tt: FloatArray


def _cell_terms(x: FloatArray, lay: _Layout, cells: _Cells) -> _CellTerms:
    from leaderboard.bt.cells import davidson_row_terms

    theta, log_a, pos, log_nu, sp_ = lay.split(x)
    scale_a = np.exp(log_a[cells.src])
    u = theta[cells.a] - theta[cells.b] + pos[cells.src] * cells.side + sp_[cells.src] * cells.fam
    if len(lay.learn_dev):
        dev = lay.deviation(x)
        u = u + dev[cells.src, cells.a] - dev[cells.src, cells.b]
    eta = scale_a * u
    parts = np.zeros((6, cells.n_cells))
    learned_nu = set(lay.learn_nu.tolist())
    zero = np.zeros(cells.n_cells)
    for s, rows in cells.groups:
        nu_s = float(log_nu[s]) if s in learned_nu else None
        for k, values in enumerate(davidson_row_terms(eta[rows], zero[rows], zero[rows], nu_s)):
            parts[k, rows] = values
    jac = np.stack(
        [scale_a, -scale_a, eta, scale_a * cells.side, scale_a * cells.fam, zero, scale_a, -scale_a], axis=1
    )
    return _CellTerms(eta, jac, *parts)


def _evaluate(
    x: FloatArray, lay: _Layout, cells: _Cells, stats: FloatArray, order: int
) -> tuple[float, FloatArray | None, FloatArray | None]:
    """The log posterior (the log-likelihood ``sum Y eta + T log nu - W log D`` over cells plus the
    terms' weak priors, :class:`CompositeOptions`) and, for ``order`` 1 and 2, its
    analytic gradient and Hessian, assembled from per-cell 8 x 8 blocks by ``bincount`` (no sparse
    matrices: a cell touches at most eight parameters). The deviations' prior is centred on
    ``lay.centre`` (0 but in a bootstrap round, :func:`bootstrap_composite`).

    The Hessian is the chain rule through ``eta = a u`` and ``t = log nu``: ``l_uu J J^T`` plus the
    ``l_ut`` and ``l_tt`` blocks, plus the score times the second derivative of ``eta``, which is non-zero
    only in the log-discrimination row and column (``d2 eta / d log a d x = d eta / d x``).
    """
    terms = _cell_terms(x, lay, cells)
    _, _, _, log_nu, _ = lay.split(x)
    w, y, tie = stats[:, 0], stats[:, 1], stats[:, 2]
    with np.errstate(invalid="ignore"):
        tie_term = np.where(tie > 0, tie * log_nu[cells.src], 0.0)
    off = x - lay.centre
    value = float(np.sum(w * terms.ll0 + y * terms.eta + tie_term)) - 0.5 * float(lay.prior @ off**2)
    value -= float(lay.view_dims @ x)
    if order < 1:
        return value, None, None
    p = lay.n_params
    cols = cells.cols
    on = cols >= 0
    g_eta = y + w * terms.l_u
    local_g = terms.jac * g_eta[:, None]
    local_g[:, 5] = tie + w * terms.l_t
    grad: FloatArray = np.bincount(cols[on], weights=local_g[on], minlength=p) - lay.prior * off
    grad -= lay.view_dims
    if order < 2:
        return value, grad, None
    jac = terms.jac
    block = (w * terms.l_uu)[:, None, None] * jac[:, :, None] * jac[:, None, :]
    block[:, 2, :] += g_eta[:, None] * jac
    block[:, :, 2] += g_eta[:, None] * jac
    block[:, 2, 2] -= g_eta * terms.eta
    cross = (w * terms.l_ut)[:, None] * jac
    block[:, :, 5] += cross
    block[:, 5, :] += cross
    block[:, 5, 5] = w * terms.l_tt
    both = on[:, :, None] & on[:, None, :]
    flat = cols[:, :, None] * p + cols[:, None, :]
    hess: FloatArray = (
        np.bincount(flat[both], weights=block[both], minlength=p * p).reshape(p, p).astype(np.float64)
    )
    return value, grad, (hess + hess.T) / 2 - np.diag(lay.prior)


def _value(x: FloatArray, lay: _Layout, cells: _Cells, stats: FloatArray) -> float:
    return _evaluate(x, lay, cells, stats, 0)[0]


def _gradient(x: FloatArray, lay: _Layout, cells: _Cells, stats: FloatArray) -> tuple[float, FloatArray]:
    value, grad, _ = _evaluate(x, lay, cells, stats, 1)
    if grad is None:
        raise RuntimeError("no gradient")
    return value, grad


def _hessian(x: FloatArray, lay: _Layout, cells: _Cells, stats: FloatArray) -> FloatArray:
    hess = _evaluate(x, lay, cells, stats, 2)[2]
    if hess is None:
        raise RuntimeError("no Hessian")
    return hess


def _cluster_scores(
    x: FloatArray, lay: _Layout, cells: _Cells, cluster: IntArray, weights: FloatArray | None
) -> sp.csr_matrix:
    """Score sums per battle (rows) and parameter (columns), sparse: a vote's score is its cell's
    ``d eta / d x`` times its own ``y``-dependent factor (and a tie factor in the log-nu slot), summed
    over the battle's votes."""
    terms = _cell_terms(x, lay, cells)
    c = cells.contrib if weights is None else cells.contrib * weights[:, None]
    cell = cells.vote_cell
    local = terms.jac[cell] * (c[:, 1] + c[:, 0] * terms.l_u[cell])[:, None]
    local[:, 5] = c[:, 2] + c[:, 0] * terms.l_t[cell]
    cols = cells.cols[cell]
    on = cols >= 0
    rows = np.broadcast_to(cluster[:, None], cols.shape)
    out: sp.csr_matrix = sp.csr_matrix(
        (local[on], (rows[on], cols[on])), shape=(int(cluster.max()) + 1, lay.n_params)
    )
    return out


def _bounds(lay: _Layout) -> tuple[FloatArray, FloatArray]:
    """Bounds that keep exp() finite while the optimiser explores: a discrimination in [e^-12, e^4],
    nu below e^5."""
    cuts = np.cumsum(lay.sizes)
    lo = np.full(lay.n_params, -np.inf)
    hi = np.full(lay.n_params, np.inf)
    lo[cuts[0] : cuts[1]], hi[cuts[0] : cuts[1]] = -12.0, 4.0
    lo[cuts[2] : cuts[3]], hi[cuts[2] : cuts[3]] = -12.0, 5.0
    return lo, hi


def _newton(
    x0: FloatArray, lay: _Layout, cells: _Cells, stats: FloatArray, max_iter: int = 50
) -> tuple[FloatArray, bool, int]:
    """Newton's method with step halving, from a good start (a refit or a polish); ``False`` when it
    leaves the bounds, stops ascending or runs out of iterations (the caller falls back to L-BFGS-B)."""
    lo, hi = _bounds(lay)
    x = x0.copy()
    total = max(1.0, float(np.sum(stats[:, 0])))
    for it in range(max_iter):
        value, grad, hess = _evaluate(x, lay, cells, stats, 2)
        if grad is None or hess is None:
            raise RuntimeError("no derivatives")
        info = -hess
        try:
            step = np.linalg.solve(info, grad)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(info, grad, rcond=None)[0]
        decrement = float(grad @ step)
        if not np.isfinite(decrement) or decrement < 0:
            return x, False, it
        if decrement < 1e-12 * total:
            return x, True, it
        size = 1.0
        while size > 1e-6:
            trial = x + size * step
            if np.all(trial >= lo) and np.all(trial <= hi):
                new_value = _value(trial, lay, cells, stats)
                if new_value >= value - 1e-12 * total:
                    break
            size /= 2
        else:
            return x, False, it
        x = trial
    return x, False, max_iter


def _optimise(
    lay: _Layout, cells: _Cells, stats: FloatArray, options: CompositeOptions, x0: FloatArray | None
) -> tuple[FloatArray, bool, int]:
    """A warm start goes straight to Newton; a cold one (or a failed Newton) runs L-BFGS-B within the
    bounds first and is polished by Newton."""
    from scipy.optimize import minimize

    lo, hi = _bounds(lay)
    if x0 is not None:
        x, ok, n_iter = _newton(np.clip(x0, lo, hi), lay, cells, stats)
        if ok:
            return x, True, n_iter
    else:
        x0 = np.zeros(lay.n_params)
        cuts = np.cumsum(lay.sizes)
        x0[cuts[2] : cuts[3]] = np.log(0.5)  # a moderate starting tie parameter
    total = max(1.0, float(np.sum(stats[:, 0])))

    def objective(x: FloatArray) -> tuple[float, FloatArray]:
        ll, grad = _gradient(x, lay, cells, stats)
        return -ll / total, -grad / total

    res = minimize(
        objective,
        np.clip(x0, lo, hi),
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(lo.tolist(), hi.tolist(), strict=True)),
        options={"maxiter": options.max_iter, "gtol": 1e-12, "ftol": 1e-15},
    )
    x = np.asarray(res.x, dtype=float)
    polished, ok, n_newton = _newton(x, lay, cells, stats)
    if ok:
        return polished, True, int(res.nit) + n_newton
    return x, bool(res.success), int(res.nit)


def _check_connected(data: CompositeData) -> None:
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    m = len(data.models)
    graph = coo_matrix((np.ones(len(data.model_a)), (data.model_a, data.model_b)), shape=(m, m))
    if connected_components(graph, directed=False)[0] > 1:
        from leaderboard.bt.spec import DisconnectedComparisonError

        raise DisconnectedComparisonError("the models fall into groups never compared with each other")


def fit_composite(
    data: CompositeData,
    options: CompositeOptions = CompositeOptions(),
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
    estimated first (:func:`estimate_deviation_sd`, unless ``options.deviation_sd_elo`` fixes it) and
    whose prior enters the fit; the covariance then carries that spread (:func:`_fit_cells`).
    """
    _check_connected(data)
    sd, p_value, loose, tau2_var = _deviation_spread(data, options, weights)
    lay = _layout(data, options, sd)
    cells = _cells(data, options, lay)
    if x0 is not None and len(x0) != lay.n_params:
        x0 = None
    if x0 is None and loose is not None:
        x0 = _carry(loose, lay)
    fit = _fit_cells(data, options, lay, cells, cells.stats(weights), weights, with_cov, x0, tau2_var)
    return replace(fit, deviation_p_value=p_value)


def _carry(start: tuple[FloatArray, _Layout], lay: _Layout) -> FloatArray:
    """A start for ``lay`` from a fit under another layout with the same terms but fewer or more judges
    with deviations (the loose fit that measured their spread)."""
    x, old = start
    shared = int(np.sum(lay.sizes[:5]))
    out = np.zeros(lay.n_params)
    out[:shared] = x[:shared]
    for s in lay.learn_dev:
        if int(s) in set(old.learn_dev.tolist()):
            out[lay.deviation_block(int(s))] = x[old.deviation_block(int(s))]
    return out


def estimate_deviation_sd(
    data: CompositeData, options: CompositeOptions = CompositeOptions(), weights: FloatArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """Each judge's spread ``tau_s`` of per-model deviations from the human ratings (rating points) and
    Cochran's p-value of that spread (NaN for the humans and sources not estimated).

    Empirical Bayes by moments: a loose fit (every judge's deviations under a wide prior,
    ``_LOOSE_DEVIATION_SD_ELO``, so they come out as good as un-shrunk) gives each judge's deviations
    with their covariance from the inverse Hessian (which includes the uncertainty of the ratings they
    are measured against); DerSimonian and Laird's moments, generalised to correlated estimates
    (:func:`_spread_moments`), turn them into ``tau_s^2``: the spread beyond the sampling noise. A
    judge's discrimination is the steepness of its own view ``theta + delta``, whose scale the
    deviations' prior sets (the deviations take the smallest size that explains the verdicts, which
    understates the spread by ``c^2``, about 0.89 for a 50-point spread: :func:`_spread_moments` divides
    it out). Closed form, no refit: the loose fit's deviations need no other un-shrinking. Chosen over
    the Laplace marginal likelihood for being one extra fit and no inner optimisation over ``tau``, and
    because moments do not collapse to 0 the way a maximum-likelihood variance can with few models. A
    spread below ``_MIN_DEVIATION_SD_ELO`` counts as 0: that judge gets no deviations at all, so when no
    judge deviates the fit is exactly the one without them.
    """
    _check_connected(data)
    sd, p_value, _, _ = _deviation_spread(data, options, weights)
    unit = options.scale / np.log(options.base)
    return (np.zeros(len(data.sources)) if sd is None else unit * sd), p_value


def _spread_moments(
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
    points. The final fit's prior has the model's scale (:func:`_view_dims`), so the moments are divided
    by ``c^2``, with ``c`` from the estimate itself (two steps of the fixed point: the second moves it by
    about 1%, a third by much less). ``view_norm2`` 0: no correction.

    Third, the estimate's own sampling variance: ``Var Q = 2 tr((M S)^2)`` with ``S = P V P + tau^2 P``
    the covariance of the projected deviations, over ``tr(M)^2``, times the ``c^-4`` of the correction
    (:func:`_spread_uncertainty` carries it into the intervals).
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
    from scipy.stats import chi2

    moments = max(0.0, (q - rank) / float(np.trace(precision)))
    tau2 = moments
    if view_norm2 > 0:
        for _ in range(2):  # tau^2 = moments / c(tau^2)^2, c = |theta|^2 / (|theta|^2 + k tau^2)
            tau2 = moments * (1.0 + (rank + 1) * tau2 / view_norm2) ** 2
    spread = precision @ (inner + moments * proj)
    scale = tau2 / moments if moments > 0 else 1.0
    variance = 2.0 * float(np.sum(spread * spread.T)) / float(np.trace(precision)) ** 2 * scale**2
    return tau2, float(chi2.sf(q, rank)), variance


def _deviation_spread(
    data: CompositeData, options: CompositeOptions, weights: FloatArray | None
) -> tuple[FloatArray | None, FloatArray, tuple[FloatArray, _Layout] | None, FloatArray]:
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
    lay = _layout(data, options, loose_sd, loose=True)
    cells = _cells(data, options, lay)
    stats = cells.stats(weights)
    x, _, _ = _optimise(lay, cells, stats, options, None)
    bread = np.asarray(np.linalg.pinv(-_hessian(x, lay, cells, stats)), dtype=np.float64)
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
        tau2, p_value[s], variance = _spread_moments(
            x[cols], bread[np.ix_(cols, cols)], np.stack(directions, axis=1), float(centred @ centred)
        )
        tau = float(np.sqrt(tau2))
        sd[s] = tau if unit * tau >= _MIN_DEVIATION_SD_ELO else 0.0
        tau2_var[s] = variance if sd[s] > 0 else 0.0
    return sd, p_value, (x, lay), tau2_var


def _fit_cells(
    data: CompositeData,
    options: CompositeOptions,
    lay: _Layout,
    cells: _Cells,
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
    leaves out (:func:`_spread_uncertainty`)."""
    x, converged, n_iter = _optimise(lay, cells, stats, options, x0)
    # the likelihood: the log posterior less the priors and the deviations' Jacobian
    ll = (
        _value(x, lay, cells, stats)
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
        info = -_hessian(x, lay, cells, stats)
        bread = np.linalg.pinv(info)
        scores = _cluster_scores(x, lay, cells, cluster, weights)
        meat = (scores.T @ scores).toarray()
        cov = bread @ (meat + np.diag(lay.random)) @ bread
        if tau2_var is not None and np.any(tau2_var > 0):
            cov = cov + _spread_uncertainty(x, info, meat, lay, tau2_var)
        se_full = _standard_errors(cov, lay, log_a)
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
        deviation_sd=unit * np.sqrt(_random_variance(lay)),
        deviation=unit * lay.deviation(x),
        deviation_p_value=np.full(s, np.nan),
    )


def _spread_uncertainty(
    x: FloatArray, info: FloatArray, meat: FloatArray, lay: _Layout, tau2_var: FloatArray
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


def _random_variance(lay: _Layout) -> FloatArray:
    """``tau_s^2`` per source (natural-log units, 0 where none) from the layout's prior."""
    out = np.zeros(lay.n_sources)
    for s in lay.learn_dev.tolist():
        out[s] = 1.0 / float(lay.random[lay.deviation_block(s)[0]])
    return out


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
    together); returns ``(low, high, samples)``. The multinomial draws are the package's one sampler.

    The judges' deviations are random effects: resampling battles redraws the votes but not the judges'
    views, so each round also redraws the deviations' prior mean from ``N(0, tau_s^2)`` (a randomised
    prior: its score then varies by the prior precision, the ``P`` of the sandwich in :func:`_fit_cells`),
    with ``tau_s`` held at the full data's estimate (not re-estimated per round: that would cost a loose
    fit per round). So, unlike the sandwich (:func:`_spread_uncertainty`), these intervals leave out the
    spread's own sampling uncertainty: with a panel of judges that is several points of coverage."""
    from leaderboard.bt.bootstrap import draw_multinomial
    from leaderboard.bt.intervals import percentile_intervals

    battle = np.arange(len(data.model_a)) if data.battle is None else np.asarray(data.battle)
    codes = np.unique(battle, return_inverse=True)[1].astype(np.int64)
    n_groups = int(codes.max()) + 1
    _check_connected(data)
    sd, _, loose, _ = _deviation_spread(data, options, None)
    lay = _layout(data, options, sd)
    cells = _cells(data, options, lay)
    per_cluster = cells.by_cluster(codes, n_groups)
    rng = np.random.default_rng(seed)
    start_x = None if loose is None else _carry(loose, lay)
    base = _fit_cells(data, options, lay, cells, cells.stats(), None, False, start_x)
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
            x, _, _ = _optimise(round_lay, cells, round_stats[r].T, options, base.x)
            theta = lay.split(x)[0]
            samples[start + r] = options.initial + unit * (theta - theta.mean())
    low, high = percentile_intervals(samples, level)
    return low, high, samples
