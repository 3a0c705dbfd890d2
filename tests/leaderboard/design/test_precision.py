"""Provisional models and votes needed in the snapshot metadata, from a simulated board."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from leaderboard import FitRequest, compute_leaderboard, simulate_battles
from leaderboard.design.precision import board_precision
from leaderboard.snapshot.folder import write_snapshot


def _board(votes: int) -> tuple[object, object]:
    truth = np.array([1200.0, 1150.0, 1100.0, 1000.0, 990.0])
    counts = simulate_battles(truth, votes, random_state=1).counts()
    return compute_leaderboard(counts, FitRequest(method="bt", interval="sandwich")), counts


def test_more_votes_needed_when_fewer_were_cast_and_wide_models_are_provisional() -> None:
    few, few_counts = _board(400)
    many, many_counts = _board(3000)
    p_few = board_precision(few, few_counts)  # type: ignore[arg-type]
    p_many = board_precision(many, many_counts)  # type: ignore[arg-type]
    assert set(p_few["provisional"]) == set(few.models)  # type: ignore[attr-defined]
    assert p_many["provisional"] == []
    assert p_few["votes_needed_board"] > p_many["votes_needed_board"] > 0
    assert len(p_few["votes_needed_adjacent"]) == 4
    # The closest pair (1000 vs 990) needs the most votes to separate.
    close = [
        e for e in p_many["votes_needed_adjacent"] if {e["upper"], e["lower"]} == {"model-003", "model-004"}
    ]
    others = [e["votes"] for e in p_many["votes_needed_adjacent"] if e not in close]
    assert close and (close[0]["votes"] is None or close[0]["votes"] > max(others))


def test_snapshot_metadata_carries_the_precision(tmp_path: Path) -> None:
    board, counts = _board(2000)
    manifest = write_snapshot(tmp_path, board, counts, plots=False, make_zip=False)  # type: ignore[arg-type]
    precision = manifest.metadata["precision"]
    assert precision["target_half_width"] == 15.0
    assert isinstance(precision["votes_needed_board"], int)


def test_ledger_shares_sum_to_one_and_favour_the_least_known_model() -> None:
    truth = np.array([1100.0, 1050.0, 1000.0, 950.0])
    sim = simulate_battles(truth, 4000, random_state=2)
    keep = (sim.model_a != 3) & (sim.model_b != 3)
    keep[:40] = True  # the fourth model arrived late: few battles
    counts = replace(
        sim, model_a=sim.model_a[keep], model_b=sim.model_b[keep], outcome=sim.outcome[keep], time=None
    ).counts()
    board = compute_leaderboard(counts, FitRequest(method="bt", interval="sandwich"))
    ledger = {e["model"]: e for e in board_precision(board, counts)["ledger"]}
    assert sum(e["battle_share"] for e in ledger.values()) == pytest.approx(1.0, abs=1e-5)
    assert sum(e["sampling_share"] for e in ledger.values()) == pytest.approx(1.0, abs=1e-5)
    late = ledger["model-003"]
    assert late["battle_share"] < 0.1
    assert late["sampling_share"] > max(e["sampling_share"] for k, e in ledger.items() if k != "model-003")
