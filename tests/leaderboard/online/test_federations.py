"""FIDE's and US Chess's own rules as online raters, against the handbooks' tables and worked examples."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from leaderboard.online.elo_schedules import uscf_effective_games
from leaderboard.online.federations import (
    ChessState,
    FideRater,
    UscfRater,
    fide_expected_score,
    uscf_special_rating,
)
from leaderboard.online.table import RATERS

GOLDEN = json.loads((Path(__file__).parent / "golden" / "chess_federations.json").read_text())
TOL = 1e-9


def _state(entry: dict[str, Any]) -> ChessState:
    return ChessState(rating=entry["rating"], games=entry["games"], peak=entry["peak"])


def test_fide_expected_scores_are_table_8_1_b_with_the_400_point_cap() -> None:
    for case in GOLDEN["fide"]["table"]:
        assert fide_expected_score(float(case["difference"])) == case["expected"], case
    for case in GOLDEN["fide"]["uncapped"]:
        got = fide_expected_score(float(case["difference"]), max_difference=None)
        assert got == case["expected"], case


@pytest.mark.parametrize("index", range(len(GOLDEN["fide"]["games"])))
def test_fide_games_over_a_400_point_mismatch(index: int) -> None:
    case = GOLDEN["fide"]["games"][index]
    a, b = _state(case["a"]), _state(case["b"])
    capped = FideRater()
    assert capped.expected_score(a, b) == case["expected_a"]
    new_a, new_b = capped.update(a, b, case["outcome"])
    assert (new_a.rating, new_b.rating) == pytest.approx((case["new_a"], case["new_b"]), abs=TOL)
    assert (new_a.games, new_b.games) == (a.games + 1, b.games + 1)
    # the cap is what moved the numbers: FIDE's whole table gives the uncapped ones
    open_ended = FideRater(max_difference=None).update(a, b, case["outcome"])
    assert (open_ended[0].rating, open_ended[1].rating) == pytest.approx(
        (case["uncapped_new_a"], case["uncapped_new_b"]), abs=TOL
    )
    assert open_ended[0].rating != pytest.approx(new_a.rating, abs=1e-6)


def test_fide_k_follows_games_and_the_peak_on_fides_scale() -> None:
    rater = FideRater()
    new = rater.initial()
    assert new.rating == 1500.0 and rater.k_of(new) == 40.0
    assert rater.k_of(ChessState(2390.0, 30, 2390.0)) == 20.0
    assert rater.k_of(ChessState(2350.0, 30, 2405.0)) == 10.0  # reached 2400 once: stays 10


@pytest.mark.parametrize("index", range(len(GOLDEN["uscf"]["special"])))
def test_uscf_special_formula(index: int) -> None:
    case = GOLDEN["uscf"]["special"][index]
    got = uscf_special_rating(
        case["prior"],
        case["n_effective"],
        case["opponents"],
        case["score"],
        all_wins=case.get("all_wins", False),
        all_losses=case.get("all_losses", False),
    )
    assert got == pytest.approx(case["rating"], abs=1e-9), case


def test_uscf_rater_uses_the_special_formula_for_a_model_with_few_games() -> None:
    rater = UscfRater()
    new = rater.initial()
    assert (new.rating, new.games) == (1500.0, 0)
    # an unrated model's first game: the special formula, not K = 800 / (0 + 1) on the logistic curve
    weaker = ChessState(1300.0, 20, 1350.0, 10.0)
    won, _ = rater.update(new, weaker, 0)
    assert won.rating == pytest.approx(1700.0)  # 400 above the opponent, the nearest such rating to 1500
    assert won.rating != pytest.approx(1500.0 + 800.0 * (1.0 - rater.expected_score(new, weaker)))
    # six games (N' = 6, mixed results) against a 1400 player, then a win: the special formula
    six = ChessState(1500.0, 6, 1550.0, 3.0)
    won, _ = rater.update(six, ChessState(1400.0, 50, 1400.0, 25.0), 0)
    assert won.rating == pytest.approx((6 * 1500.0 + 1400.0 + 400.0) / 7)


def test_uscf_rater_uses_the_standard_formula_past_eight_games() -> None:
    case = GOLDEN["uscf"]["standard"]
    rater = UscfRater()
    a = ChessState(case["rating"], case["games"], case["rating"], case["points"])
    b = ChessState(case["opponent"], 100, case["opponent"], 50.0)
    n_effective = uscf_effective_games(case["rating"], case["games"])
    assert n_effective == pytest.approx(26.7, abs=0.05)
    k = 800.0 / (n_effective + 1.0)
    e = 1.0 / (1.0 + 10.0 ** ((case["opponent"] - case["rating"]) / 400.0))
    new_a, _ = rater.update(a, b, 0)
    assert new_a.rating == pytest.approx(case["rating"] + k * (case["score"] - e), abs=TOL)


def test_uscf_all_wins_keeps_the_special_formula_and_the_floor_holds() -> None:
    rater = UscfRater()
    unbeaten = ChessState(1900.0, 12, 1900.0, 12.0)  # twelve wins: still the special formula
    lost, _ = rater.update(unbeaten, ChessState(1500.0, 50, 1500.0, 25.0), 1)
    n_effective = uscf_effective_games(1900.0, 12)
    assert lost.rating == pytest.approx(
        uscf_special_rating(1900.0, n_effective, [1500.0], 0.0, all_wins=True), abs=TOL
    )
    bottom = ChessState(120.0, 40, 400.0, 10.0)
    assert rater.update(bottom, ChessState(900.0, 40, 900.0, 20.0), 1)[0].rating >= 100.0


def test_federations_refuse_a_davidson_tie_and_bad_arguments() -> None:
    with pytest.raises(ValueError, match="half a point"):
        FideRater(ties="davidson")
    with pytest.raises(ValueError, match="half a point"):
        UscfRater(ties="davidson")
    with pytest.raises(ValueError, match="need a game"):
        uscf_special_rating(1500.0, 0.0, [], 0.0)
    with pytest.raises(ValueError):
        uscf_special_rating(1500.0, 2.0, [1500.0], 2.0)


def test_forecasts_carry_the_expected_score() -> None:
    fide, uscf = FideRater(), UscfRater()
    a, b = ChessState(2000.0, 40, 2000.0), ChessState(2420.0, 40, 2420.0)
    left, tie, right = fide.expected(a, b)
    assert left == pytest.approx(0.08) and tie == 0.0
    assert uscf.expected(a, b)[0] == pytest.approx(uscf.expected_score(a, b), abs=TOL)
    left, tie, right = UscfRater(tie_nu=0.4).expected(a, b)
    assert tie > 0 and left < right and math.isclose(left + tie + right, 1.0)


def test_the_evaluate_rows_are_the_federations_raters_in_their_tie_modes() -> None:
    entry = RATERS["elo"]
    assert entry.modes_of("elo-fide") == ("ignore", "half") == entry.modes_of("elo-uscf")
    assert entry.modes_of("elo-k4") == ("ignore", "half", "davidson")
