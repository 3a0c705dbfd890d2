"""Bradley-Terry beyond the plain fit: position bias, Davidson ties, time weights, a prior, style control.

One maximum-likelihood engine over aggregated cells covers every variant. With ``h`` half the linear
predictor of a cell (left model ``i``, right model ``j``)

    u = beta_i - beta_j + alpha [+ alpha_i] + x . gamma,      h = u / 2,

the three outcomes have probabilities

    P(left wins) = e^h / D,   P(right wins) = e^-h / D,   P(tie) = nu / D,   D = e^h + e^-h + nu,

which is Davidson's (1970) model ``pi_i / (pi_i + pi_j + nu sqrt(pi_i pi_j))`` divided through by
``sqrt(pi_i pi_j)``, with ``pi = exp(beta)``. ``alpha`` is the common left-side advantage (the arena twin of
White's first move, Pires and Bueno Filho 2020), ``alpha_i`` an optional per-model one, ``gamma`` the style
coefficients. Plain Bradley-Terry is ``nu = 0`` with a tie scored as half a win and half a loss (the
Chatbot Arena convention); its log-likelihood in ``h`` is exactly the Davidson one without the ``log nu``
term, so the two share all derivatives. ``nu = exp(theta)`` keeps the tie propensity positive.

Ratings are identified by fixing the last model at 0 during the fit and centring afterwards (sum to zero,
or an anchor model at a fixed rating). Gradients and Hessians are analytic; the optimiser is scipy's
``trust-exact`` Newton method, and a fit that does not converge raises :class:`ConvergenceError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy import optimize, stats
from scipy.sparse import csgraph

from leaderboard.compute import MethodOutput, MethodRequest, compute_leaderboard, register_method
from leaderboard.data import Outcome, PairCounts
from leaderboard.result import Leaderboard

__all__ = [
    "ELO_PER_NAT",
    "Cells",
    "METHODS",
    "ConvergenceError",
    "ExtendedFit",
    "FitSpec",
    "both_bad_rates",
    "bootstrap_extended",
    "compute_extended",
    "fit_extended",
    "make_cells",
    "multinomial_resampler",
    "predict_proba",
    "sandwich_extended",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
_Resampler = Callable[[FloatArray, int], Iterable[FloatArray]]

#: Elo points per natural-log unit of strength: ``400 / ln 10``.
ELO_PER_NAT = 400.0 / math.log(10.0)
#: A fitted rating this far from the mean (in Elo) means the likelihood has no finite maximum.
_MAX_ABS_ELO = 5000.0

Position = Literal["none", "common", "per-model"]
Ties = Literal["half", "davidson"]
BothBad = Literal["tie", "exclude"]


class ConvergenceError(RuntimeError):
    """The optimiser did not reach a maximum (or the maximum lies at infinity)."""


@dataclass(frozen=True)
class FitSpec:
    """What to fit.

    Attributes
    ----------
    position : ``none``, ``common`` (one left-side advantage) or ``per-model`` (one per left model)
    ties : ``half`` (plain BT: a tie is half a win each) or ``davidson`` (a tie-propensity parameter)
    prior_sd : standard deviation (Elo points) of a Gaussian prior on ratings around their mean; smaller
        means stronger shrinkage; None for none
    half_life : time-decay half-life in the units of ``PairCounts.time`` (seconds); None for equal weights
    both_bad : count ``tie (bothbad)`` votes as ties, or exclude them
    nu_fixed : with ``ties="davidson"``, hold the tie propensity at this value instead of fitting it
        (``nu_fixed -> 0`` is the plain Bradley-Terry limit)
    """

    position: Position = "none"
    ties: Ties = "half"
    prior_sd: float | None = None
    half_life: float | None = None
    both_bad: BothBad = "tie"
    nu_fixed: float | None = None

    def __post_init__(self) -> None:
        if self.position not in ("none", "common", "per-model"):
            raise ValueError(f"unknown position option {self.position!r}")
        if self.ties not in ("half", "davidson"):
            raise ValueError(f"unknown ties option {self.ties!r}")
        if self.both_bad not in ("tie", "exclude"):
            raise ValueError(f"unknown both_bad option {self.both_bad!r}")
        if self.prior_sd is not None and not self.prior_sd > 0:
            raise ValueError("prior_sd must be positive")
        if self.half_life is not None and not self.half_life > 0:
            raise ValueError("half_life must be positive")
        if self.nu_fixed is not None and (self.ties != "davidson" or not self.nu_fixed > 0):
            raise ValueError("nu_fixed needs ties='davidson' and a positive value")


@dataclass(frozen=True)
class Cells:
    """Rows the engine fits: aggregated cells, each with a vote count, a weight and style covariates.

    ``outcome`` is 0 (left wins), 1 (right wins) or 2 (tie; both-bad already mapped or dropped).
    ``count`` is the number of votes (what the bootstrap resamples), ``weight`` the per-vote weight
    (time decay), ``features`` the style covariates (left minus right), shape (n_rows, n_features).
    """

    models: tuple[str, ...]
    left: IntArray
    right: IntArray
    outcome: IntArray
    count: FloatArray
    weight: FloatArray
    features: FloatArray
    feature_names: tuple[str, ...] = ()

    @property
    def n_models(self) -> int:
        return len(self.models)

    def with_count(self, count: FloatArray) -> Cells:
        return replace(self, count=count)


def make_cells(
    counts: PairCounts,
    spec: FitSpec,
    *,
    features: FloatArray | None = None,
    feature_names: tuple[str, ...] = (),
    now: float | None = None,
) -> Cells:
    """Turn :class:`PairCounts` into engine rows: map or drop both-bad, compute time weights.

    Parameters
    ----------
    counts : PairCounts
        Aggregated votes; for style control, one cell per battle with its covariates in ``features``.
    spec : FitSpec
    features : array, shape (n_cells, n_features), optional
        Style covariates aligned with the cells (see :mod:`leaderboard.style`).
    feature_names : names of the feature columns
    now : float, optional
        Reference time for the decay weights ``0.5 ** ((now - time) / half_life)``; the latest cell's time
        by default.
    """
    outcome = counts.outcome.astype(np.int64).copy()
    keep = np.ones(counts.n_cells, dtype=bool)
    if spec.both_bad == "exclude":
        keep = outcome != Outcome.BOTHBAD
    outcome[outcome == Outcome.BOTHBAD] = Outcome.TIE
    n_features = 0 if features is None else np.asarray(features).shape[1]
    feats = np.zeros((counts.n_cells, 0)) if features is None else np.asarray(features, dtype=np.float64)
    if feats.shape[0] != counts.n_cells:
        raise ValueError("features must have one row per cell")
    if len(feature_names) != n_features:
        feature_names = tuple(f"x{k}" for k in range(n_features))
    # ``count`` may hold summed vote weights; the bootstrap resamples votes, the fit uses their weights.
    votes = np.asarray(counts.vote_counts, dtype=np.float64)
    weight = np.divide(counts.count, votes, out=np.ones(counts.n_cells), where=votes > 0)
    if spec.half_life is not None:
        if counts.time is None:
            raise ValueError("time weights need PairCounts with a time per cell")
        ref = float(np.max(counts.time)) if now is None else float(now)
        weight = weight * 0.5 ** ((ref - counts.time) / spec.half_life)
    return Cells(
        models=counts.models,
        left=counts.model_a[keep].astype(np.int64),
        right=counts.model_b[keep].astype(np.int64),
        outcome=outcome[keep],
        count=votes[keep],
        weight=weight[keep],
        features=feats[keep],
        feature_names=tuple(feature_names),
    )


@dataclass(frozen=True)
class _Layout:
    """Where each block of parameters sits in the optimiser's vector."""

    n_models: int
    n_position: int
    has_nu: bool
    n_features: int

    @property
    def n_linear(self) -> int:
        return self.n_models - 1 + self.n_position + self.n_features

    @property
    def size(self) -> int:
        return self.n_linear + int(self.has_nu)

    @property
    def position_slice(self) -> slice:
        start = self.n_models - 1
        return slice(start, start + self.n_position)

    @property
    def feature_slice(self) -> slice:
        start = self.n_models - 1 + self.n_position
        return slice(start, start + self.n_features)


