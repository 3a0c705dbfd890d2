"""What a board is fitted with: the method, its intervals and model options, as one typed request.

A board is asked for once, as a :class:`FitRequest`: the command line builds it from its options, the admin
API from its JSON body, a library caller by hand; it is then handed whole to the fit
(:func:`leaderboard.bt.compute.fit_leaderboard`), the style-controlled board and the composite, so no
option is forwarded by name through the layers in between. It is checked as it is made, before any vote is
read: an unknown method or interval, a model option the Bradley-Terry family refuses (the
:class:`~leaderboard.bt.spec.BTSpec` of the method is built to see), a bad anchor, clustering or
rectification raise :class:`FitRequestError`, a ``ValueError`` that names the option at fault.

:data:`METHODS` names the members of the Bradley-Terry family a request may ask for, :data:`SOURCE_METHODS`
the methods that fit the votes one by one with who cast them; the model options every member takes are
:class:`ModelOptions`, typed, each with its default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from leaderboard.bt.clusters import parse_cluster
from leaderboard.bt.spec import BothBad, BTSpec

__all__ = [
    "INTERVALS",
    "METHODS",
    "RECTIFICATIONS",
    "SOURCE_METHODS",
    "FitRequest",
    "FitRequestError",
    "ModelOptions",
    "available_methods",
    "method_spec",
]

#: How a board's intervals are made: percentile bootstrap, the sandwich, or none (intervals equal the rating).
INTERVALS = ("bootstrap", "sandwich", "none")

#: Method names and the member of the Bradley-Terry family each one fits: logit (``bt``, ``davidson``)
#: and probit (Thurstone-Mosteller ``tm``, Glenn-David ties) links, each with and without position.
METHODS: Mapping[str, BTSpec] = {
    "bt": BTSpec(),
    "bt-position": BTSpec(position="common"),
    "davidson": BTSpec(ties="davidson"),
    "davidson-position": BTSpec(position="common", ties="davidson"),
    "tm": BTSpec(link="probit"),
    "tm-position": BTSpec(position="common", link="probit"),
    "glenn-david": BTSpec(ties="glenn-david", link="probit"),
    "glenn-david-position": BTSpec(position="common", ties="glenn-david", link="probit"),
}

#: Methods that need to know who cast each vote (a human or which LLM judge), so they fit the votes
#: one by one with their sources rather than the aggregated counts: the source-aware composite
#: (:func:`leaderboard.composite.board.composite_board`).
SOURCE_METHODS: tuple[str, ...] = ("composite",)

#: How a source-aware board may be rectified: ``ppi``, the judges' verdicts corrected by the human votes
#: on the battles both judged (PPI++, :mod:`leaderboard.composite.ppi`).
RECTIFICATIONS: tuple[str, ...] = ("ppi",)


class FitRequestError(ValueError):
    """A request that cannot be fitted; ``option`` names the field at fault (``method``, ``interval``,
    ``model``, ``anchor``, ``cluster``, ``families``, ``rectify``, ``n_rounds`` or ``level``)."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


def available_methods() -> tuple[str, ...]:
    """Every method name a board can be made with: the Bradley-Terry family of :data:`METHODS` and the
    source-aware methods of :data:`SOURCE_METHODS`."""
    return tuple(sorted([*METHODS, *SOURCE_METHODS]))


@dataclass(frozen=True)
class ModelOptions:
    """The model options every member of the Bradley-Terry family takes (see :class:`BTSpec`).

    Attributes
    ----------
    half_life : time weights: a vote's weight halves every ``half_life`` units of the votes' times
        (seconds from a store or a file); None for equal weights
    now : the time the weights are reckoned from; the latest vote's when None
    prior : standard deviation, in rating points, of a Gaussian prior on the ratings; None for none
    both_bad : ``tie (bothbad)`` votes count as ties (``tie``) or are left out (``exclude``)
    per_model_position : with a position method, one left-side advantage per model instead of one for all
    """

    half_life: float | None = None
    now: float | None = None
    prior: float | None = None
    both_bad: BothBad = "tie"
    per_model_position: bool = False

    def describe(self) -> dict[str, Any]:
        """The options set away from their defaults, by name: what a board's parameters and a snapshot's
        metadata record (a plain fit records none, so its metadata says nothing of them)."""
        described: dict[str, Any] = {}
        if self.half_life is not None:
            described["half_life"] = self.half_life
        if self.now is not None:
            described["now"] = self.now
        if self.prior is not None:
            described["prior"] = self.prior
        if self.both_bad != "tie":
            described["both_bad"] = self.both_bad
        if self.per_model_position:
            described["per_model_position"] = True
        return described


