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

from leaderboard.bt import BTFit, fit_bt, predict_proba
from leaderboard.data import Outcome, PairCounts, aggregate_codes
from leaderboard.elo import EloConfig, replay_elo
from leaderboard.intervals import sandwich_intervals
from leaderboard.spec import BTSpec

__all__ = [
    "DEFAULT_METHODS",
    "Battles",
    "MethodScore",
    "MethodSpec",
    "evaluate_methods",
    "score_forecasts",
    "simulate_battles",
    "split_battles",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Rating points per natural-log unit of strength on the Elo scale (``400 / ln 10``).
_ELO_PER_NAT = 400.0 / math.log(10.0)
#: Column order of forecasts: left wins, tie, right wins.
_COLUMN = {int(Outcome.MODEL_A): 0, int(Outcome.TIE): 1, int(Outcome.MODEL_B): 2, int(Outcome.BOTHBAD): 1}


@dataclass(frozen=True)
class Battles:
    """One row per vote, in arrival order.

    ``outcome`` holds :class:`~leaderboard.data.Outcome` codes; ``time`` (seconds, or any increasing
    number) is optional; ``features`` are per-vote style covariates (left minus right, see
    :mod:`leaderboard.style`), optional.
    """

    models: tuple[str, ...]
    left: IntArray
    right: IntArray
    outcome: IntArray
    time: FloatArray | None = None
    features: FloatArray | None = None
    feature_names: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(self.left.shape[0])

    def take(self, index: IntArray) -> Battles:
        return replace(
            self,
            left=self.left[index],
            right=self.right[index],
            outcome=self.outcome[index],
            time=None if self.time is None else self.time[index],
            features=None if self.features is None else self.features[index],
        )

    def times(self) -> FloatArray:
        """Vote times, or the arrival order when no time was recorded."""
        if self.time is not None:
            return self.time
        order: FloatArray = np.arange(len(self), dtype=np.float64)
        return order


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


def score_forecasts(proba: FloatArray, outcome: IntArray) -> dict[str, float]:
    """Log-loss, three-class Brier score and decisive-vote accuracy of forecasts ``[left, tie, right]``.

    Both-bad votes count as ties. Accuracy is over decisive votes only: was the side given the higher
    win probability the winner?
    """
    column = np.array([_COLUMN[int(o)] for o in range(4)])[outcome]
    rows = np.arange(outcome.shape[0])
    p_true = np.clip(proba[rows, column], 1e-15, 1.0)
    onehot = np.zeros_like(proba)
    onehot[rows, column] = 1.0
    decisive = column != 1
    correct = (proba[:, 0] > proba[:, 2]) == (column == 0)
    return {
        "log_loss": float(-np.mean(np.log(p_true))),
        "brier": float(np.mean(np.sum((proba - onehot) ** 2, axis=1))),
        "accuracy": float(np.mean(correct[decisive])) if decisive.any() else math.nan,
    }


def _loglik(proba: FloatArray, outcome: IntArray) -> float:
    column = np.array([_COLUMN[int(o)] for o in range(4)])[outcome]
    return float(np.sum(np.log(np.clip(proba[np.arange(outcome.shape[0]), column], 1e-300, 1.0))))


# ----------------------------------------------------------------------------------------------------------
# Methods


@dataclass(frozen=True)
class MethodSpec:
    """A row of the comparison table: a name and how to fit it.

    ``kind`` is ``bt`` (a :class:`~leaderboard.spec.BTSpec` fit) or ``elo`` (online Elo replayed over the
    training votes in order). ``style`` fits use the per-vote covariates; ``time`` fits weight votes by age.
    """

    name: str
    kind: Literal["bt", "elo"] = "bt"
    spec: BTSpec = field(default_factory=BTSpec)
    style: bool = False
    elo_k: float = 4.0


def default_methods(*, half_life: float | None, prior_sd: float, style: bool) -> list[MethodSpec]:
    """The table of issue 6: online Elo, BT, BT + position, Davidson (+ position), time weights, prior,
    style control (when covariates are available)."""
    methods = [
        MethodSpec("elo", kind="elo"),
        MethodSpec("bt"),
        MethodSpec("bt-position", spec=BTSpec(position="common")),
        MethodSpec("davidson", spec=BTSpec(ties="davidson")),
        MethodSpec("davidson-position", spec=BTSpec(position="common", ties="davidson")),
        MethodSpec(
            "davidson-position+time",
            spec=BTSpec(position="common", ties="davidson", half_life=half_life or 1.0),
        ),
        MethodSpec(
            "davidson-position+prior", spec=BTSpec(position="common", ties="davidson", prior_sd=prior_sd)
        ),
    ]
    if half_life is None:
        methods = [m for m in methods if m.spec.half_life is None]
    if style:
        methods.append(MethodSpec("bt-position+style", spec=BTSpec(position="common"), style=True))
        methods.append(
            MethodSpec("davidson-position+style", spec=BTSpec(position="common", ties="davidson"), style=True)
        )
    return methods


DEFAULT_METHODS: tuple[str, ...] = tuple(
    m.name for m in default_methods(half_life=1.0, prior_sd=200.0, style=True)
)


def votes_to_counts(battles: Battles, *, keep_time: bool, per_vote: bool) -> PairCounts:
    """Aggregate votes into cells: by (left, right, outcome), plus time when time weights need it, or one
    cell per vote when per-vote covariates need it."""
    if per_vote:
        return PairCounts(
            models=battles.models,
            model_a=battles.left.astype(np.int64),
            model_b=battles.right.astype(np.int64),
            outcome=battles.outcome.astype(np.int8),
            count=np.ones(len(battles)),
            time=battles.times().astype(np.float64) if keep_time else None,
        )
    if not keep_time:
        return aggregate_codes(battles.left, battles.right, battles.outcome, models=battles.models)
    keys = np.column_stack([battles.left, battles.right, battles.outcome, battles.times()])
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    return PairCounts(
        models=battles.models,
        model_a=unique[:, 0].astype(np.int64),
        model_b=unique[:, 1].astype(np.int64),
        outcome=unique[:, 2].astype(np.int8),
        count=np.bincount(inverse.ravel(), minlength=unique.shape[0]).astype(np.float64),
        time=unique[:, 3].astype(np.float64),
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
        names[train.left],
        names[train.right],
        train.outcome,
        config=EloConfig(k=method.elo_k),
        models=train.models,
    )
    ratings = standings.rating
    tie_rate = float(np.mean((train.outcome == Outcome.TIE) | (train.outcome == Outcome.BOTHBAD)))

    def forecast(battles: Battles) -> FloatArray:
        p_left = 1.0 / (1.0 + 10.0 ** ((ratings[battles.right] - ratings[battles.left]) / 400.0))
        return np.column_stack(
            [(1 - tie_rate) * p_left, np.full_like(p_left, tie_rate), (1 - tie_rate) * (1 - p_left)]
        )

    return forecast, len(train.models)


@dataclass(frozen=True)
class MethodScore:
    """One row of the comparison table; ``parameters_fitted`` maps each fitted extra parameter (position
    advantage and style coefficients in Elo, tie propensity) to its value and sandwich interval."""

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

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "log_loss": self.log_loss,
            "brier": self.brier,
            "accuracy": self.accuracy,
            "train_loglik": self.train_loglik,
            "aic": self.aic,
            "bic": self.bic,
            "n_params": self.n_params,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "parameters_fitted": {k: dict(v) for k, v in self.parameters_fitted.items()},
        }


