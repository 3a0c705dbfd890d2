"""The RATERS table: every online rater by the name settings use, with what each reader needs of it.

One entry per rater, read by everything that names one: the live board's setting and its rater
(``ARENA_LIVE_RATING``, :func:`votes.voting.live.live_rater_of`), the words above the live board, the
pairing's reading of live ratings as strengths (:func:`arena.voting.pairing.optimal_design`) and the rows
``arena evaluate`` compares (:func:`leaderboard.evaluation.systems.online_raters`). Adding a rater is its
class (an :class:`~leaderboard.online.raters.OnlineRater`) plus one entry here; nothing else spells its name.

The live Elo is the one entry whose live rater is not an ``OnlineRater``: it is the plain
:class:`~leaderboard.online.elo.EloConfig` of :func:`~leaderboard.online.elo.update_elo`, the vote path's
fast arithmetic (an :class:`~leaderboard.online.elo.EloRater` with the same config gives the same floats).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from leaderboard.online.elo import EloConfig, EloRater
from leaderboard.online.federations import FideRater, UscfRater
from leaderboard.online.glicko2 import Glicko2Rater
from leaderboard.online.raters import OnlineRater, TieMode
from leaderboard.online.trueskill import TrueSkillRater

__all__ = ["DEFAULT_LIVE_RATER", "FIXED_K", "RATERS", "HeldOutOptions", "LiveOptions", "RaterEntry"]

#: K of evaluate's fixed-K Elo rows (the live board's default K).
FIXED_K = 4.0
#: Natural-log (logistic) units per probit unit: ``Phi(z)`` is within 0.01 of ``expit(1.702 z)``.
LOGISTIC_PER_PROBIT = 1.702
#: Natural-log strength units per point of a ``400 log10`` rating scale (Elo's and Glicko-2's).
NATS_PER_ELO_POINT = math.log(10.0) / 400.0
#: Every tie mode, in the order evaluate lists a rater's rows.
EVERY_TIE_MODE: tuple[TieMode, ...] = ("ignore", "half", "davidson")


@dataclass(frozen=True)
class LiveOptions:
    """What the settings say about the live board's rater: the Elo's K and start, Glicko-2's period."""

    elo: EloConfig
    period_length: float


@dataclass(frozen=True)
class HeldOutOptions:
    """What one of evaluate's rows is made from: a tie mode and the training votes' tie model.

    ``nu`` is the Davidson tie propensity at which two equal models tie as often as the training votes
    do, ``draw_probability`` that tie rate itself (below 1), ``period_length`` a rating period in the
    units of the vote times.
    """

    ties: TieMode
    nu: float
    draw_probability: float
    period_length: float


@dataclass(frozen=True)
class RaterEntry:
    """One online rater as its readers see it.

    Attributes
    ----------
    live : callable
        The live board's rater from the settings.
    describe : callable
        What the live board's ratings are, in words shown above it (``Glicko-2 (rating ± deviation,
        periods of 24.0 h)``).
    nats_per_point : float
        Natural-log strength units per rating point: the rater's scale, to read its ratings as
        Bradley-Terry strengths.
    tie_modes : tuple of TieMode
        The tie modes evaluate compares it in.
    held_out : mapping of row name to callable
        evaluate's rows of this rater (one per variant, each in every tie mode it takes): the row
        ``name/ties`` is ``held_out[name](options)``.
    variant_tie_modes : mapping of row name to tie modes
        The tie modes of a variant that does not take all of ``tie_modes`` (the chess federations score
        a draw half a point, and have no Davidson model).
    """

    live: Callable[[LiveOptions], EloConfig | OnlineRater[Any]]
    describe: Callable[[LiveOptions], str]
    nats_per_point: float
    tie_modes: tuple[TieMode, ...]
    held_out: Mapping[str, Callable[[HeldOutOptions], OnlineRater[Any]]]
    variant_tie_modes: Mapping[str, tuple[TieMode, ...]] = field(default_factory=dict)

    def modes_of(self, variant: str) -> tuple[TieMode, ...]:
        """The tie modes evaluate compares ``variant`` in."""
        return self.variant_tie_modes.get(variant, self.tie_modes)


