"""Every rating system on one split: the batch models, the online raters, and which one forecasts best.

The batch rows come from :func:`leaderboard.evaluation.held_out.evaluate_methods`. The online rows are the
raters of :data:`leaderboard.online.table.RATERS`: Elo with a fixed K (4, the live board's), FIDE's and US
Chess's rating rules (:mod:`leaderboard.online.federations`), Glicko-2 and TrueSkill, each with every tie
mode it takes. An online rater is scored
twice when the split is by time: ``online`` replays the training votes and forecasts the test votes with
the states it ends with (train on the past, score the future, as the batch models are), and ``rolling``
forecasts each test vote from every vote before it, test votes included
(:func:`~leaderboard.online.raters.rolling_forecasts`), which is how a live board meets a new vote. All
rows share the same test votes and the same scores (:func:`leaderboard.evaluation.held_out.score_system`).

Ties in the forecasts: raters whose updates do not model ties forecast them with a Davidson ``nu`` (Elo,
Glicko-2) or a draw probability (TrueSkill) set from the training tie rate, so every row is scored on three
outcomes. For online rows AIC and BIC are nominal: the final states scored on the training votes with one
parameter per model; those states are not maximum-likelihood fits.

The verdict (:func:`pick_winner`) names the row with the lowest test log-loss, the runner-up, and the
paired bootstrap interval of their log-loss difference over the test votes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from leaderboard.battles import Battles
from leaderboard.data import Outcome
from leaderboard.evaluation.calibration import paired_bootstrap_difference, vote_log_losses
from leaderboard.evaluation.held_out import MethodScore, drop_unseen, score_system
from leaderboard.evaluation.methods import NO_TIES, methods_for, unidentified
from leaderboard.online.raters import OnlineRater, rolling_forecasts
from leaderboard.online.table import RATERS, HeldOutOptions

__all__ = ["Verdict", "left_out_rows", "online_raters", "online_scores", "pick_winner"]

FloatArray = npt.NDArray[np.float64]

#: Glicko-2 rates the votes in this many periods of equal length over the data's time span.
GLICKO2_PERIODS = 100


def _davidson_nu(tie_rate: float) -> float:
    """The Davidson ``nu`` at which two equal models tie at ``tie_rate``: ``nu / (2 + nu) = tie_rate``."""
    return 2.0 * tie_rate / (1.0 - tie_rate)


def online_raters(*, tie_rate: float, period_length: float = 1.0) -> dict[str, OnlineRater[Any]]:
    """The online raters compared, by row name (``variant/ties``): every variant of every rater of
    :data:`~leaderboard.online.table.RATERS`, in each of its tie modes, in the table's order.

    Parameters
    ----------
    tie_rate : float
        Share of ties among the training votes: sets the tie model of the forecasts. Without ties there
        are no ``davidson`` rows.
    period_length : float
        Glicko-2's rating period, in the units of the vote times.

    Returns
    -------
    dict of name to rater
    """
    nu = _davidson_nu(min(tie_rate, 0.99))
    draw = min(tie_rate, 0.99)
    raters: dict[str, OnlineRater[Any]] = {}
    for entry in RATERS.values():
        for variant, make in entry.held_out.items():
            for ties in [t for t in entry.modes_of(variant) if tie_rate > 0 or t != "davidson"]:
                options = HeldOutOptions(ties=ties, nu=nu, draw_probability=draw, period_length=period_length)
                raters[f"{variant}/{ties}"] = make(options)
    return raters


def left_out_rows(
    train: Battles, *, half_life: float | None = None, prior_sd: float = 200.0, all_methods: bool = True
) -> dict[str, str]:
    """The rows of the table the training votes cannot identify, each with the reason: batch methods with a
    tie parameter or a position term the votes say nothing about
    (:func:`~leaderboard.evaluation.methods.unidentified`), and the online raters' Davidson rows when no
    training vote is a tie (:func:`online_raters` has none then)."""
    out: dict[str, str] = {}
    for method in methods_for(train, half_life=half_life, prior_sd=prior_sd, all_methods=all_methods):
        why = unidentified(method, train)
        if why is not None:
            out[method.name] = why
    if _tie_rate(train) == 0:
        with_ties = online_raters(tie_rate=0.5)
        out |= {name: NO_TIES for name in with_ties if name not in online_raters(tie_rate=0.0)}
    return out


def _tie_rate(battles: Battles) -> float:
    tied = (battles.outcome == Outcome.TIE) | (battles.outcome == Outcome.BOTHBAD)
    return float(np.mean(tied)) if len(battles) else 0.0


def _frozen_forecasts(
    rater: OnlineRater[Any], states: Sequence[Any], test: Battles, when: FloatArray
) -> FloatArray:
    out = np.empty((len(test), 3))
    for t, (i, j, at) in enumerate(
        zip(test.model_a.tolist(), test.model_b.tolist(), when.tolist(), strict=True)
    ):
        out[t] = rater.expected(rater.advance(states[i], at), rater.advance(states[j], at))
    return out


def online_scores(
    train: Battles,
    test: Battles,
    *,
    rolling: bool,
    raters: dict[str, OnlineRater[Any]] | None = None,
    n_periods: int = GLICKO2_PERIODS,
) -> list[MethodScore]:
    """Score every online rater on ``test`` after replaying ``train`` (and, with ``rolling``, vote by
    vote through the test votes too).

    Parameters
    ----------
    train, test : Battles
        From :func:`~leaderboard.evaluation.held_out.split_battles`; both are replayed in order of their
        times. Without times the training votes come first, then the test votes, each in arrival order.
    rolling : bool
        Add a ``rolling`` row per rater (meaningful on a time split: the test votes come after).
    raters : dict, optional
        Default :func:`online_raters` with the training tie rate and ``n_periods`` Glicko-2 periods over
        the time span of the votes.
    n_periods : int

    Returns
    -------
    list of MethodScore
        ``online`` rows (and ``rolling`` rows, named ``name (rolling)``), in the order of ``raters``.
    """
    test = drop_unseen(train, test)
    has_times = train.time is not None and test.time is not None
    if not has_times:
        # arrival order only: the training votes, then the test votes (each set in its own order)
        train = replace(train, time=np.arange(len(train), dtype=np.float64))
        test = replace(test, time=len(train) + np.arange(len(test), dtype=np.float64))
    order = np.argsort(train.times(), kind="stable")
    train = train.take(order)
    t_train = train.times()
    t_test = test.times()
    stamps = np.concatenate([t_train, t_test])
    span = float(np.ptp(stamps)) if stamps.size else 0.0
    period = span / n_periods if span > 0 else 1.0
    if raters is None:
        raters = online_raters(tie_rate=_tie_rate(train), period_length=period)
    n = len(train.models)
    end = float(t_train[-1]) if t_train.size else 0.0
    # frozen states are read after the last training period has closed (and no earlier than the vote,
    # when there is a clock: arrival order is none, so no idle periods widen the deviations then)
    when = np.maximum(t_test, end + period) if has_times else np.full(len(test), end + period)
    together = _concatenate(train, test)
    order_all = np.argsort(together.times(), kind="stable")
    test_rows = np.flatnonzero(order_all >= len(train))  # positions of the test votes in the stream
    test_index = order_all[test_rows] - len(train)  # and which test vote each one is
    rows: list[MethodScore] = []
    for name, rater in raters.items():
        states = rater.replay(train.model_a, train.model_b, train.outcome, n_models=n, times=t_train)
        final_on_train = _frozen_forecasts(rater, states, train, np.full(len(train), end + period))
        train_loglik = -float(np.sum(vote_log_losses(final_on_train, train.outcome, floor=1e-300)))
        rows.append(
            score_system(
                name,
                _frozen_forecasts(rater, states, test, when),
                test.outcome,
                kind="online",
                train_loglik=train_loglik,
                n_params=n,
                n_train=len(train),
                weight=test.weight,
            )
        )
        if rolling:
            stream = together.take(order_all)
            proba = rolling_forecasts(
                rater, stream.model_a, stream.model_b, stream.outcome, n_models=n, times=stream.times()
            )
            in_test_order = np.empty((len(test), 3))
            in_test_order[test_index] = proba[test_rows]
            rows.append(
                score_system(
                    f"{name} (rolling)",
                    in_test_order,
                    test.outcome,
                    kind="rolling",
                    train_loglik=train_loglik,
                    n_params=n,
                    n_train=len(train),
                    weight=test.weight,
                )
            )
    return rows


def _concatenate(first: Battles, second: Battles) -> Battles:
    return Battles(
        models=first.models,
        model_a=np.concatenate([first.model_a, second.model_a]),
        model_b=np.concatenate([first.model_b, second.model_b]),
        outcome=np.concatenate([first.outcome, second.outcome]),
        time=np.concatenate([first.times(), second.times()]),
    )


#: What the verdict's choice rests on, in its JSON: the test votes it is scored on.
SELECTED_ON = (
    "the test votes: the winner is the row with the lowest log-loss on them, so its own log-loss is the "
    "minimum of many on the same votes (optimistic for new ones) and the intervals do not account for the "
    "choice"
)


@dataclass(frozen=True)
class Verdict:
    """Which row forecasts the test votes best, and by how much.

    ``difference`` is the runner-up's mean test log-loss minus the winner's (per vote, nats), with a
    paired bootstrap percentile interval ``[ci_low, ci_high]`` at ``level`` over the test votes.
    ``margins`` gives the same (difference, low, high) for the best row of every kind (``batch``,
    ``online``, ``rolling``) other than the winner: by how much the winner beats the best system of
    another family, when the runner-up is a near twin of the winner. The winner is selected on the same
    test votes it is scored on (:data:`SELECTED_ON`, in :meth:`as_dict`).
    """

    winner: str
    runner_up: str
    winner_log_loss: float
    runner_up_log_loss: float
    difference: float
    ci_low: float
    ci_high: float
    level: float
    n_test: int
    margins: dict[str, tuple[float, float, float]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "winner": self.winner,
            "runner_up": self.runner_up,
            "winner_log_loss": self.winner_log_loss,
            "runner_up_log_loss": self.runner_up_log_loss,
            "log_loss_difference": self.difference,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "level": self.level,
            "n_test": self.n_test,
            "selected_on": SELECTED_ON,
            "margins": {
                name: {"log_loss_difference": d, "ci_low": lo, "ci_high": hi}
                for name, (d, lo, hi) in self.margins.items()
            },
        }


def pick_winner(
    rows: Sequence[MethodScore],
    *,
    n_rounds: int = 2000,
    level: float = 0.95,
    random_state: int = 0,
    groups: npt.NDArray[np.int64] | None = None,
) -> Verdict:
    """The row with the lowest test log-loss, the runner-up, and a paired bootstrap interval on the
    difference of their log-losses (resampling test votes, or with ``groups``, one cluster id per test
    vote, whole clusters: see :func:`~leaderboard.evaluation.calibration.paired_bootstrap_difference`).

    Only rows scored on the most common test set take part (style rows fitted on fewer votes do not).

    Raises
    ------
    ValueError
        With fewer than two comparable rows.
    """
    sizes = [r.vote_losses.size for r in rows]
    common = max(set(sizes), key=sizes.count) if sizes else 0
    eligible = sorted((r for r in rows if r.vote_losses.size == common and common), key=lambda r: r.log_loss)
    if len(eligible) < 2:
        raise ValueError("need at least two systems scored on the same test votes")
    best, second = eligible[0], eligible[1]
    if groups is not None and groups.size != common:
        raise ValueError(f"{groups.size} cluster ids for {common} test votes")

    def margin(other: MethodScore) -> tuple[float, float, float]:
        return paired_bootstrap_difference(
            best.vote_losses,
            other.vote_losses,
            n_rounds=n_rounds,
            level=level,
            random_state=random_state,
            groups=groups,
        )

    diff, low, high = margin(second)
    margins: dict[str, tuple[float, float, float]] = {}
    for kind in ("batch", "online", "rolling"):
        first = next((r for r in eligible[1:] if r.kind == kind), None)
        if first is not None:
            margins[first.method] = margin(first)
    return Verdict(
        winner=best.method,
        runner_up=second.method,
        winner_log_loss=best.log_loss,
        runner_up_log_loss=second.log_loss,
        difference=diff,
        ci_low=low,
        ci_high=high,
        level=level,
        n_test=common,
        margins=margins,
    )
