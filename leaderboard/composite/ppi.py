"""Human-scale ratings rectified by prediction-powered inference (PPI++) with LLM-judge verdicts.

The target is the human-only Bradley-Terry fit: what the ratings would be with human votes on every
battle. Judges have verdicts on many battles, humans on a subset of them. PPI++ (Angelopoulos, Duchi
and Zrnic, 2023, "PPI++: Efficient Prediction-Powered Inference") minimises the rectified loss

    L_lambda(theta) = 1/n sum_labelled l(theta; y_i)
                      + lambda * (1/N sum_unlabelled l(theta; f_j) - 1/n sum_labelled l(theta; f_i))

where ``l`` is the Bradley-Terry log-loss of one battle with a fractional outcome, ``y`` the human
score and ``f`` the judges' score of the same battle. The bracket has mean zero whatever the judges do,
so the estimate targets the human-only ratings for every ``lambda``; a judge that predicts the human
votes makes it more precise, a useless one only costs the tuned ``lambda`` (which then goes to 0).
``lambda`` is tuned by the PPI++ plug-in formula (the trace of the asymptotic covariance minimised)
and clipped to [0, 1]. Intervals come from the PPI++ sandwich
``H^-1 (Cov_lab(g_y - lambda g_f) / n + lambda^2 Cov_unlab(g_f) / N) H^-1``, where ``g`` are per-battle
score vectors; the logistic Hessian does not depend on the labels, so ``H`` is estimated on every battle.

Why not the ``ppi-python`` package: it is not installed here, and its logistic-regression routine
knows nothing of the Bradley-Terry design (a model's column +1 on the left, -1 on the right, one model
as the reference), fractional outcomes or the project's rating scale; the loss, gradient and Hessian
below are the same few lines as the project's own fits, and go to the same Newton trust-region driver
(:mod:`leaderboard.bt.solver`).

A battle is one prompt and pair of models: ``y`` is the mean of the human votes on it and ``f`` the
mean of the judges' verdicts (both orders), each as the score of the lower-numbered model. Battles
with human votes but no verdict are not used (PPI++ needs the judges' prediction on every labelled
battle).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.stats import norm

from leaderboard.bt.solver import newton_trust_region
from leaderboard.bt.spec import NonConvergenceError
from leaderboard.composite.model import CompositeData

__all__ = ["PPIBattles", "PPIFit", "bootstrap_ppi", "fit_ppi", "ppi_battles"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class PPIBattles:
    """Labelled battles (a human score ``y`` and a judge score ``f``) and unlabelled ones (``f`` only).

    ``*_a`` and ``*_b`` index ``models``; scores are the ``a`` side's share of the win in [0, 1].
    """

    models: tuple[str, ...]
    lab_a: IntArray
    lab_b: IntArray
    y: FloatArray
    f_lab: FloatArray
    unl_a: IntArray
    unl_b: IntArray
    f_unl: FloatArray

    def __post_init__(self) -> None:
        n, big_n = len(self.lab_a), len(self.unl_a)
        if not (len(self.lab_b) == len(self.y) == len(self.f_lab) == n):
            raise ValueError("labelled columns differ in length")
        if not (len(self.unl_b) == len(self.f_unl) == big_n):
            raise ValueError("unlabelled columns differ in length")
        if n < 2:
            raise ValueError("PPI needs human votes on at least two battles the judges also saw")
        for values in (self.y, self.f_lab, self.f_unl):
            if values.size and (not np.all(np.isfinite(values)) or values.min() < 0 or values.max() > 1):
                raise ValueError("scores must lie in [0, 1]")


@dataclass(frozen=True)
class PPIFit:
    """PPI++ ratings on the human scale with sandwich intervals, and the human-only fit beside them."""

    models: tuple[str, ...]
    rating: FloatArray
    rating_se: FloatArray
    human_rating: FloatArray
    human_se: FloatArray
    lam: float
    n_labelled: int
    n_unlabelled: int

    def intervals(self, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
        z = float(norm.ppf(0.5 + level / 2))
        return self.rating - z * self.rating_se, self.rating + z * self.rating_se

    def describe(self, level: float = 0.95) -> dict[str, object]:
        """Plain values for a snapshot's metadata."""
        z = float(norm.ppf(0.5 + level / 2))
        return {
            "lambda": self.lam,
            "n_labelled_battles": self.n_labelled,
            "n_unlabelled_battles": self.n_unlabelled,
            "mean_half_width": float(z * np.mean(self.rating_se)),
            "human_only_mean_half_width": float(z * np.mean(self.human_se)),
            "human_only_rating": dict(zip(self.models, map(float, self.human_rating), strict=True)),
        }


