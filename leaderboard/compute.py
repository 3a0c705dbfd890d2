"""One entry point for the CLI, snapshots and the web: counts in, a filled :class:`Leaderboard` out.

Methods are registered by name (``register_method``), so variants (position bias, Davidson ties, ...)
plug in without touching :func:`compute_leaderboard`. A method returns the point ratings and, when asked,
intervals and the per-round ratings of its bootstrap; ranks, rank intervals, the rank upper bound,
battles and win rates are filled in here the same way for every method.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from leaderboard.bootstrap import (
    Progress,
    bootstrap_ratings,
    rank_intervals,
    rank_upper_bound,
    ranks_of,
    sandwich_intervals,
)
from leaderboard.bt import fit_bt
from leaderboard.data import PairCounts
from leaderboard.matrices import model_totals
from leaderboard.result import Leaderboard

__all__ = [
    "INTERVALS",
    "MethodOutput",
    "MethodRequest",
    "available_methods",
    "compute_leaderboard",
    "register_method",
]

FloatArray = npt.NDArray[np.float64]
INTERVALS = ("bootstrap", "sandwich", "none")


@dataclass(frozen=True)
class MethodRequest:
    """What :func:`compute_leaderboard` asks of a method."""

    interval: str
    n_rounds: int
    level: float
    anchor: tuple[str, float] | None
    random_state: int
    progress: Progress | None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MethodOutput:
    """What a method hands back; intervals may be ``None`` when ``interval == "none"``.

    ``rounds`` holds per-round ratings (n_rounds x M) of a bootstrap, for rank intervals.
    """

    rating: FloatArray
    ci_low: FloatArray | None = None
    ci_high: FloatArray | None = None
    rounds: FloatArray | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    parameters_fitted: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


MethodFn = Callable[[PairCounts, MethodRequest], MethodOutput]
_METHODS: dict[str, MethodFn] = {}


def register_method(name: str, fn: MethodFn, *, replace: bool = False) -> None:
    """Make ``fn`` available as ``compute_leaderboard(counts, method=name)``."""
    if name in _METHODS and not replace:
        raise ValueError(f"method {name!r} is already registered")
    _METHODS[name] = fn


# Modules that register methods when imported; loaded on first lookup so that importing this module
# (and the web app's vote path) stays cheap.
_BUILTIN_METHOD_MODULES = ("leaderboard.extended",)


def _load_builtin_methods() -> None:
    for module in _BUILTIN_METHOD_MODULES:
        importlib.import_module(module)


def available_methods() -> tuple[str, ...]:
    _load_builtin_methods()
    return tuple(sorted(_METHODS))


def _plain_bt(counts: PairCounts, request: MethodRequest) -> MethodOutput:
    options = dict(request.options)
    unknown = set(options) - {"scale", "base", "initial", "n_jobs"}
    if unknown:
        raise ValueError(f"method 'bt' does not take options {sorted(unknown)}")
    n_jobs = options.pop("n_jobs", None)
    fit = fit_bt(counts, anchor=request.anchor, **options)
    params: dict[str, Any] = {
        "solver": fit.solver,
        "scale": fit.scale,
        "base": fit.base,
        "initial": fit.initial,
    }
    if fit.unbounded:
        params["unbounded_models"] = list(fit.unbounded)
        params["ridge"] = fit.ridge
    if request.interval == "bootstrap":
        boot = bootstrap_ratings(
            counts,
            fit=fit,
            n_rounds=request.n_rounds,
            level=request.level,
            random_state=request.random_state,
            progress=request.progress,
            n_jobs=n_jobs,
        )
        params["degenerate_rounds"] = boot.n_degenerate
        return MethodOutput(fit.rating, boot.ci_low, boot.ci_high, boot.ratings, params)
    if request.interval == "sandwich":
        sw = sandwich_intervals(fit=fit, level=request.level)
        return MethodOutput(fit.rating, sw.ci_low, sw.ci_high, None, params)
    return MethodOutput(fit.rating, parameters=params)


register_method("bt", _plain_bt)


def compute_leaderboard(
    counts: PairCounts,
    *,
    method: str = "bt",
    n_rounds: int = 1000,
    level: float = 0.95,
    interval: str = "bootstrap",
    anchor: tuple[str, float] | None = None,
    random_state: int = 0,
    progress: Progress | None = None,
    **options: Any,
) -> Leaderboard:
    """Fit ``method`` on ``counts`` and return a complete :class:`Leaderboard`.

    Parameters
    ----------
    counts : PairCounts
    method : str
        A registered method (see :func:`available_methods`); ``"bt"`` is plain Bradley-Terry.
    n_rounds, level, random_state, progress :
        Bootstrap rounds, interval level, seed and progress callback ``(done, total)``.
    interval : ``"bootstrap"``, ``"sandwich"`` or ``"none"``
        ``"none"`` gives intervals equal to the rating and ranks from ratings alone.
    anchor : (model, rating), optional
    **options :
        Passed to the method.

    Returns
    -------
    Leaderboard
        ``rank_low``/``rank_high`` from the bootstrap rounds when there are any, else from the
        intervals (best: 1 + models whose lower bound beats this upper bound; worst: models whose
        upper bound reaches this lower bound).
    """
    if interval not in INTERVALS:
        raise ValueError(f"interval must be one of {INTERVALS}")
    if method not in _METHODS:
        _load_builtin_methods()
    if method not in _METHODS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(available_methods())}")
    request = MethodRequest(interval, n_rounds, level, anchor, random_state, progress, dict(options))
    out = _METHODS[method](counts, request)
    rating = np.asarray(out.rating, dtype=np.float64)
    low = rating.copy() if out.ci_low is None else np.asarray(out.ci_low, dtype=np.float64)
    high = rating.copy() if out.ci_high is None else np.asarray(out.ci_high, dtype=np.float64)
    rank = ranks_of(rating)[0]
    rank_ub = rank_upper_bound(low, high)
    if out.rounds is not None:
        rank_low, rank_high = rank_intervals(ranks_of(np.asarray(out.rounds)), level)
    else:
        rank_low = rank_ub
        rank_high = (high[None, :] >= low[:, None]).sum(axis=1).astype(np.int64)
    battles, win_rate = model_totals(counts)
    parameters: dict[str, Any] = {
        "level": level,
        "interval": interval,
        "n_rounds": n_rounds if interval == "bootstrap" else 0,
        "random_state": random_state,
        "anchor": None if anchor is None else [anchor[0], float(anchor[1])],
        **{k: v for k, v in options.items() if isinstance(v, (int, float, str, bool))},
        **dict(out.parameters),
    }
    return Leaderboard(
        models=counts.models,
        rating=rating,
        ci_low=low,
        ci_high=high,
        rank=rank,
        rank_low=rank_low,
        rank_high=rank_high,
        rank_ub=rank_ub,
        battles=battles,
        win_rate=win_rate,
        method=method,
        parameters=parameters,
        parameters_fitted={k: dict(v) for k, v in out.parameters_fitted.items()},
        interval=interval,
        n_votes=counts.n_votes,
    )