def evaluate_methods(
    train: Battles,
    test: Battles,
    *,
    methods: Sequence[MethodSpec] | None = None,
    half_life: float | None = None,
    prior_sd: float = 200.0,
    level: float = 0.95,
) -> list[MethodScore]:
    """Fit every method on ``train`` and score it on ``test``: the model-comparison table.

    Parameters
    ----------
    train, test : Battles
        From :func:`split_battles`; test votes of models unseen in training are dropped.
    methods : sequence of MethodSpec, optional
        Default: :func:`default_methods` (style rows only when ``train.features`` is given).
    half_life : float, optional
        For the time-weighted row; default half the training time span. Without vote times there is no
        time-weighted row.
    prior_sd : float
        Prior standard deviation (Elo) for the row with a prior.
    level : float
        Level of the (sandwich) intervals of the fitted extra parameters.

    Returns
    -------
    list of MethodScore, in the order of ``methods``
    """
    if train.time is None:
        half_life = None  # no timestamps: arrival order is no clock to weight votes by
    elif half_life is None and len(train) > 1:
        span = float(np.ptp(train.times()))
        half_life = span / 2 if span > 0 else None
    if methods is None:
        methods = default_methods(half_life=half_life, prior_sd=prior_sd, style=train.features is not None)
    seen = np.zeros(len(train.models), dtype=bool)
    seen[train.left] = True
    seen[train.right] = True
    test = test.take(np.flatnonzero(seen[test.left] & seen[test.right]))
    rows: list[MethodScore] = []
    n_train = len(train)
    for method in methods:
        extras: dict[str, dict[str, float]] = {}
        if method.kind == "elo":
            forecast, n_params = _elo_forecaster(method, train)
        else:
            fit = fit_method(method, train)
            n_params = fit.n_params
            intervals = sandwich_intervals(fit=fit, level=level)
            extras = {
                k: {"value": v, "ci_low": lo, "ci_high": hi} for k, (v, lo, hi) in intervals.extra.items()
            }

            def forecast(battles: Battles, fit: BTFit = fit, style: bool = method.style) -> FloatArray:
                return predict_proba(
                    fit, battles.left, battles.right, features=battles.features if style else None
                )

        ll = _loglik(forecast(train), train.outcome)
        scores = score_forecasts(forecast(test), test.outcome)
        rows.append(
            MethodScore(
                method=method.name,
                log_loss=scores["log_loss"],
                brier=scores["brier"],
                accuracy=scores["accuracy"],
                train_loglik=ll,
                aic=2 * n_params - 2 * ll,
                bic=n_params * math.log(n_train) - 2 * ll,
                n_params=n_params,
                n_train=n_train,
                n_test=len(test),
                parameters_fitted=extras,
            )
        )
    return rows