def method_spec(
    method: str,
    model: ModelOptions = ModelOptions(),  # noqa: B008 - frozen, so a shared default is safe
    *,
    features: npt.NDArray[np.float64] | None = None,
    feature_names: Sequence[str] = (),
) -> BTSpec:
    """The :class:`BTSpec` of ``method`` with ``model``'s options (and the style covariates ``features``,
    one row per cell, named ``feature_names``) applied.

    Raises
    ------
    ValueError
        For a source-aware or unknown method, or options the family refuses (:class:`BTSpec`'s checks).
    """
    if method in SOURCE_METHODS:
        raise ValueError(f"method {method!r} needs each vote's source (human or judge), not counts")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(available_methods())}")
    base = METHODS[method]
    per_model = model.per_model_position and base.position != "none"
    return replace(
        base,
        half_life=model.half_life,
        now=model.now,
        prior_sd=model.prior,
        both_bad=model.both_bad,
        position="per-model" if per_model else base.position,
        features=None if features is None else np.asarray(features, dtype=np.float64),
        feature_names=tuple(feature_names),
    )


@dataclass(frozen=True)
class FitRequest:
    """How a board is fitted; checked as it is made (see the module).

    Attributes
    ----------
    method : one of :func:`available_methods`
    n_rounds : bootstrap rounds; no rounds with a bootstrap interval means no intervals (``interval``
        becomes ``none``)
    level : the intervals' level, between 0 and 1
    interval : one of :data:`INTERVALS`
    anchor : (model, rating): shift the ratings so this model has this rating; None for the mean at 1000
    random_state : the seed: the same votes and seed give the same board
    cluster : which votes are dependent for the intervals: ``auto`` (annotators when the votes name
        enough), ``none``, ``annotator``, ``prompt`` or ``annotator,prompt``
    model : the family's model options
    style : style groups (``length``, ``markdown``, ...) for a second, style-controlled board; empty for
        none (their names are the style board's to check: :func:`leaderboard.style.board.expand_style`)
    families : the composite's model families (model -> family) for judges' self-preference
    rectify : ``ppi`` (see :data:`RECTIFICATIONS`) for a source-aware method; empty for none
    """

    method: str = "bt"
    n_rounds: int = 1000
    level: float = 0.95
    interval: str = "bootstrap"
    anchor: tuple[str, float] | None = None
    random_state: int = 0
    cluster: str = "auto"
    model: ModelOptions = ModelOptions()  # frozen, so one shared default is safe
    style: tuple[str, ...] = ()
    families: Mapping[str, str] = field(default_factory=dict)
    rectify: str = ""

    def __post_init__(self) -> None:
        if self.method not in METHODS and self.method not in SOURCE_METHODS:
            raise FitRequestError(
                "method", f"unknown method {self.method!r}; available: {', '.join(available_methods())}"
            )
        if self.interval not in INTERVALS:
            raise FitRequestError("interval", f"interval must be one of {INTERVALS}")
        if self.n_rounds < 0:
            raise FitRequestError("n_rounds", f"n_rounds must be 0 or more, got {self.n_rounds}")
        if not 0.0 < self.level < 1.0:
            raise FitRequestError("level", f"level must be between 0 and 1, got {self.level}")
        # No rounds means no bootstrap: say so, rather than ask for intervals from zero rounds.
        if self.n_rounds == 0 and self.interval == "bootstrap":
            object.__setattr__(self, "interval", "none")
        if self.anchor is not None:
            model, rating = self.anchor
            if not model or not math.isfinite(rating):
                raise FitRequestError("anchor", f"an anchor is a model and a finite rating: {self.anchor!r}")
        if self.cluster.strip().lower() != "auto":
            try:
                parse_cluster(self.cluster)
            except ValueError as exc:
                raise FitRequestError("cluster", str(exc)) from None
        if not self.by_source:
            try:
                method_spec(self.method, self.model)
            except ValueError as exc:
                raise FitRequestError("model", str(exc)) from None
        object.__setattr__(self, "style", tuple(self.style))
        object.__setattr__(self, "families", dict(self.families))
        if self.families and not self.by_source:
            raise FitRequestError("families", "families are for --method composite")
        if self.rectify not in ("", *RECTIFICATIONS):
            raise FitRequestError(
                "rectify", f"unknown rectification {self.rectify!r}; available: {', '.join(RECTIFICATIONS)}"
            )
        if self.rectify and not self.by_source:
            raise FitRequestError(
                "rectify", "--rectify needs the votes with who cast them: use --method composite"
            )

    @property
    def by_source(self) -> bool:
        """The method fits the votes one by one with who cast them (the composite), not the counts."""
        return self.method in SOURCE_METHODS