def ppi_battles(data: CompositeData) -> PPIBattles:
    """Battles of the composite's input split into labelled (human votes and judge verdicts) and
    unlabelled (judge verdicts only); source 0 is the human pool, every other source a judge."""
    if data.battle is None:
        raise ValueError("PPI needs the battle (prompt and pair) of every vote")
    lo = np.minimum(data.model_a, data.model_b)
    hi = np.maximum(data.model_a, data.model_b)
    score = np.where(data.model_a == lo, data.score, 1.0 - data.score)
    score = np.where(data.tie, 0.5, score)
    codes, battle = np.unique(data.battle, return_inverse=True)
    k = len(codes)
    pair_lo = np.zeros(k, dtype=np.int64)
    pair_hi = np.zeros(k, dtype=np.int64)
    pair_lo[battle] = lo
    pair_hi[battle] = hi
    means = []
    for human in (True, False):
        rows = (data.source == 0) if human else (data.source > 0)
        total = np.bincount(battle[rows], weights=score[rows], minlength=k)
        count = np.bincount(battle[rows], minlength=k).astype(float)
        means.append(np.divide(total, count, out=np.full(k, np.nan), where=count > 0))
    y, f = means
    lab = np.isfinite(y) & np.isfinite(f)
    unl = ~np.isfinite(y) & np.isfinite(f)
    return PPIBattles(
        models=data.models,
        lab_a=pair_lo[lab],
        lab_b=pair_hi[lab],
        y=y[lab],
        f_lab=f[lab],
        unl_a=pair_lo[unl],
        unl_b=pair_hi[unl],
        f_unl=f[unl],
    )


def _design(a: IntArray, b: IntArray, m: int) -> FloatArray:
    """Rows +1 for ``a`` and -1 for ``b``, model 0's column dropped (the reference)."""
    x = np.zeros((len(a), m))
    rows = np.arange(len(a))
    x[rows, a] += 1.0
    x[rows, b] -= 1.0
    return x[:, 1:]


def _sigmoid(z: FloatArray) -> FloatArray:
    out: FloatArray = 0.5 * (1.0 + np.tanh(z / 2.0))
    return out


#: Where a fit of the (rectified) log-loss stops: the Euclidean norm of its gradient (the weights sum to
#: about 1, so this is per battle).
_FIT_TOL = 1e-9
#: A fit also stops, as settled, when its steps are refused at a smaller gradient than this: the
#: decrease a step would bring is lost in rounding (:func:`leaderboard.bt.solver.newton_trust_region`).
_SETTLED_GTOL = 1e-6
#: The largest gradient a fit that stopped short of ``_FIT_TOL`` may leave (its next step's promised
#: decrease lost in rounding): beyond it the fit raises.
_STOPPED_GRADIENT = 1e-6


