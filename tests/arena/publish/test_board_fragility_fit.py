"""The fragility certificate of a published board starts from the board's own point fit: the same
certificate as fitting the votes again, with the default scale, an anchor or another method."""

from __future__ import annotations

import numpy as np
import pytest

from arena.publish.board_fit import board_fragility, fit_board
from leaderboard import simulate_battles
from leaderboard.bt.request import FitRequest


@pytest.mark.parametrize(
    "fit_request",
    [
        FitRequest(n_rounds=0, interval="none"),
        FitRequest(n_rounds=0, interval="none", anchor=("model-001", 1200.0)),
        FitRequest(method="davidson", n_rounds=0, interval="none"),
    ],
    ids=["bt", "anchored", "davidson"],
)
def test_the_boards_fit_gives_the_refitted_certificate(fit_request: FitRequest) -> None:
    battles = simulate_battles(np.linspace(950, 1050, 6), 3000, random_state=2, tie_rate=0.2)
    counts = battles.counts()
    board, fit = fit_board(counts, fit_request)
    np.testing.assert_allclose(fit.rating, board.rating)  # the point fit the board reports
    with_fit = board_fragility(counts, fit_request, fit)
    assert "error" not in with_fit
    assert with_fit == board_fragility(counts, fit_request)  # refitted from the votes
