"""FIDE and US Chess K factors against their published rules and tables (golden cases)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from leaderboard.online.elo import EloConfig, EloRater, EloState
from leaderboard.online.elo_schedules import FideK, FixedK, UscfK, uscf_effective_games

GOLDEN = Path(__file__).parent / "golden"
TOL = 1e-9


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN / name).read_text())
    return data


def test_fide_k_follows_the_regulations() -> None:
    fide = FideK()
    for case in _load("elo_fide_k.json")["k_cases"]:
        assert fide.k(case["rating"], case["games"], case["peak"]) == case["k"], case


def test_fide_update_with_the_400_point_cap() -> None:
    case = _load("elo_fide_k.json")["update"]
    capped = EloRater(EloConfig(initial=1500.0), schedule=FideK(), max_difference=case["max_difference"])
    a, b = EloState(**case["a"]), EloState(**case["b"])
    new_a, new_b = capped.update(a, b, case["outcome"])
    assert new_a.rating == pytest.approx(case["new_a"], abs=TOL)
    assert new_b.rating == pytest.approx(case["new_b"], abs=TOL)
    assert (new_a.games, new_b.games) == (a.games + 1, b.games + 1)
    uncapped = EloRater(EloConfig(initial=1500.0), schedule=FideK())
    assert uncapped.update(a, b, case["outcome"])[0].rating == pytest.approx(case["uncapped_new_a"], abs=TOL)


def test_fide_k_stays_10_after_reaching_2400() -> None:
    rater = EloRater(EloConfig(initial=2390.0), schedule=FideK())
    a = EloState(rating=2395.0, games=40, peak=2395.0)
    b = EloState(rating=2395.0, games=40, peak=2395.0)
    a, b = rater.update(a, b, 0)  # 2395 + 20 * 0.5 = 2405: reached 2400
    assert a.peak == pytest.approx(2405.0) and rater.k_of(a) == 10.0
    a, _ = rater.update(a, EloState(2200.0, 40, 2200.0), 1)  # loses 7.5 points: below 2400 again
    assert a.rating < 2400.0 and rater.k_of(a) == 10.0
    assert rater.k_of(b) == 20.0


def test_uscf_effective_games_example() -> None:
    for case in _load("elo_uscf_k.json")["effective_games"]:
        got = uscf_effective_games(case["rating"], case["games"])
        assert got == pytest.approx(case["n_effective"], abs=case["tolerance"] + TOL), case


def test_uscf_k_table() -> None:
    data = _load("elo_uscf_k.json")
    for case in data["k_table"]:
        # Above the pivot N* = 50, so the effective games are the games played (at most 50).
        k = UscfK(games_per_event=case["m"]).k(2300.0, case["n_effective"], 2300.0)
        assert k == pytest.approx(case["k"], abs=data["k_tolerance"]), case


def test_uscf_k_shrinks_with_games_and_rating() -> None:
    uscf = UscfK()
    assert uscf.k(1500.0, 0, 1500.0) == 800.0
    ks_by_games = [uscf.k(1800.0, n, 1800.0) for n in (0, 5, 10, 20, 40)]
    assert ks_by_games == sorted(ks_by_games, reverse=True) and len(set(ks_by_games)) == 5
    ks_by_rating = [uscf.k(r, 100, r) for r in (1000.0, 1500.0, 2000.0, 2200.0, 2500.0)]
    assert ks_by_rating == sorted(ks_by_rating, reverse=True)
    assert uscf.k(2500.0, 100, 2500.0) == pytest.approx(800.0 / 51.0)


def test_schedules_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        FixedK(-1.0)
    with pytest.raises(ValueError):
        FideK(new_games=-1)
    with pytest.raises(ValueError):
        UscfK(games_per_event=0)
    with pytest.raises(ValueError, match="either a schedule"):
        EloRater(EloConfig(provisional=((10, 40.0),)), schedule=FixedK(16.0))


def test_a_state_without_history_counts_its_own_rating_as_peak() -> None:
    rater = EloRater(EloConfig(initial=1500.0), schedule=FideK())
    assert rater.k_of(EloState(rating=2450.0, games=40)) == 10.0
    assert rater.k_of(EloState(rating=2350.0, games=40)) == 20.0