def _fit_loss(x: FloatArray, target: FloatArray, weight: FloatArray, start: FloatArray) -> FloatArray:
    """argmin of ``sum_r weight_r * logloss(x_r theta; target_r)`` from ``start``, by the package's
    Newton trust-region driver (:func:`leaderboard.bt.solver.newton_trust_region`) on the analytic
    gradient and Hessian. The weights may be negative (the rectifier's labelled judge scores): the loss
    is then not convex everywhere, which the trust region handles.

    Raises
    ------
    NonConvergenceError
        When the fit stops short with a gradient still above ``_STOPPED_GRADIENT``.
    """

    def value_grad(theta: FloatArray) -> tuple[float, FloatArray]:
        d = x @ theta
        # log(1 + e^{-d}) and log(1 + e^{d}) computed stably
        loss = target * np.logaddexp(0.0, -d) + (1.0 - target) * np.logaddexp(0.0, d)
        grad: FloatArray = x.T @ (weight * (_sigmoid(d) - target))
        return float(weight @ loss), grad

    def hessian(theta: FloatArray) -> FloatArray:
        p = _sigmoid(x @ theta)
        out: FloatArray = (x * (weight * p * (1 - p))[:, None]).T @ x
        return out

    solution = newton_trust_region(
        value_grad, hessian, start, tol=_FIT_TOL, max_iter=200, settled_gtol=_SETTLED_GTOL
    )
    if not solution.converged and float(np.max(np.abs(value_grad(solution.x)[1]))) > _STOPPED_GRADIENT:
        raise NonConvergenceError(f"the PPI++ fit did not converge: {solution.message}")
    return solution.x


def _scores(x: FloatArray, theta: FloatArray, target: FloatArray) -> FloatArray:
    """Per-battle gradient of the log-loss (rows) at ``theta``."""
    return x * (_sigmoid(x @ theta) - target)[:, None]


def fit_ppi(
    battles: PPIBattles,
    *,
    lam: float | None = None,
    scale: float = 400.0,
    base: float = 10.0,
    initial: float = 1000.0,
) -> PPIFit:
    """PPI++ ratings (``lam`` None: tuned by the plug-in formula, clipped to [0, 1]) and the human-only
    fit of the labelled battles, both with their standard errors in rating points."""
    m = len(battles.models)
    x_lab = _design(battles.lab_a, battles.lab_b, m)
    x_unl = _design(battles.unl_a, battles.unl_b, m)
    n, big_n = len(x_lab), len(x_unl)
    start = np.zeros(m - 1)
    human = _fit_loss(x_lab, battles.y, np.full(n, 1.0 / n), start)
    x_all = np.vstack([x_lab, x_unl])

    def hessian(theta: FloatArray) -> FloatArray:
        p = _sigmoid(x_all @ theta)
        h: FloatArray = (x_all * (p * (1 - p))[:, None]).T @ x_all / len(x_all)
        return h

    h_inv = np.linalg.pinv(hessian(human))
    g_y = _scores(x_lab, human, battles.y)
    g_f = _scores(x_lab, human, battles.f_lab)
    if lam is None:
        if big_n == 0:
            lam = 0.0
        else:
            g_f_all = np.vstack([g_f, _scores(x_unl, human, battles.f_unl)])
            cross = np.cov(g_y.T, g_f.T)[: m - 1, m - 1 :]
            var_f = np.atleast_2d(np.cov(g_f_all.T))
            numerator = np.trace(h_inv @ (cross + cross.T) @ h_inv)
            denominator = 2 * (1 + n / big_n) * np.trace(h_inv @ var_f @ h_inv)
            lam = float(np.clip(numerator / denominator, 0.0, 1.0)) if denominator > 0 else 0.0
    if not 0.0 <= lam <= 1.0:
        raise ValueError("lambda must lie in [0, 1]")
    if big_n and lam > 0:
        x = np.vstack([x_lab, x_unl, x_lab])
        target = np.concatenate([battles.y, battles.f_unl, battles.f_lab])
        weight = np.concatenate([np.full(n, 1.0 / n), np.full(big_n, lam / big_n), np.full(n, -lam / n)])
        theta = _fit_loss(x, target, weight, human)
    else:
        theta = human
    h_inv = np.linalg.pinv(hessian(theta))
    rect = _scores(x_lab, theta, battles.y) - lam * _scores(x_lab, theta, battles.f_lab)
    middle = np.atleast_2d(np.cov(rect.T)) / n
    if big_n > 1 and lam > 0:
        middle = middle + lam**2 * np.atleast_2d(np.cov(_scores(x_unl, theta, battles.f_unl).T)) / big_n
    cov = h_inv @ middle @ h_inv
    h_human = np.linalg.pinv(
        (x_lab * (lambda p: p * (1 - p))(_sigmoid(x_lab @ human))[:, None]).T @ x_lab / n
    )
    cov_human = h_human @ (np.atleast_2d(np.cov(g_y.T)) / n) @ h_human
    unit = scale / np.log(base)
    return PPIFit(
        models=battles.models,
        rating=initial + unit * _centre(theta),
        rating_se=unit * _centred_se(cov, m),
        human_rating=initial + unit * _centre(human),
        human_se=unit * _centred_se(cov_human, m),
        lam=float(lam),
        n_labelled=n,
        n_unlabelled=big_n,
    )


