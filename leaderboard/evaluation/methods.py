"""The rows of the comparison table: which methods :func:`~leaderboard.evaluation.held_out.evaluate_methods`
fits, and which of them the votes can identify.

A row whose parameter the training votes say nothing about (a tie parameter when no vote is a tie, a
left-side advantage when no vote has a known side) is left out with the reason (:func:`unidentified`),
rather than failing its fit or reporting a number the votes do not hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from leaderboard.battles import Battles
from leaderboard.bt.request import METHODS
from leaderboard.bt.spec import BTSpec
from leaderboard.data import Outcome

__all__ = [
    "DEFAULT_METHODS",
    "NO_SIDES",
    "NO_TIES",
    "RATERS_METHOD",
    "MethodSpec",
    "data_gaps",
    "default_methods",
    "every_method",
    "half_life_of",
    "has_raters",
    "methods_for",
    "unidentified",
]


@dataclass(frozen=True)
class MethodSpec:
    """A row of the comparison table: a name and how to fit it.

    ``kind`` is ``bt`` (a :class:`~leaderboard.bt.spec.BTSpec` fit), ``elo`` (online Elo replayed over the
    training votes in order) or ``raters`` (the rater-ability model of
    :mod:`leaderboard.quality.rater_ability`: Davidson with a position term and one discrimination per
    annotator). ``style`` fits use the per-vote covariates; ``time`` fits weight votes by age.
    """

    name: str
    kind: Literal["bt", "elo", "raters"] = "bt"
    spec: BTSpec = field(default_factory=BTSpec)
    style: bool = False
    elo_k: float = 4.0


#: Name of the rater-ability row (weighted by each annotator's discrimination, each with its own
#: left-side offset on the common term).
RATERS_METHOD = "davidson-position+raters"


def default_methods(
    *, half_life: float | None, prior_sd: float, style: bool, raters: bool = False
) -> list[MethodSpec]:
    """Online Elo, BT, BT + position, Davidson (+ position), time weights, prior, the rater-ability
    model (with ``raters``: the votes name at least two annotators), style control (when covariates are
    available)."""
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
    if raters:
        methods.append(MethodSpec(RATERS_METHOD, kind="raters"))
    if style:
        methods.append(MethodSpec("bt-position+style", spec=BTSpec(position="common"), style=True))
        methods.append(
            MethodSpec("davidson-position+style", spec=BTSpec(position="common", ties="davidson"), style=True)
        )
    return methods


def every_method(
    *, half_life: float | None, prior_sd: float, style: bool, raters: bool = False
) -> list[MethodSpec]:
    """The rows of :func:`default_methods` (with its online Elo row, the live board's), then every member
    of :data:`~leaderboard.bt.request.METHODS` not yet among them (the probit link's Thurstone-Mosteller and
    Glenn-David rows)."""
    rows = default_methods(half_life=half_life, prior_sd=prior_sd, style=style, raters=raters)
    names = {m.name for m in rows}
    rows.extend(MethodSpec(name, spec=spec) for name, spec in METHODS.items() if name not in names)
    return rows


DEFAULT_METHODS: tuple[str, ...] = tuple(
    m.name for m in default_methods(half_life=1.0, prior_sd=200.0, style=True, raters=True)
)


def has_raters(battles: Battles) -> bool:
    """Whether the votes name at least two annotators (what the rater-ability row needs)."""
    if battles.annotator is None:
        return False
    return int(np.unique(battles.annotator[battles.annotator >= 0]).size) >= 2


#: Why the training votes cannot identify a parameter, by the parameter's kind (the reason for a row left
#: out of the comparison table).
NO_TIES = "the training votes have no ties, so a tie parameter cannot be estimated"
NO_SIDES = "no training vote has a known side, so a left-side advantage cannot be estimated"


def data_gaps(battles: Battles) -> dict[str, str]:
    """What the votes cannot identify: ``ties`` (no tie or both-bad vote) and ``position`` (no vote with a
    known side), each with the reason in words; empty when both can be estimated."""
    gaps: dict[str, str] = {}
    if not np.any((battles.outcome == Outcome.TIE) | (battles.outcome == Outcome.BOTHBAD)):
        gaps["ties"] = NO_TIES
    if battles.sided is not None and not np.any(battles.sided):
        gaps["position"] = NO_SIDES
    return gaps


def unidentified(method: MethodSpec, battles: Battles) -> str | None:
    """Why ``battles`` cannot identify a parameter of ``method`` (a tie parameter without ties, a position
    term without sides), or None when they can: such a method has no row rather than a failed fit."""
    gaps = data_gaps(battles)
    spec = method.spec
    raters = method.kind == "raters"  # Davidson ties and a position term, per annotator
    if "ties" in gaps and (
        raters or (method.kind == "bt" and spec.has_tie_parameter and spec.nu_fixed is None)
    ):
        return gaps["ties"]
    if "position" in gaps and (raters or (method.kind == "bt" and spec.position != "none")):
        return gaps["position"]
    return None


def half_life_of(train: Battles, half_life: float | None) -> float | None:
    """The time-weighted row's half-life: none without vote times, by default half their span."""
    if train.time is None:
        return None  # no timestamps: arrival order is no clock to weight votes by
    if half_life is None and len(train) > 1:
        span = float(np.ptp(train.times()))
        return span / 2 if span > 0 else None
    return half_life


def methods_for(
    train: Battles,
    *,
    methods: Sequence[MethodSpec] | None = None,
    half_life: float | None = None,
    prior_sd: float = 200.0,
    all_methods: bool = False,
) -> list[MethodSpec]:
    """The rows :func:`evaluate_methods` considers for ``train`` (before leaving out those the votes cannot
    identify, :func:`unidentified`): ``methods``, or the defaults for these votes."""
    if methods is not None:
        return list(methods)
    table = every_method if all_methods else default_methods
    return table(
        half_life=half_life_of(train, half_life),
        prior_sd=prior_sd,
        style=train.features is not None,
        raters=has_raters(train),
    )
