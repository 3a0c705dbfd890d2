"""Arena's math room: aggregation, online Elo, Bradley-Terry, bootstrap and sandwich intervals, ranks."""

from leaderboard import extended as _extended  # noqa: F401  (registers bt-position, davidson, davidson-position)
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
from leaderboard.elo import EloConfig, EloStandings, expected_score, replay_elo, update_elo
from leaderboard.matrices import (
    battle_count_matrix,
    expected_score_table,
    model_totals,
    observed_win_rates,
    performance_rating,
    predicted_win_rates,
)
from leaderboard.result import Leaderboard
from leaderboard.simulate import SimulatedBattles, simulate_battles

__all__ = [
    "OUTCOME_STRINGS",
    "BTFit",
    "BootstrapResult",
    "DegenerateRoundsWarning",
    "DisconnectedComparisonError",
    "EloConfig",
    "EloStandings",
    "IntervalResult",
    "Leaderboard",
    "MethodOutput",
    "MethodRequest",
    "NonConvergenceError",
    "Outcome",
    "PairCounts",
    "PairStats",
    "SimulatedBattles",
    "UnboundedRatingWarning",
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
    "sandwich_intervals",
    "simulate_battles",
    "solve_bt_batch",
    "update_elo",
]