def _elo_row(options: HeldOutOptions) -> OnlineRater[Any]:
    """The fixed-K Elo row; forecasts its ties with the Davidson ``nu``."""
    davidson = options.ties == "davidson"
    config = EloConfig(k=FIXED_K, davidson_nu=options.nu if davidson else None)
    return EloRater(config=config, ties=options.ties, tie_nu=0.0 if davidson else options.nu)


def _fide_row(options: HeldOutOptions) -> OnlineRater[Any]:
    """FIDE's rules (:mod:`leaderboard.online.federations`); forecasts ties with the Davidson ``nu``."""
    return FideRater(ties=options.ties, tie_nu=options.nu)


def _uscf_row(options: HeldOutOptions) -> OnlineRater[Any]:
    """US Chess's rules (:mod:`leaderboard.online.federations`); forecasts ties with the Davidson ``nu``."""
    return UscfRater(ties=options.ties, tie_nu=options.nu)


#: The tie modes of the federations' rows: a draw is half a point (or skipped), never a Davidson tie.
FEDERATION_TIE_MODES: tuple[TieMode, ...] = ("ignore", "half")


def _glicko2_row(options: HeldOutOptions) -> OnlineRater[Any]:
    return Glicko2Rater(ties=options.ties, nu=options.nu, period_length=options.period_length)


def _trueskill_row(options: HeldOutOptions) -> OnlineRater[Any]:
    return TrueSkillRater(ties=options.ties, draw_probability=options.draw_probability)


def _hours(seconds: float) -> float:
    return round(seconds / 3600, 1)


#: The live board's rater unless ``ARENA_LIVE_RATING`` names another.
DEFAULT_LIVE_RATER = "elo"

#: The online raters by the name ``ARENA_LIVE_RATING`` takes, in the order evaluate lists their rows.
#: Tests add an entry for the length of a test (and take it away after); nothing else changes it.
RATERS: dict[str, RaterEntry] = {
    "elo": RaterEntry(
        live=lambda options: options.elo,
        describe=lambda options: f"Online Elo (K = {round(options.elo.k, 1)})",
        nats_per_point=NATS_PER_ELO_POINT,
        tie_modes=EVERY_TIE_MODE,
        held_out={"elo-k4": _elo_row, "elo-fide": _fide_row, "elo-uscf": _uscf_row},
        variant_tie_modes={"elo-fide": FEDERATION_TIE_MODES, "elo-uscf": FEDERATION_TIE_MODES},
    ),
    # Glicko-2 scores a tie half a win (Glickman's rule) on the board, in periods of the set length.
    "glicko2": RaterEntry(
        live=lambda options: Glicko2Rater(ties="half", period_length=options.period_length),
        describe=lambda options: (
            f"Glicko-2 (rating ± deviation, periods of {_hours(options.period_length)} h)"
        ),
        nats_per_point=NATS_PER_ELO_POINT,
        tie_modes=EVERY_TIE_MODE,
        held_out={"glicko2": _glicko2_row},
    ),
    # TrueSkill rates a tie as a draw through its draw margin; its ratings are on a 25-point scale where
    # it forecasts ``Phi(gap / (sqrt(2) beta))``, read through the logistic approximation of the normal
    # curve. A model of performances has no half point, so no ``half`` rows.
    "trueskill": RaterEntry(
        live=lambda _options: TrueSkillRater(),
        describe=lambda _options: "TrueSkill (mean ± standard deviation of the skill)",
        nats_per_point=LOGISTIC_PER_PROBIT / (math.sqrt(2.0) * TrueSkillRater.beta),
        tie_modes=("ignore", "davidson"),
        held_out={"trueskill": _trueskill_row},
    ),
}