def _design(cells: Cells, layout: _Layout) -> sp.csr_matrix:
    """Sparse design matrix of the linear predictor ``u`` (reference model's column dropped)."""
    n_rows = cells.left.shape[0]
    rows = np.arange(n_rows)
    ref = layout.n_models - 1
    parts_r: list[IntArray] = []
    parts_c: list[IntArray] = []
    parts_v: list[FloatArray] = []
    for side, sign in ((cells.left, 1.0), (cells.right, -1.0)):
        mask = side != ref
        parts_r.append(rows[mask])
        parts_c.append(side[mask])
        parts_v.append(np.full(int(mask.sum()), sign))
    base = layout.n_models - 1
    if layout.n_position == 1:
        parts_r.append(rows)
        parts_c.append(np.full(n_rows, base, dtype=np.int64))
        parts_v.append(np.ones(n_rows))
    elif layout.n_position > 1:
        parts_r.append(rows)
        parts_c.append(base + cells.left)
        parts_v.append(np.ones(n_rows))
    base += layout.n_position
    for k in range(layout.n_features):
        parts_r.append(rows)
        parts_c.append(np.full(n_rows, base + k, dtype=np.int64))
        parts_v.append(cells.features[:, k])
    matrix = sp.csr_matrix(
        (np.concatenate(parts_v), (np.concatenate(parts_r), np.concatenate(parts_c))),
        shape=(n_rows, layout.n_linear),
    )
    return matrix


