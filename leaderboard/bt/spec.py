"""The Bradley-Terry model family: what a fit is asked for (:class:`BTSpec`), the graph check, the errors.

Every rating method is one point of this family. A spec says whether the left side has an advantage
(none, one common to all models, or one per model), whether ties get their own parameter (Davidson,
1970) or count as half a win each, how votes are weighted by age, whether a Gaussian prior shrinks the
ratings, which style covariates enter the linear predictor, and which link turns the predictor into
probabilities (logistic: Bradley-Terry; normal: Thurstone-Mosteller, with Glenn-David ties).
:func:`leaderboard.bt.fit.fit_bt` fits any of them; the plain spec (``BTSpec()``) takes the fast path there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from leaderboard.data import PairStats

__all__ = [
    "BTSpec",
    "DisconnectedComparisonError",
    "NonConvergenceError",
    "UnboundedRatingWarning",
    "check_comparison_graph",
]

Position = Literal["none", "common", "per-model"]
Ties = Literal["none", "davidson", "glenn-david"]
Link = Literal["logit", "probit"]
BothBad = Literal["tie", "exclude"]


class DisconnectedComparisonError(ValueError):
    """The comparison graph falls into parts never compared with each other: no common scale exists."""


class NonConvergenceError(RuntimeError):
    """The optimiser stopped before the optimum (or the optimum lies at infinity); nothing is returned."""


class UnboundedRatingWarning(UserWarning):
    """Some models only won or only lost (against a part of the field): their MLE is infinite.

    The fit then adds a small ridge penalty so the numbers stay finite; those ratings are not MLEs.
    """


@dataclass(frozen=True)
class BTSpec:
    """Which member of the Bradley-Terry family to fit.

    Attributes
    ----------
    position : ``none``, ``common`` (one left-side advantage) or ``per-model`` (one per left model)
    ties : ``none`` (a tie scores half a win for each side), ``davidson`` (a tie parameter, logit link)
        or ``glenn-david`` (a tie threshold on the latent difference, probit link)
    half_life : time-decay half-life in the units of ``PairCounts.time``: a vote weighs
        ``0.5 ** ((now - time) / half_life)``; None for equal weights
    now : reference time of the decay; the latest cell's time when None
    prior_sd : standard deviation, in rating points, of a Gaussian prior on the ratings around their
        mean (smaller shrinks more); None for none
    both_bad : count ``tie (bothbad)`` votes as ties, or leave them out
    nu_fixed : with a tie parameter, hold it (Davidson's ``nu`` or Glenn-David's ``tau``) at this value
        instead of fitting it
    features : style covariates (left minus right), one row per cell of the counts; None for none
    feature_names : names of the covariate columns
    link : ``logit`` (Bradley-Terry) or ``probit`` (Thurstone-Mosteller, :mod:`leaderboard.bt.probit`)
    """

    position: Position = "none"
    ties: Ties = "none"
    half_life: float | None = None
    now: float | None = None
    prior_sd: float | None = None
    both_bad: BothBad = "tie"
    nu_fixed: float | None = None
    features: npt.NDArray[np.float64] | None = field(default=None, compare=False, repr=False)
    feature_names: tuple[str, ...] = ()
    link: Link = "logit"

    def __post_init__(self) -> None:
        if self.position not in ("none", "common", "per-model"):
            raise ValueError(f"unknown position option {self.position!r}")
        if self.ties not in ("none", "davidson", "glenn-david"):
            raise ValueError(f"unknown ties option {self.ties!r}")
        if self.link not in ("logit", "probit"):
            raise ValueError(f"unknown link {self.link!r}")
        if (self.ties == "davidson" and self.link != "logit") or (
            self.ties == "glenn-david" and self.link != "probit"
        ):
            raise ValueError("Davidson ties go with the logit link, Glenn-David ties with the probit link")
        if self.both_bad not in ("tie", "exclude"):
            raise ValueError(f"unknown both_bad option {self.both_bad!r}")
        if self.prior_sd is not None and not self.prior_sd > 0:
            raise ValueError("prior_sd must be positive")
        if self.half_life is not None and not self.half_life > 0:
            raise ValueError("half_life must be positive")
        if self.nu_fixed is not None and (self.ties == "none" or not self.nu_fixed > 0):
            raise ValueError("nu_fixed needs a tie parameter (davidson or glenn-david) and a positive value")
        if self.features is not None and np.ndim(self.features) != 2:
            raise ValueError("features must be a two-dimensional array (cells x covariates)")

    @property
    def n_features(self) -> int:
        return 0 if self.features is None else int(np.shape(self.features)[1])

    @property
    def has_tie_parameter(self) -> bool:
        """Ties have their own parameter (Davidson's ``nu`` or Glenn-David's ``tau``)."""
        return self.ties != "none"

    @property
    def is_plain(self) -> bool:
        """Plain Bradley-Terry on pair statistics: the scikit-learn + Newton fast path applies."""
        return (
            self.link == "logit"
            and self.position == "none"
            and self.ties == "none"
            and self.half_life is None
            and self.prior_sd is None
            and self.both_bad == "tie"
            and self.features is None
        )


def check_comparison_graph(
    stats: PairStats, models: tuple[str, ...], *, with_prior: bool = False
) -> tuple[str, ...]:
    """Raise if the models cannot be put on one scale; name the models whose MLE is infinite.

    Parameters
    ----------
    stats : PairStats
    models : tuple of str
    with_prior : bool
        The fit has a Gaussian prior, which gives every model a finite rating on one scale as long as
        it has battles at all: only models without battles are an error then, and none is unbounded.

    Raises
    ------
    DisconnectedComparisonError
        If a model has no battles or the models fall into groups never compared with each other.

    Returns
    -------
    tuple of str
        Models in a part of the field that only won or only lost against the rest (empty when the
        "beats or ties" graph is strongly connected, the condition for a finite MLE; Zermelo 1929,
        Ford 1957).
    """
    m = stats.n_models
    if m < 2:
        raise DisconnectedComparisonError("need at least two models")
    battles = np.bincount(stats.lo, weights=stats.n, minlength=m) + np.bincount(
        stats.hi, weights=stats.n, minlength=m
    )
    idle = [models[i] for i in np.flatnonzero(battles <= 0)]
    if idle:
        raise DisconnectedComparisonError(f"models without any battle: {', '.join(idle)}")
    if with_prior:
        return ()
    keep = stats.n > 0
    graph = sp.csr_matrix((np.ones(int(keep.sum())), (stats.lo[keep], stats.hi[keep])), shape=(m, m))
    n_parts, labels = connected_components(graph, directed=False)
    if n_parts > 1:
        groups = [[models[i] for i in np.flatnonzero(labels == k)] for k in range(n_parts)]
        shown = "; ".join("{" + ", ".join(g[:5]) + (", ..." if len(g) > 5 else "") + "}" for g in groups[:5])
        raise DisconnectedComparisonError(
            f"the comparison graph has {n_parts} parts never compared with each other: {shown}"
        )
    score_lo = stats.score_lo
    score_hi = stats.n - score_lo
    src = np.concatenate([stats.lo[score_lo > 0], stats.hi[score_hi > 0]])
    dst = np.concatenate([stats.hi[score_lo > 0], stats.lo[score_hi > 0]])
    beats = sp.csr_matrix((np.ones(len(src)), (src, dst)), shape=(m, m))
    n_strong, strong = connected_components(beats, directed=True, connection="strong")
    if n_strong == 1:
        return ()
    # components that are not the largest one are pushed to +/- infinity relative to it
    sizes = np.bincount(strong)
    main = int(np.argmax(sizes))
    return tuple(models[i] for i in np.flatnonzero(strong != main))