# ----------------------------------------------------------------------------------------------------------
# Simulation


def simulate_battles(
    n_votes: int,
    ratings: FloatArray,
    *,
    position_elo: float = 0.0,
    nu: float = 0.0,
    change_at: float | None = None,
    ratings_after: FloatArray | None = None,
    style_elo: FloatArray | None = None,
    n_features: int = 0,
    random_state: int | np.random.Generator | None = None,
) -> Battles:
    """Simulate votes from the Davidson model with a left advantage, optional style effects and a change.

    Parameters
    ----------
    n_votes : int
    ratings : array (Elo)
        True ratings; pairs are drawn uniformly, sides at random.
    position_elo : left-side advantage (Elo)
    nu : Davidson tie propensity (0 for no ties)
    change_at, ratings_after : optional
        From time ``change_at`` (times are uniform on [0, 1)) the true ratings are ``ratings_after``
        (models that were updated).
    style_elo : array (n_features,), optional
        True style coefficients (Elo per unit covariate); covariates are standard normal.
    random_state : seed
    """
    rng = np.random.default_rng(random_state)
    n = ratings.shape[0]
    left = rng.integers(0, n, n_votes)
    right = (left + rng.integers(1, n, n_votes)) % n
    time = np.sort(rng.random(n_votes))
    r = np.tile(np.asarray(ratings, dtype=np.float64), (n_votes, 1))
    if change_at is not None and ratings_after is not None:
        r[time >= change_at] = ratings_after
    u = (r[np.arange(n_votes), left] - r[np.arange(n_votes), right] + position_elo) / _ELO_PER_NAT
    features = None
    if n_features:
        features = rng.standard_normal((n_votes, n_features))
        if style_elo is not None:
            u = u + features @ (np.asarray(style_elo) / _ELO_PER_NAT)
    h = u / 2
    denom = np.exp(h) + np.exp(-h) + nu
    p_left, p_tie = np.exp(h) / denom, nu / denom
    draw = rng.random(n_votes)
    outcome = np.where(
        draw < p_left,
        int(Outcome.MODEL_A),
        np.where(draw < p_left + p_tie, int(Outcome.TIE), int(Outcome.MODEL_B)),
    )
    return Battles(
        models=tuple(f"model-{i:02d}" for i in range(n)),
        left=left.astype(np.int64),
        right=right.astype(np.int64),
        outcome=outcome.astype(np.int64),
        time=time,
        features=features,
        feature_names=tuple(f"x{k}" for k in range(n_features)),
    )