class _Objective:
    """Negative penalised log-likelihood per unit weight, with its gradient, Hessian and scores."""

    def __init__(self, cells: Cells, spec: FitSpec, layout: _Layout) -> None:
        self.cells = cells
        self.spec = spec
        self.layout = layout
        self.X = _design(cells, layout)
        self.sign = np.where(cells.outcome == Outcome.MODEL_A, 1.0, 0.0) - np.where(
            cells.outcome == Outcome.MODEL_B, 1.0, 0.0
        )
        self.is_tie = (cells.outcome == Outcome.TIE).astype(np.float64)
        self.theta_fixed = None if spec.nu_fixed is None else math.log(spec.nu_fixed)
        self.set_count(cells.count)
        n = layout.n_models
        if spec.prior_sd is not None:
            lam = 1.0 / (spec.prior_sd / ELO_PER_NAT) ** 2
            centring = np.eye(n) - 1.0 / n
            self.prior = lam * centring[: n - 1, : n - 1]
        else:
            self.prior = np.zeros((n - 1, n - 1))

    def set_count(self, count: FloatArray) -> None:
        self.cw = count * self.cells.weight
        self.total = float(self.cw.sum())
        if self.total <= 0:
            raise ValueError("no votes to fit")

    def _probs(self, x: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        h = 0.5 * (self.X @ x[: self.layout.n_linear])
        pair = np.logaddexp(h, -h)
        theta = x[-1] if self.layout.has_nu else self.theta_fixed
        if theta is not None:
            log_d = np.logaddexp(pair, theta)
            pt = np.exp(theta - log_d)
        else:
            log_d = pair
            pt = np.zeros_like(h)
        pw = np.exp(h - log_d)
        pl = np.exp(-h - log_d)
        return h, log_d, pw, pl, pt

    def _loglik_rows(self, x: FloatArray, h: FloatArray, log_d: FloatArray) -> FloatArray:
        theta = x[-1] if self.layout.has_nu else self.theta_fixed
        tie_term = 0.0 if theta is None else theta
        rows: FloatArray = self.sign * h + self.is_tie * tie_term - log_d
        return rows

    def _penalty(self, x: FloatArray) -> tuple[float, FloatArray]:
        beta = x[: self.layout.n_models - 1]
        grad = self.prior @ beta
        return 0.5 * float(beta @ grad), grad

    def scores(self, x: FloatArray) -> sp.csr_matrix | FloatArray:
        """Per-vote score vectors (gradient of one vote's log-likelihood), one row per cell."""
        _, _, pw, pl, pt = self._probs(x)
        g_u = 0.5 * (self.sign - (pw - pl))
        lin = self.X.multiply(g_u[:, None]).toarray()
        if self.layout.has_nu:
            return np.column_stack([lin, self.is_tie - pt])
        return lin

    def value_grad(self, x: FloatArray) -> tuple[float, FloatArray]:
        h, log_d, pw, pl, pt = self._probs(x)
        ll = float(self.cw @ self._loglik_rows(x, h, log_d))
        g_u = 0.5 * (self.sign - (pw - pl)) * self.cw
        grad = np.empty(self.layout.size)
        grad[: self.layout.n_linear] = self.X.T @ g_u
        if self.layout.has_nu:
            grad[-1] = float(self.cw @ (self.is_tie - pt))
        pen, pen_grad = self._penalty(x)
        grad[: self.layout.n_models - 1] -= pen_grad
        return (-ll + pen) / self.total, -grad / self.total

    def hess(self, x: FloatArray) -> FloatArray:
        """Hessian of the objective (the observed information per unit weight, plus the prior)."""
        _, _, pw, pl, pt = self._probs(x)
        diff = pw - pl
        h_uu = 0.25 * (pw + pl - diff**2) * self.cw
        out = np.empty((self.layout.size, self.layout.size))
        n_lin = self.layout.n_linear
        out[:n_lin, :n_lin] = (self.X.T @ self.X.multiply(h_uu[:, None])).toarray()
        if self.layout.has_nu:
            h_ut = -0.5 * pt * diff * self.cw
            h_tt = (pt - pt**2) * self.cw
            cross = self.X.T @ h_ut
            out[:n_lin, -1] = cross
            out[-1, :n_lin] = cross
            out[-1, -1] = float(h_tt.sum())
        nb = self.layout.n_models - 1
        out[:nb, :nb] += self.prior
        return out / self.total

    def loglik(self, x: FloatArray) -> float:
        h, log_d, _, _, _ = self._probs(x)
        return float(self.cw @ self._loglik_rows(x, h, log_d))


@dataclass(frozen=True)
class ExtendedFit:
    """A fitted extended Bradley-Terry model.

    Attributes
    ----------
    models : model names
    spec : the :class:`FitSpec` fitted
    rating : Elo-scale ratings, mean 1000 (before any anchor shift)
    beta : natural-log strengths, centred (sum to zero)
    position : left-side advantage(s) in natural-log units: shape (0,), (1,) or (n_models,)
    theta : ``log nu`` for Davidson fits, None otherwise
    gamma : style coefficients (natural-log units per unit of the normalised covariate)
    feature_names : names of the style covariates
    tie_rate : weighted share of ties in the fitted votes (used to forecast ties for ``half`` fits)
    loglik : log-likelihood the optimiser maximised (weighted; pseudo-likelihood for ``half`` fits)
    x : the optimiser's parameter vector (reference parametrisation), for warm starts
    n_iter : optimiser iterations
    """

    models: tuple[str, ...]
    spec: FitSpec
    rating: FloatArray
    beta: FloatArray
    position: FloatArray
    theta: float | None
    gamma: FloatArray
    feature_names: tuple[str, ...]
    tie_rate: float
    loglik: float
    x: FloatArray
    n_iter: int
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def nu(self) -> float:
        """Davidson tie propensity (0 for plain BT)."""
        return 0.0 if self.theta is None else math.exp(self.theta)

    @property
    def n_params(self) -> int:
        """Free parameters of the three-outcome forecast (a ``half`` fit's tie rate counts as one)."""
        return int(len(self.models) + self.position.shape[0] + self.gamma.shape[0])


def _layout(cells: Cells, spec: FitSpec) -> _Layout:
    n_position = {"none": 0, "common": 1, "per-model": cells.n_models}[spec.position]
    return _Layout(
        n_models=cells.n_models,
        n_position=n_position,
        has_nu=spec.ties == "davidson" and spec.nu_fixed is None,
        n_features=cells.features.shape[1],
    )


def _check_data(cells: Cells, spec: FitSpec) -> None:
    if cells.n_models < 2:
        raise ValueError("need at least two models")
    if (
        spec.ties == "davidson"
        and spec.nu_fixed is None
        and not np.any((cells.outcome == Outcome.TIE) & (cells.count > 0))
    ):
        raise ValueError("Davidson ties need at least one tie; with none the tie propensity is 0 (use bt)")
    if spec.prior_sd is None:
        _check_strongly_connected(cells)
    seen = np.bincount(
        np.concatenate([cells.left[cells.count > 0], cells.right[cells.count > 0]]),
        minlength=cells.n_models,
    )
    if np.any(seen == 0):
        missing = [cells.models[i] for i in np.flatnonzero(seen == 0)]
        raise ValueError(f"models without votes: {missing}")


def _check_strongly_connected(cells: Cells) -> None:
    """Zermelo's condition: the MLE is finite only if every model has beaten (or tied) and been beaten by
    (or tied) some chain of others, i.e. the "beat or tied" graph is strongly connected."""
    live = cells.count > 0
    win = live & (cells.outcome == Outcome.MODEL_A)
    loss = live & (cells.outcome == Outcome.MODEL_B)
    tie = live & (cells.outcome == Outcome.TIE)
    src = np.concatenate([cells.left[win | tie], cells.right[loss | tie]])
    dst = np.concatenate([cells.right[win | tie], cells.left[loss | tie]])
    n = cells.n_models
    graph = sp.csr_matrix((np.ones(src.shape[0]), (src, dst)), shape=(n, n))
    n_parts, labels = csgraph.connected_components(graph, directed=True, connection="strong")
    if n_parts > 1:
        sizes = np.bincount(labels)
        small = [cells.models[i] for i in np.flatnonzero(sizes[labels] == sizes.min())]
        raise ConvergenceError(
            f"no finite maximum-likelihood ratings: the models split into {n_parts} groups where one never"
            f" beats or ties the other (e.g. {small[:5]}); add votes or a prior (prior_sd)"
        )


def _minimise(objective: _Objective, x0: FloatArray, *, tol: float, max_iter: int) -> optimize.OptimizeResult:
    result = optimize.minimize(
        objective.value_grad,
        x0,
        jac=True,
        hess=objective.hess,
        method="trust-exact",
        options={"gtol": tol, "maxiter": max_iter},
    )
    return result


def _finish(
    cells: Cells, spec: FitSpec, layout: _Layout, objective: _Objective, result: optimize.OptimizeResult
) -> ExtendedFit:
    x = np.asarray(result.x, dtype=np.float64)
    beta = np.append(x[: layout.n_models - 1], 0.0)
    beta -= beta.mean()
    rating = ELO_PER_NAT * beta + 1000.0
    if np.max(np.abs(rating - 1000.0)) > _MAX_ABS_ELO:
        raise ConvergenceError(
            "ratings diverge: some model only wins or only loses, or the comparison graph is disconnected;"
            " add a prior (prior_sd) or more votes"
        )
    cw = cells.count * cells.weight
    tie_rate = float(cw[cells.outcome == Outcome.TIE].sum() / cw.sum())
    return ExtendedFit(
        models=cells.models,
        spec=spec,
        rating=rating,
        beta=beta,
        position=x[layout.position_slice].copy(),
        theta=float(x[-1]) if layout.has_nu else objective.theta_fixed,
        gamma=x[layout.feature_slice].copy(),
        feature_names=cells.feature_names,
        tie_rate=tie_rate,
        loglik=objective.loglik(x),
        x=x,
        n_iter=int(result.nit),
    )


def fit_extended(
    cells: Cells,
    spec: FitSpec,
    *,
    x0: FloatArray | None = None,
    tol: float = 1e-8,
    max_iter: int = 200,
) -> ExtendedFit:
    """Maximum-likelihood (or MAP, with a prior) fit of the extended Bradley-Terry model.

    Parameters
    ----------
    cells : Cells
        From :func:`make_cells`.
    spec : FitSpec
    x0 : array, optional
        Starting point in the optimiser's parametrisation (``ExtendedFit.x``), for warm starts.
    tol : float
        Gradient tolerance of the per-vote objective.
    max_iter : int

    Returns
    -------
    ExtendedFit

    Raises
    ------
    ConvergenceError
        If the optimiser stops without converging, or ratings run off to infinity.
    ValueError
        On unusable data (fewer than two models, a model without votes, Davidson without ties).
    """
    _check_data(cells, spec)
    layout = _layout(cells, spec)
    objective = _Objective(cells, spec, layout)
    if x0 is None:
        x0 = np.zeros(layout.size)
        if layout.has_nu:
            x0[-1] = math.log(max(_tie_share(cells), 1e-3))
    result = _minimise(objective, np.asarray(x0, dtype=np.float64), tol=tol, max_iter=max_iter)
    if not result.success:
        raise ConvergenceError(f"extended BT fit did not converge: {result.message}")
    return _finish(cells, spec, layout, objective, result)


def _tie_share(cells: Cells) -> float:
    cw = cells.count * cells.weight
    return float(cw[cells.outcome == Outcome.TIE].sum() / cw.sum())


def predict_proba(
    fit: ExtendedFit,
    left: IntArray,
    right: IntArray,
    *,
    features: FloatArray | None = None,
) -> FloatArray:
    """Three-outcome forecasts ``[P(left wins), P(tie), P(right wins)]`` for battles.

    A ``half`` (plain BT) fit has no tie model; it forecasts a tie at the fitted tie rate and splits the
    rest by its win probability, so every method can be scored on the same three outcomes.
    """
    u = fit.beta[left] - fit.beta[right]
    if fit.position.shape[0] == 1:
        u = u + fit.position[0]
    elif fit.position.shape[0] > 1:
        u = u + fit.position[left]
    if fit.gamma.shape[0]:
        if features is None:
            raise ValueError("this fit has style covariates; pass features")
        u = u + np.asarray(features) @ fit.gamma
    h = 0.5 * u
    if fit.theta is None:
        p_left = 1.0 / (1.0 + np.exp(-u))
        return np.column_stack(
            [(1 - fit.tie_rate) * p_left, np.full_like(u, fit.tie_rate), (1 - fit.tie_rate) * (1 - p_left)]
        )
    log_d = np.logaddexp(np.logaddexp(h, -h), fit.theta)
    return np.column_stack([np.exp(h - log_d), np.exp(fit.theta - log_d), np.exp(-h - log_d)])


# ----------------------------------------------------------------------------------------------------------
# Intervals


@dataclass(frozen=True)
class Intervals:
    """Point estimates and interval bounds for ratings and for each named extra parameter."""

    rating: FloatArray
    rating_low: FloatArray
    rating_high: FloatArray
    extra: dict[str, tuple[float, float, float]]
    rank_low: IntArray | None = None
    rank_high: IntArray | None = None
    rounds: FloatArray | None = None


def _extras(
    fit_x: FloatArray, layout: _Layout, models: tuple[str, ...], names: tuple[str, ...]
) -> dict[str, float]:
    """The reported extra parameters (Elo points, or nu) as a function of the optimiser vector."""
    out: dict[str, float] = {}
    pos = fit_x[layout.position_slice]
    if layout.n_position == 1:
        out["position_advantage_elo"] = ELO_PER_NAT * float(pos[0])
    elif layout.n_position > 1:
        for m, value in zip(models, pos, strict=True):
            out[f"position_advantage_elo:{m}"] = ELO_PER_NAT * float(value)
    if layout.has_nu:
        out["tie_propensity_nu"] = math.exp(float(fit_x[-1]))
    for name, value in zip(names, fit_x[layout.feature_slice], strict=True):
        out[f"style_{name}_elo"] = ELO_PER_NAT * float(value)
    return out


def _ratings_of(x: FloatArray, n_models: int, anchor: int | None, anchor_rating: float) -> FloatArray:
    beta = np.append(x[: n_models - 1], 0.0)
    if anchor is None:
        centred: FloatArray = ELO_PER_NAT * (beta - beta.mean()) + 1000.0
        return centred
    anchored: FloatArray = ELO_PER_NAT * (beta - beta[anchor]) + anchor_rating
    return anchored


def sandwich_extended(
    cells: Cells,
    fit: ExtendedFit,
    *,
    level: float = 0.95,
    anchor: int | None = None,
    anchor_rating: float = 1000.0,
) -> Intervals:
    """Robust (sandwich) normal intervals ``H^-1 B H^-1`` from the analytic Hessian and per-vote scores.

    ``H`` is the (penalised) observed information and ``B = sum_cells count * weight^2 * g g^T`` the outer
    product of per-vote scores; ratings are linear in the parameters (centring or anchoring), the
    tie propensity is reported as ``exp`` of an interval on ``log nu``.
    """
    layout = _layout(cells, fit.spec)
    objective = _Objective(cells, fit.spec, layout)
    hess = objective.hess(fit.x) * objective.total
    scores = np.asarray(objective.scores(fit.x))
    w2 = cells.count * cells.weight**2
    meat = scores.T @ (scores * w2[:, None])
    bread = np.linalg.pinv(hess)
    cov = bread @ meat @ bread
    z = float(stats.norm.ppf(0.5 + level / 2))
    n = cells.n_models
    # ratings: linear map T @ x[:n-1]
    embed = np.vstack([np.eye(n - 1), np.zeros((1, n - 1))])
    shift = np.eye(n) - (1.0 / n if anchor is None else np.outer(np.ones(n), np.eye(n)[anchor]))
    transform = ELO_PER_NAT * shift @ embed
    rating = _ratings_of(fit.x, n, anchor, anchor_rating)
    se_rating = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", transform, cov[: n - 1, : n - 1], transform), 0))
    extra: dict[str, tuple[float, float, float]] = {}
    values = _extras(fit.x, layout, cells.models, cells.feature_names)
    index = list(range(layout.position_slice.start, layout.position_slice.stop))
    names = [k for k in values if k.startswith("position_advantage_elo")]
    for name, i in zip(names, index, strict=True):
        se = ELO_PER_NAT * math.sqrt(max(cov[i, i], 0.0))
        extra[name] = (values[name], values[name] - z * se, values[name] + z * se)
    if layout.has_nu:
        se = math.sqrt(max(cov[-1, -1], 0.0))
        t = float(fit.x[-1])
        extra["tie_propensity_nu"] = (math.exp(t), math.exp(t - z * se), math.exp(t + z * se))
    for k, name in enumerate(cells.feature_names):
        i = layout.feature_slice.start + k
        key = f"style_{name}_elo"
        se = ELO_PER_NAT * math.sqrt(max(cov[i, i], 0.0))
        extra[key] = (values[key], values[key] - z * se, values[key] + z * se)
    return Intervals(
        rating=rating, rating_low=rating - z * se_rating, rating_high=rating + z * se_rating, extra=extra
    )


def bootstrap_extended(
    cells: Cells,
    fit: ExtendedFit,
    *,
    resample: _Resampler,
    n_rounds: int = 1000,
    level: float = 0.95,
    anchor: int | None = None,
    anchor_rating: float = 1000.0,
) -> Intervals:
    """Percentile bootstrap: each round refits on a multinomial redraw of the cells, warm-started.

    Parameters
    ----------
    resample : callable
        ``resample(count, n_rounds)`` yielding one redrawn count vector per round (the multinomial
        over cells of :mod:`leaderboard.bootstrap`).
    """
    layout = _layout(cells, fit.spec)
    objective = _Objective(cells, fit.spec, layout)
    n = cells.n_models
    keys = list(_extras(fit.x, layout, cells.models, cells.feature_names))
    ratings = np.empty((n_rounds, n))
    extras = np.empty((n_rounds, len(keys)))
    for r, count in enumerate(resample(cells.count, n_rounds)):
        objective.set_count(np.asarray(count, dtype=np.float64))
        result = _minimise(objective, fit.x, tol=1e-7, max_iter=200)
        if not result.success:
            raise ConvergenceError(f"bootstrap round {r} did not converge: {result.message}")
        x = np.asarray(result.x)
        ratings[r] = _ratings_of(x, n, anchor, anchor_rating)
        extras[r] = list(_extras(x, layout, cells.models, cells.feature_names).values())
    lo_q, hi_q = 50 * (1 - level), 50 * (1 + level)
    values = _extras(fit.x, layout, cells.models, cells.feature_names)
    extra = {
        key: (values[key], float(np.percentile(extras[:, k], lo_q)), float(np.percentile(extras[:, k], hi_q)))
        for k, key in enumerate(keys)
    }
    return Intervals(
        rating=_ratings_of(fit.x, n, anchor, anchor_rating),
        rating_low=np.percentile(ratings, lo_q, axis=0),
        rating_high=np.percentile(ratings, hi_q, axis=0),
        extra=extra,
        rounds=ratings,
    )


# ----------------------------------------------------------------------------------------------------------
# Leaderboards

#: Method names and what they fit (``bt`` here is the same likelihood as :mod:`leaderboard.bt`).
METHODS: dict[str, FitSpec] = {
    "bt": FitSpec(),
    "bt-position": FitSpec(position="common"),
    "davidson": FitSpec(ties="davidson"),
    "davidson-position": FitSpec(position="common", ties="davidson"),
}


def multinomial_resampler(random_state: int | None, *, block_size: int = 64) -> _Resampler:
    """Bootstrap draws: resampling N votes with replacement is one multinomial draw over the cells.

    Draws come in blocks of ``block_size`` rounds from one seeded generator, so the same seed gives the
    same rounds.
    """

    def draw(count: FloatArray, n_rounds: int) -> Iterable[FloatArray]:
        rng = np.random.default_rng(random_state)
        votes = np.round(count).astype(np.int64)
        if not np.allclose(votes, count):
            raise ValueError("the bootstrap needs whole vote numbers per cell")
        total = int(votes.sum())
        p = votes / total
        done = 0
        while done < n_rounds:
            size = min(block_size, n_rounds - done)
            yield from rng.multinomial(total, p, size=size).astype(np.float64)
            done += size

    return draw


def both_bad_rates(counts: PairCounts) -> FloatArray:
    """Per model, the share of its votes that were ``tie (bothbad)``: an absolute quality signal."""
    votes = counts.vote_counts
    n = counts.n_models
    battles = np.bincount(counts.model_a, votes, n) + np.bincount(counts.model_b, votes, n)
    bad = counts.outcome == Outcome.BOTHBAD
    n_bad = np.bincount(counts.model_a[bad], votes[bad], n) + np.bincount(counts.model_b[bad], votes[bad], n)
    rates: FloatArray = np.divide(n_bad, battles, out=np.zeros(n), where=battles > 0)
    return rates


_OPTIONS = frozenset(
    {"half_life", "now", "prior", "both_bad", "per_model_position", "features", "feature_names"}
)


def _run_method(method: str, counts: PairCounts, request: MethodRequest) -> MethodOutput:
    """Fit ``method`` for :func:`leaderboard.compute.compute_leaderboard` (see :func:`compute_extended`)."""
    options = dict(request.options)
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ValueError(f"method {method!r} does not take options {sorted(unknown)}")
    base = METHODS[method]
    per_model = bool(options.get("per_model_position", False)) and base.position != "none"
    spec = replace(
        base,
        half_life=options.get("half_life"),
        prior_sd=options.get("prior"),
        both_bad=options.get("both_bad", "tie"),
        position="per-model" if per_model else base.position,
    )
    features = options.get("features")
    cells = make_cells(
        counts,
        spec,
        features=None if features is None else np.asarray(features, dtype=np.float64),
        feature_names=tuple(options.get("feature_names", ())),
        now=options.get("now"),
    )
    fit = fit_extended(cells, spec)
    anchor = None if request.anchor is None else counts.models.index(request.anchor[0])
    anchor_rating = 1000.0 if request.anchor is None else float(request.anchor[1])
    parameters: dict[str, object] = {"style": list(cells.feature_names), "optimiser_iterations": fit.n_iter}
    if request.interval == "bootstrap":
        draws = multinomial_resampler(request.random_state)
        progress = request.progress

        def counted(count: FloatArray, n: int) -> Iterable[FloatArray]:
            for r, draw in enumerate(draws(count, n)):
                yield draw
                if progress is not None and ((r + 1) % 10 == 0 or r + 1 == n):
                    progress(r + 1, n)

        iv = bootstrap_extended(
            cells,
            fit,
            resample=counted,
            n_rounds=request.n_rounds,
            level=request.level,
            anchor=anchor,
            anchor_rating=anchor_rating,
        )
    elif request.interval == "sandwich":
        iv = sandwich_extended(cells, fit, level=request.level, anchor=anchor, anchor_rating=anchor_rating)
    else:
        rating = _ratings_of(fit.x, counts.n_models, anchor, anchor_rating)
        values = _extras(fit.x, _layout(cells, spec), cells.models, cells.feature_names)
        iv = Intervals(rating, rating, rating, {k: (v, v, v) for k, v in values.items()})
    fitted = {k: {"value": v, "ci_low": lo, "ci_high": hi} for k, (v, lo, hi) in iv.extra.items()}
    fitted.update(_both_bad_fitted(counts, request.level))
    return MethodOutput(
        rating=iv.rating,
        ci_low=iv.rating_low,
        ci_high=iv.rating_high,
        rounds=iv.rounds,
        parameters=parameters,
        parameters_fitted=fitted,
    )


def _both_bad_fitted(counts: PairCounts, level: float) -> dict[str, dict[str, float]]:
    """Per-model both-bad rates with Wilson score intervals (only when there are both-bad votes)."""
    if not np.any(counts.outcome == Outcome.BOTHBAD):
        return {}
    votes = counts.vote_counts
    n = counts.n_models
    per_model = np.bincount(counts.model_a, votes, n) + np.bincount(counts.model_b, votes, n)
    z = float(stats.norm.ppf(0.5 + level / 2))
    out: dict[str, dict[str, float]] = {}
    for name, rate, m in zip(counts.models, both_bad_rates(counts), per_model, strict=True):
        centre = (rate + z * z / (2 * m)) / (1 + z * z / m)
        half = z * math.sqrt(rate * (1 - rate) / m + z * z / (4 * m * m)) / (1 + z * z / m)
        out[f"both_bad_rate:{name}"] = {
            "value": float(rate),
            "ci_low": centre - half,
            "ci_high": centre + half,
        }
    return out


for _name in ("bt-position", "davidson", "davidson-position"):
    register_method(_name, partial(_run_method, _name), replace=True)
# plain BT through this engine, for when it needs time weights, a prior or style covariates
register_method("bt-extended", partial(_run_method, "bt"), replace=True)


def compute_extended(
    counts: PairCounts,
    *,
    method: str = "davidson-position",
    n_rounds: int = 1000,
    level: float = 0.95,
    interval: str = "bootstrap",
    anchor: tuple[str, float] | None = None,
    random_state: int = 0,
    progress: Callable[[int, int], None] | None = None,
    half_life: float | None = None,
    now: float | None = None,
    prior: float | None = None,
    both_bad: BothBad = "tie",
    per_model_position: bool = False,
    features: FloatArray | None = None,
    feature_names: tuple[str, ...] = (),
) -> Leaderboard:
    """Fit an extended method and build a :class:`~leaderboard.result.Leaderboard`.

    The same as ``compute_leaderboard(counts, method=..., **options)``, with the options spelled out.
    ``bt`` here runs this module's engine (so it takes the options too); elsewhere ``bt`` is
    :mod:`leaderboard.bt`.

    Parameters
    ----------
    counts : PairCounts
        Aggregated votes (with ``time`` per cell for ``half_life``; one cell per battle with ``features``
        for style control).
    method : ``bt``, ``bt-position``, ``davidson`` or ``davidson-position``
    n_rounds, level, interval, random_state, progress :
        Bootstrap rounds (multinomial over cells, refit warm-started), sandwich intervals, or ``none``.
    anchor : (model, rating), optional
        Shift ratings so this model has this rating; default mean 1000.
    half_life : time-decay half-life, in the units of ``counts.time``
    now : reference time of the decay (default: latest cell)
    prior : prior standard deviation of ratings around their mean, in Elo points (None: no prior)
    both_bad : ``tie`` (default) or ``exclude``
    per_model_position : one left-side advantage per model instead of a common one
    features, feature_names : style covariates per cell (left minus right), see :mod:`leaderboard.style`

    Returns
    -------
    Leaderboard
        ``parameters_fitted`` holds the position advantage (Elo), the tie propensity, the style
        coefficients (Elo per unit covariate) and per-model both-bad rates, each with its interval.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {sorted(METHODS)}")
    options: dict[str, object] = {"both_bad": both_bad, "per_model_position": per_model_position}
    for key, value in (("half_life", half_life), ("now", now), ("prior", prior), ("features", features)):
        if value is not None:
            options[key] = value
    if feature_names:
        options["feature_names"] = feature_names
    name = "bt-extended" if method == "bt" else method
    board = compute_leaderboard(
        counts,
        method=name,
        n_rounds=n_rounds,
        level=level,
        interval=interval,
        anchor=anchor,
        random_state=random_state,
        progress=progress,
        **options,
    )
    return replace(board, method=method)
