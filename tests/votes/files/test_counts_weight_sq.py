"""A counts file's optional ``weight_sq`` column: the summed squared weights of each cell's votes, read
into the cells as the votes themselves would give them, and refused when no weights could square to it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from leaderboard.battles import Battles
from leaderboard.data import OUTCOME_STRINGS, Outcome
from votes.files.counts import read_counts
from votes.files.records import InputError

MODELS = ("a", "b", "c")


def _votes(n: int = 300, seed: int = 2) -> Battles:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    return Battles(
        models=MODELS,
        model_a=a,
        model_b=(a + rng.integers(1, 3, n)) % 3,
        outcome=rng.integers(0, 3, n).astype(np.int8),
        weight=rng.choice([0.25, 1.0, 4.0], n),
    )


def _file(votes: Battles, path: Path, *, squares: bool = True) -> Path:
    """The votes' cells written as a counts file, each cell in two rows (rows of one cell are summed)."""
    frame = pd.DataFrame(
        {
            "model_a": np.asarray(MODELS)[votes.model_a],
            "model_b": np.asarray(MODELS)[votes.model_b],
            "winner": [OUTCOME_STRINGS[Outcome(int(o))] for o in votes.outcome],
            "half": np.arange(len(votes)) % 2,
            "count": 1,
            "weight": votes.weight,
            "weight_sq": np.asarray(votes.weight) ** 2,
        }
    )
    cells = frame.groupby(["model_a", "model_b", "winner", "half"], as_index=False)[
        ["count", "weight", "weight_sq"]
    ].sum()
    cells.drop(columns=["half"] if squares else ["half", "weight_sq"]).to_csv(path, index=False)
    return path


def test_summed_squares_are_read_as_the_votes_give_them(tmp_path: Path) -> None:
    votes = _votes()
    want = votes.counts()
    got = read_counts(_file(votes, tmp_path / "cells.csv")).counts
    assert got.weight_sq is not None and want.weight_sq is not None
    np.testing.assert_allclose(got.count, want.count, rtol=1e-12)
    np.testing.assert_allclose(got.weight_sq, want.weight_sq, rtol=1e-12)
    assert np.any(got.weight_spread > 0)
    # Without the column the weights are taken equal within a cell, as before.
    plain = read_counts(_file(votes, tmp_path / "plain.csv", squares=False)).counts
    assert plain.weight_sq is None and not np.any(plain.weight_spread > 0)


@pytest.mark.parametrize(
    ("weight", "weight_sq", "reason"),
    [
        (2.0, 1.0, "below weight^2 / count"),  # two votes summing to 2 square to at least 2
        (2.0, 5.0, "exceeds weight^2"),
        (2.0, -1.0, "must be a positive number"),
    ],
)
def test_squares_no_weights_could_give_are_refused(
    tmp_path: Path, weight: float, weight_sq: float, reason: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(f"model_a,model_b,winner,count,weight,weight_sq\na,b,model_a,2,{weight},{weight_sq}\n")
    with pytest.raises(InputError, match=re.escape(reason)):
        read_counts(path)


def test_squares_need_the_weights_they_square(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("model_a,model_b,winner,count,weight_sq\na,b,model_a,2,2\n")
    with pytest.raises(InputError, match="needs the 'weight' column"):
        read_counts(path)
