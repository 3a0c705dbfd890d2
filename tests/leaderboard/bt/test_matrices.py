"""Pairwise matrices written out by hand on a handful of votes."""

from __future__ import annotations

import numpy as np
import pytest

from leaderboard.bt.matrices import pairwise_matrices
from leaderboard.data import aggregate_battles
from tests.factories import handmade_leaderboard


def test_pairwise_matrices_by_hand() -> None:
    counts = aggregate_battles(
        ["a", "a", "b", "a", "c"],
        ["b", "b", "a", "c", "a"],
        ["model_a", "tie", "model_a", "model_b", "model_a"],
    )
    board = handmade_leaderboard(counts)
    m = pairwise_matrices(counts, board)
    i = {name: k for k, name in enumerate(m.models)}
    # a vs b: a won 1, tie 1, b won 1 -> 1.5 / 3
    assert m.n_battles[i["a"], i["b"]] == 3
    assert m.observed[i["a"], i["b"]] == pytest.approx(0.5)
    # a vs c: c won both
    assert m.observed[i["c"], i["a"]] == pytest.approx(1.0)
    assert np.isnan(m.observed[i["b"], i["c"]])
    np.testing.assert_allclose(m.predicted + m.predicted.T, np.where(np.eye(3) == 1, np.nan, 1.0))
