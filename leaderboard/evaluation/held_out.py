"""Model comparison on held-out votes: which rating method forecasts new votes best?

Every method is scored as a forecast of the three outcomes of a vote (left wins, tie, right wins), so
ties are scored properly for all of them: Davidson fits forecast ties themselves; methods without a tie
model (online Elo, plain Bradley-Terry) forecast a tie at their training tie rate and split the rest by
their win probability. On the test votes: log-loss, the (three-class) Brier score and the accuracy on
decisive votes; on the training votes: log-likelihood, AIC and BIC, as in the tables of Pires and Bueno
Filho (2020), "Can Elo ratings be improved?".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from leaderboard.battles import Battles
from leaderboard.bt.fit import BTFit, fit_bt, predict_proba
from leaderboard.bt.intervals import sandwich_intervals
from leaderboard.data import Outcome, PairCounts
from leaderboard.evaluation.calibration import (
    auc_of,
    calibration_table,
    fitted_scale,
    implied_difference,
    outcome_columns,
    vote_log_losses,
)
from leaderboard.evaluation.methods import (
    DEFAULT_METHODS,
    RATERS_METHOD,
    MethodSpec,
    data_gaps,
    default_methods,
    every_method,
    has_raters,
    methods_for,
    unidentified,
)
from leaderboard.online.elo import EloConfig, replay_elo
from leaderboard.quality.rater_ability import fit_rater_ability, rater_ability_proba

__all__ = [
    "DEFAULT_METHODS",
    "RATERS_METHOD",
    "data_gaps",
    "default_methods",
    "every_method",
    "has_raters",
    "methods_for",
    "unidentified",
    "drop_unseen",
    "score_system",
    "MethodScore",
    "MethodSpec",
    "evaluate_methods",
    "score_forecasts",
    "split_battles",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
#: Outcome codes, any integer width.
CodeArray = npt.NDArray[np.integer[Any]]


def split_battles(
    battles: Battles,
    *,
    how: Literal["random", "time"] = "random",
    test_fraction: float = 0.2,
    random_state: int | np.random.Generator | None = None,
) -> tuple[Battles, Battles]:
    """Split votes into training and test sets.

    ``random``: a seeded random share ``test_fraction`` goes to the test set. ``time``: the newest share
    is the test set (fit on the older votes, forecast the newer), by ``time`` or by arrival order.
    """
    if not 0 < test_fraction < 1:
        raise ValueError("test_fraction must be between 0 and 1")
    n = len(battles)
    n_test = max(1, int(round(test_fraction * n)))
    if how == "random":
        rng = np.random.default_rng(random_state)
        perm = rng.permutation(n)
        test_idx, train_idx = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    elif how == "time":
        order = np.argsort(battles.times(), kind="stable")
        train_idx, test_idx = order[: n - n_test], order[n - n_test :]
    else:
        raise ValueError(f"unknown split {how!r}; use 'random' or 'time'")
    return battles.take(train_idx), battles.take(test_idx)


def score_forecasts(
    proba: FloatArray, outcome: CodeArray, weight: FloatArray | None = None
) -> dict[str, float]:
    """Log-loss, three-class Brier score and decisive-vote accuracy of forecasts ``[left, tie, right]``.

    Both-bad votes count as ties. Accuracy is over decisive votes only: was the side given the higher
    win probability the winner? With vote weights each score is the weighted mean (a vote of weight 2
    counts as two identical votes).
    """
    column = outcome_columns(outcome)
    rows = np.arange(outcome.shape[0])
    onehot = np.zeros_like(proba)
    onehot[rows, column] = 1.0
    decisive = column != 1
    correct = (proba[:, 0] > proba[:, 2]) == (column == 0)
    w = np.ones(outcome.shape[0]) if weight is None else np.asarray(weight, dtype=np.float64)
    return {
        "log_loss": float(np.average(vote_log_losses(proba, outcome), weights=w)),
        "brier": float(np.average(np.sum((proba - onehot) ** 2, axis=1), weights=w)),
        "accuracy": float(np.average(correct[decisive], weights=w[decisive])) if decisive.any() else math.nan,
    }


def forecast_log_likelihood(proba: FloatArray, outcome: CodeArray) -> float:
    """Log-likelihood of the votes under forecasts ``[left, tie, right]`` (a system's training fit)."""
    return -float(np.sum(vote_log_losses(proba, outcome, floor=1e-300)))


def score_system(
    name: str,
    proba: FloatArray,
    outcome: CodeArray,
    *,
    train_loglik: float,
    n_params: int,
    n_train: int,
    kind: str = "batch",
    parameters_fitted: dict[str, dict[str, float]] | None = None,
    weight: FloatArray | None = None,
) -> MethodScore:
    """One row of the comparison table from a system's forecasts of the test votes.

    Parameters
    ----------
    name : str
    proba : array, shape (n_test, 3)
        Forecasts ``[left, tie, right]`` of the test votes.
    outcome : int array, shape (n_test,)
    train_loglik, n_params, n_train :
        Log-likelihood of the training votes under the system, its number of parameters and of training
        votes: ``AIC = 2 k - 2 ll``, ``BIC = k ln(n) - 2 ll``.
    kind : ``batch``, ``online`` or ``rolling``
    parameters_fitted : fitted extra parameters with intervals
    weight : array, shape (n_test,), optional
        Test vote weights: log-loss, Brier and accuracy are weighted means, and ``vote_losses`` are scaled
        by ``weight / mean(weight)`` so that their mean is the weighted log-loss (the paired comparison
        then resamples votes with their weights). AUC and calibration count every vote once.

    Returns
    -------
    MethodScore
    """
    scores = score_forecasts(proba, outcome, weight)
    losses = vote_log_losses(proba, outcome)
    if weight is not None and len(outcome):
        w = np.asarray(weight, dtype=np.float64)
        losses = losses * (w / w.mean())
    slope = fitted_scale(implied_difference(proba), outcome) if len(outcome) else {}
    return MethodScore(
        method=name,
        log_loss=scores["log_loss"],
        brier=scores["brier"],
        accuracy=scores["accuracy"],
        train_loglik=train_loglik,
        aic=2 * n_params - 2 * train_loglik,
        bic=n_params * math.log(n_train) - 2 * train_loglik,
        n_params=n_params,
        n_train=n_train,
        n_test=len(outcome),
        parameters_fitted=parameters_fitted or {},
        kind=kind,
        auc=auc_of(proba, outcome),
        calibration_slope=slope.get("slope", math.nan),
        fitted_scale=slope.get("scale", math.nan),
        calibration=calibration_table(proba, outcome),
        vote_losses=losses,
    )


# ----------------------------------------------------------------------------------------------------------
# Methods


#: The row's per-annotator position offsets: their spread estimated from the votes. When annotators do
#: not differ in side bias the estimate is near 0 and the row is the shared-term model; when they do
#: (LLM judges of opposite leanings) one shared term can only average them.
RATERS_POSITION_SD: Literal["estimate"] = "estimate"
#: Per-annotator discriminations are listed among a row's fitted parameters up to this many annotators.
MAX_LISTED_ANNOTATORS = 12


def votes_to_counts(battles: Battles, *, keep_time: bool, per_vote: bool) -> PairCounts:
    """Aggregate votes into cells: by (left, right, outcome), plus time when time weights need it, or one
    cell per vote when per-vote covariates need it. Vote weights and unknown sides are kept."""
    ones = np.ones(len(battles))
    weight = ones if battles.weight is None else np.asarray(battles.weight, dtype=np.float64)
    if per_vote:
        return PairCounts(
            models=battles.models,
            model_a=battles.model_a.astype(np.int64),
            model_b=battles.model_b.astype(np.int64),
            outcome=battles.outcome.astype(np.int8),
            count=weight.copy(),
            time=battles.times().astype(np.float64) if keep_time else None,
            votes=None if battles.weight is None else ones,
            sided=battles.sided,
        )
    if not keep_time:
        return battles.counts()
    sided = np.ones(len(battles)) if battles.sided is None else battles.sided.astype(np.float64)
    keys = np.column_stack([battles.model_a, battles.model_b, battles.outcome, sided, battles.times()])
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    n_cells = unique.shape[0]
    return PairCounts(
        models=battles.models,
        model_a=unique[:, 0].astype(np.int64),
        model_b=unique[:, 1].astype(np.int64),
        outcome=unique[:, 2].astype(np.int8),
        count=np.bincount(inverse.ravel(), weights=weight, minlength=n_cells).astype(np.float64),
        time=unique[:, 4].astype(np.float64),
        votes=None
        if battles.weight is None
        else np.bincount(inverse.ravel(), minlength=n_cells).astype(np.float64),
        sided=None if battles.sided is None else unique[:, 3].astype(bool),
        weight_sq=None
        if battles.weight is None
        else np.bincount(inverse.ravel(), weights=weight**2, minlength=n_cells).astype(np.float64),
    )


def fit_method(method: MethodSpec, train: Battles) -> BTFit:
    """Fit a Bradley-Terry method on training votes."""
    counts = votes_to_counts(train, keep_time=method.spec.half_life is not None, per_vote=method.style)
    spec = method.spec
    if method.style:
        if train.features is None:
            raise ValueError(f"method {method.name} needs style covariates")
        spec = replace(spec, features=train.features, feature_names=train.feature_names)
    return fit_bt(counts, spec=spec)


def _elo_forecaster(method: MethodSpec, train: Battles) -> tuple[Callable[[Battles], FloatArray], int]:
    names = np.asarray(train.models, dtype=object)
    standings = replay_elo(
        names[train.model_a],
        names[train.model_b],
        train.outcome,
        config=EloConfig(k=method.elo_k),
        models=train.models,
    )
    ratings = standings.rating
    tie_rate = float(np.mean((train.outcome == Outcome.TIE) | (train.outcome == Outcome.BOTHBAD)))

    def forecast(battles: Battles) -> FloatArray:
        p_left = 1.0 / (1.0 + 10.0 ** ((ratings[battles.model_b] - ratings[battles.model_a]) / 400.0))
        return np.column_stack(
            [(1 - tie_rate) * p_left, np.full_like(p_left, tie_rate), (1 - tie_rate) * (1 - p_left)]
        )

    return forecast, len(train.models)


def _raters_forecaster(
    train: Battles, level: float
) -> tuple[Callable[[Battles], FloatArray], int, dict[str, dict[str, float]]]:
    """The rater-ability row: its forecasts, its number of parameters and its fitted extras (position,
    ``nu`` and, for a few annotators, each one's discrimination) with Wald intervals."""
    fit = fit_rater_ability(train, position_sd=RATERS_POSITION_SD)
    described = fit.describe(level=level)
    extras: dict[str, dict[str, float]] = {}
    entries = [(key, described.get(key)) for key in ("position_advantage_elo", "tie_propensity_nu")]
    listed = described["annotators"]
    if isinstance(listed, list) and len(listed) <= MAX_LISTED_ANNOTATORS:
        entries += [
            (f"discrimination:{row['annotator']}", {**row, "value": row["discrimination"]}) for row in listed
        ]
        entries += [(f"position:{row['annotator']}", row.get("position_elo")) for row in listed]
    for key, entry in entries:
        # a parameter without a standard error (too many for the sandwich) is not listed
        if isinstance(entry, dict) and entry.get("ci_low") is not None and entry.get("ci_high") is not None:
            extras[key] = {k: float(entry[k]) for k in ("value", "ci_low", "ci_high")}

    def forecast(battles: Battles) -> FloatArray:
        return rater_ability_proba(fit, battles)

    return forecast, fit.n_params, extras


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class MethodScore:
    """One row of the comparison table; ``parameters_fitted`` maps each fitted extra parameter (position
    advantage and style coefficients in Elo, tie propensity) to its value and sandwich interval.

    ``kind`` is ``batch`` (fitted on the training votes), ``online`` (an online rater replayed over the
    training votes, then frozen) or ``rolling`` (an online rater forecasting each test vote from all the
    votes before it). ``auc`` ranks decisive test votes; ``calibration`` is the table of
    :func:`~leaderboard.evaluation.calibration.calibration_table`; ``calibration_slope`` and ``fitted_scale``
    come from :func:`~leaderboard.evaluation.calibration.fitted_scale` on the test votes; ``vote_losses``
    holds each test vote's log-loss (for paired comparisons; not in :meth:`as_dict`).
    """

    method: str
    log_loss: float
    brier: float
    accuracy: float
    train_loglik: float
    aic: float
    bic: float
    n_params: int
    n_train: int
    n_test: int
    parameters_fitted: dict[str, dict[str, float]] = field(default_factory=dict)
    kind: str = "batch"
    auc: float = math.nan
    calibration_slope: float = math.nan
    fitted_scale: float = math.nan
    calibration: list[dict[str, float]] = field(default_factory=list)
    vote_losses: FloatArray = field(default_factory=lambda: np.zeros(0), compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "kind": self.kind,
            "log_loss": self.log_loss,
            "brier": self.brier,
            "accuracy": self.accuracy,
            "auc": _finite_or_none(self.auc),
            "calibration_slope": _finite_or_none(self.calibration_slope),
            "fitted_scale": _finite_or_none(self.fitted_scale),
            "calibration": [dict(row) for row in self.calibration],
            "train_loglik": self.train_loglik,
            "aic": self.aic,
            "bic": self.bic,
            "n_params": self.n_params,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "parameters_fitted": {k: dict(v) for k, v in self.parameters_fitted.items()},
        }


def drop_unseen(train: Battles, test: Battles) -> Battles:
    """The test votes whose two models both have training votes (the others cannot be forecast)."""
    seen = np.zeros(len(train.models), dtype=bool)
    seen[train.model_a] = True
    seen[train.model_b] = True
    return test.take(np.flatnonzero(seen[test.model_a] & seen[test.model_b]))


def evaluate_methods(
    train: Battles,
    test: Battles,
    *,
    methods: Sequence[MethodSpec] | None = None,
    half_life: float | None = None,
    prior_sd: float = 200.0,
    level: float = 0.95,
    all_methods: bool = False,
) -> list[MethodScore]:
    """Fit every method on ``train`` and score it on ``test``: the model-comparison table.

    Parameters
    ----------
    train, test : Battles
        From :func:`split_battles`; test votes of models unseen in training are dropped.
    methods : sequence of MethodSpec, optional
        Default: :func:`default_methods`, or :func:`every_method` with ``all_methods`` (style rows only
        when ``train.features`` is given).
    half_life : float, optional
        For the time-weighted row; default half the training time span. Without vote times there is no
        time-weighted row.
    prior_sd : float
        Prior standard deviation (Elo) for the row with a prior.
    level : float
        Level of the (sandwich) intervals of the fitted extra parameters.

    Returns
    -------
    list of MethodScore, in the order of ``methods``; a method whose parameters the training votes cannot
    identify (:func:`unidentified`: a tie parameter without ties, a position term without sides) has no row.
    """
    methods = [
        m
        for m in methods_for(
            train, methods=methods, half_life=half_life, prior_sd=prior_sd, all_methods=all_methods
        )
        if unidentified(m, train) is None
    ]
    test = drop_unseen(train, test)
    rows: list[MethodScore] = []
    n_train = len(train)
    for method in methods:
        extras: dict[str, dict[str, float]] = {}
        if method.kind == "elo":
            forecast, n_params = _elo_forecaster(method, train)
        elif method.kind == "raters":
            forecast, n_params, extras = _raters_forecaster(train, level)
        else:
            fit = fit_method(method, train)
            n_params = fit.n_params
            intervals = sandwich_intervals(fit=fit, level=level)
            extras = {
                k: {"value": v, "ci_low": lo, "ci_high": hi} for k, (v, lo, hi) in intervals.extra.items()
            }

            def forecast(battles: Battles, fit: BTFit = fit, style: bool = method.style) -> FloatArray:
                return predict_proba(
                    fit, battles.model_a, battles.model_b, features=battles.features if style else None
                )

        rows.append(
            score_system(
                method.name,
                forecast(test),
                test.outcome,
                train_loglik=forecast_log_likelihood(forecast(train), train.outcome),
                n_params=n_params,
                n_train=n_train,
                kind="online" if method.kind == "elo" else "batch",
                parameters_fitted=extras,
                weight=test.weight,
            )
        )
    return rows
