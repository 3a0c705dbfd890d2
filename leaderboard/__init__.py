"""Arena's math room: aggregation, online Elo, Bradley-Terry, bootstrap and sandwich intervals, ranks.

Names are loaded on first use (PEP 562), so `import leaderboard.elo` in the web app's vote path does not
pay for scikit-learn and scipy.optimize at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "BTFit": "bt",
    "BootstrapResult": "bootstrap",
    "DegenerateRoundsWarning": "bootstrap",
    "DisconnectedComparisonError": "bt",
    "EloConfig": "elo",
    "EloRater": "elo",
    "EloStandings": "elo",
    "EloState": "elo",
    "FideK": "elo_schedules",
    "FixedK": "elo_schedules",
    "Glicko2Rater": "glicko2",
    "Glicko2State": "glicko2",
    "IntervalResult": "bootstrap",
    "Leaderboard": "result",
    "MethodOutput": "compute",
    "MethodRequest": "compute",
    "NonConvergenceError": "bt",
    "OUTCOME_STRINGS": "data",
    "OnlineRater": "raters",
    "Outcome": "data",
    "PairCounts": "data",
    "PairStats": "data",
    "SimulatedBattles": "simulate",
    "TieMode": "raters",
    "TrueSkillRater": "trueskill",
    "TrueSkillState": "trueskill",
    "UnboundedRatingWarning": "bt",
    "UscfK": "elo_schedules",
    "aggregate_battles": "data",
    "aggregate_codes": "data",
    "available_methods": "compute",
    "battle_count_matrix": "matrices",
    "bootstrap_ratings": "bootstrap",
    "check_comparison_graph": "bt",
    "collapse_pairs": "data",
    "compute_leaderboard": "compute",
    "expected_score": "elo",
    "expected_score_table": "matrices",
    "fit_bt": "bt",
    "model_totals": "matrices",
    "observed_win_rates": "matrices",
    "parse_outcome": "data",
    "percentile_intervals": "bootstrap",
    "performance_rating": "matrices",
    "predicted_win_rates": "matrices",
    "rank_intervals": "bootstrap",
    "rank_upper_bound": "bootstrap",
    "ranks_of": "bootstrap",
    "register_method": "compute",
    "replay_elo": "elo",
    "rolling_forecasts": "raters",
    "sandwich_intervals": "bootstrap",
    "simulate_battles": "simulate",
    "solve_bt_batch": "bt",
    "update_elo": "elo",
}

if TYPE_CHECKING:
    from leaderboard.bootstrap import (
        BootstrapResult,
        DegenerateRoundsWarning,
        IntervalResult,
        bootstrap_ratings,
        percentile_intervals,
        rank_intervals,
        rank_upper_bound,
        ranks_of,
        sandwich_intervals,
    )
    from leaderboard.bt import (
        BTFit,
        DisconnectedComparisonError,
        NonConvergenceError,
        UnboundedRatingWarning,
        check_comparison_graph,
        fit_bt,
        solve_bt_batch,
    )
    from leaderboard.compute import (
        MethodOutput,
        MethodRequest,
        available_methods,
        compute_leaderboard,
        register_method,
    )
    from leaderboard.data import (
        OUTCOME_STRINGS,
        Outcome,
        PairCounts,
        PairStats,
        aggregate_battles,
        aggregate_codes,
        collapse_pairs,
        parse_outcome,
    )
    from leaderboard.elo import (
        EloConfig,
        EloRater,
        EloStandings,
        EloState,
        expected_score,
        replay_elo,
        update_elo,
    )
    from leaderboard.elo_schedules import (
        FideK,
        FixedK,
        UscfK,
    )
    from leaderboard.glicko2 import (
        Glicko2Rater,
        Glicko2State,
    )
    from leaderboard.matrices import (
        battle_count_matrix,
        expected_score_table,
        model_totals,
        observed_win_rates,
        performance_rating,
        predicted_win_rates,
    )
    from leaderboard.raters import (
        OnlineRater,
        TieMode,
        rolling_forecasts,
    )
    from leaderboard.result import (
        Leaderboard,
    )
    from leaderboard.simulate import (
        SimulatedBattles,
        simulate_battles,
    )
    from leaderboard.trueskill import (
        TrueSkillRater,
        TrueSkillState,
    )

__all__ = [
    "OUTCOME_STRINGS",
    "BTFit",
    "BootstrapResult",
    "DegenerateRoundsWarning",
    "DisconnectedComparisonError",
    "EloConfig",
    "EloRater",
    "EloStandings",
    "EloState",
    "FideK",
    "FixedK",
    "Glicko2Rater",
    "Glicko2State",
    "IntervalResult",
    "Leaderboard",
    "MethodOutput",
    "MethodRequest",
    "NonConvergenceError",
    "OnlineRater",
    "Outcome",
    "PairCounts",
    "PairStats",
    "SimulatedBattles",
    "TieMode",
    "TrueSkillRater",
    "TrueSkillState",
    "UnboundedRatingWarning",
    "UscfK",
    "aggregate_battles",
    "aggregate_codes",
    "available_methods",
    "battle_count_matrix",
    "bootstrap_ratings",
    "check_comparison_graph",
    "collapse_pairs",
    "compute_leaderboard",
    "expected_score",
    "expected_score_table",
    "fit_bt",
    "model_totals",
    "observed_win_rates",
    "parse_outcome",
    "percentile_intervals",
    "performance_rating",
    "predicted_win_rates",
    "rank_intervals",
    "rank_upper_bound",
    "ranks_of",
    "register_method",
    "replay_elo",
    "rolling_forecasts",
    "sandwich_intervals",
    "simulate_battles",
    "solve_bt_batch",
    "update_elo",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'leaderboard' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"leaderboard.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