def _centre(theta: FloatArray) -> FloatArray:
    full = np.concatenate([[0.0], theta])
    out: FloatArray = full - full.mean()
    return out


def _centred_se(cov: FloatArray, m: int) -> FloatArray:
    """Standard errors of the mean-centred ratings from the covariance of models 1..m-1 (model 0 at 0)."""
    lift = np.zeros((m, m - 1))
    lift[1:, :] = np.eye(m - 1)
    t_map = (np.eye(m) - 1.0 / m) @ lift
    out: FloatArray = np.sqrt(np.clip(np.diag(t_map @ cov @ t_map.T), 0, None))
    return out


def bootstrap_ppi(
    battles: PPIBattles,
    fit: PPIFit,
    *,
    rounds: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    scale: float = 400.0,
    base: float = 10.0,
    initial: float = 1000.0,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Percentile intervals of the PPI++ ratings from a bootstrap over battles; ``(low, high, samples)``.

    Each round resamples the labelled battles (a human score and the judges' on each, moving together)
    and, independently, the unlabelled ones, each with replacement (multinomial draws, the package's one
    sampler), and refits the rectified loss at the point fit's ``lambda`` (``fit.lam``, not re-tuned per
    round: the interval is for the estimator as published). The log-loss is linear in its target, so a
    round's loss is that of the model pairs with summed weights and weighted targets: a refit costs the
    number of pairs, not of battles.
    """
    from leaderboard.bt.bootstrap import draw_multinomial
    from leaderboard.bt.intervals import percentile_intervals

    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    m = len(battles.models)
    lam = fit.lam
    n, big_n = len(battles.lab_a), len(battles.unl_a)
    keys, pair = np.unique(
        np.concatenate([battles.lab_a * m + battles.lab_b, battles.unl_a * m + battles.unl_b]),
        return_inverse=True,
    )
    lab_pair, unl_pair = pair[:n], pair[n:]
    x = _design(keys // m, keys % m, m)
    k = len(keys)
    unit = scale / np.log(base)
    start = (fit.rating[1:] - fit.rating[0]) / unit
    rng = np.random.default_rng(seed)
    lab_draws = draw_multinomial(np.ones(n, dtype=np.int64), rounds, rng).astype(float) / n
    unl_draws = (
        draw_multinomial(np.ones(big_n, dtype=np.int64), rounds, rng).astype(float) / big_n
        if big_n and lam > 0
        else np.zeros((rounds, big_n))
    )
    samples = np.empty((rounds, m))
    for r in range(rounds):
        lab, unl = lab_draws[r], unl_draws[r]
        weight = np.asarray(
            np.bincount(lab_pair, weights=(1 - lam) * lab, minlength=k)
            + np.bincount(unl_pair, weights=lam * unl, minlength=k),
            dtype=np.float64,
        )
        total = np.bincount(
            lab_pair, weights=lab * (battles.y - lam * battles.f_lab), minlength=k
        ) + np.bincount(unl_pair, weights=lam * unl * battles.f_unl, minlength=k)
        used = weight > 0
        # a rectified target outside [0, 1] (a pair with a handful of battles) has no finite optimum
        target = np.clip(total[used] / weight[used], 0.0, 1.0)
        theta = _fit_loss(x[used], target, weight[used], start)
        samples[r] = initial + unit * _centre(theta)
    low, high = percentile_intervals(samples, level)
    return low, high, samples
