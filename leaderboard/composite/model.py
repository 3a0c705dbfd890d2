"""The composite model's terms: its options, the votes it fits (each with its source) and the fitted form.

One rating scale for human votes and LLM-judge verdicts. Every vote carries its source, and each source
``s`` has a discrimination ``a_s`` (the human pool, source 0, fixed at 1, so the ratings stay on the
human scale), its own left-side advantage ``pos_s`` and Davidson tie parameter ``nu_s``, for a judge a
self-preference ``sp_s`` for the models of its own family and its own view of each model (a deviation
``delta_sm`` from the human rating, a normal random effect ``N(0, tau_s^2)``). The linear predictor is
``eta = a_s * (theta_a + delta_sa - theta_b - delta_sb + pos_s * sided + sp_s * (f_a - f_b))``, with
position, self-preference and deviations in rating units. :mod:`leaderboard.composite.fit` fits it; this
module holds what goes in and what comes out, so the readers of votes and the boards need nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["CompositeData", "CompositeFit", "CompositeOptions", "confounded_positions"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class CompositeOptions:
    """Which per-source terms the composite fit learns (all on by default), and their weak priors.

    A source's terms can have no finite maximum: a judge that picks the left answer on both orders of
    every battle makes "left wins" certain, and the likelihood keeps rising as its position and its
    discrimination grow, so where the fit stops is the optimiser's tolerance and path (a position of
    440 Elo at a discrimination of 36 in the test: a left advantage of 90 natural-log units on the
    judge's own votes). Zero-mean normal priors give the fit a unique finite optimum:
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
        from scipy.stats import norm  # scipy.stats: kept off the web worker's start-up

        z = float(norm.ppf(0.5 + level / 2))
        return self.rating - z * self.rating_se, self.rating + z * self.rating_se


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
