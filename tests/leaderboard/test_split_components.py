"""The parts of a comparison graph: found from the pairs that met (not from every vote), the battles of a
connected graph returned as they are, and every part coded against its own models as before."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from leaderboard.battles import Battles, split_components
from leaderboard.data import aggregate_codes


def _battles(pairs: list[tuple[int, int]], models: tuple[str, ...], repeat: int = 3) -> Battles:
    a = np.array([p[0] for p in pairs] * repeat)
    b = np.array([p[1] for p in pairs] * repeat)
    rng = np.random.default_rng(0)
    return Battles(
        models=models,
        model_a=a,
        model_b=b,
        outcome=rng.integers(0, 4, a.size).astype(np.int8),
        time=np.arange(a.size, dtype=np.float64),
        weight=rng.uniform(0.5, 2.0, a.size),
    )


def _labels_per_vote(battles: Battles) -> np.ndarray:
    """Each vote's part as the graph of every vote gives it (the reference)."""
    m = len(battles.models)
    graph = sp.csr_matrix((np.ones(len(battles)), (battles.model_a, battles.model_b)), shape=(m, m))
    labels = connected_components(graph, directed=False)[1]
    return np.asarray(labels[battles.model_a])


def test_a_connected_graph_is_one_part_without_a_copy() -> None:
    battles = _battles([(0, 1), (1, 2), (3, 2)], ("a", "b", "c", "d"))
    parts = split_components(battles)
    assert len(parts) == 1 and parts[0] is battles


def test_parts_hold_the_votes_of_their_models_coded_anew() -> None:
    # two parts, and a model ("e") that never played: it is in no part
    battles = _battles([(0, 1), (2, 3), (1, 5), (3, 2)], ("a", "b", "c", "d", "e", "f"))
    parts = split_components(battles)
    assert [p.models for p in parts] == [("a", "b", "f"), ("c", "d")]
    labels = _labels_per_vote(battles)
    for part in parts:
        first = battles.models.index(part.models[0])
        rows = np.flatnonzero(labels == labels[np.flatnonzero(battles.model_a == first)[0]])
        names = np.array(battles.models)
        np.testing.assert_array_equal(np.array(part.models)[part.model_a], names[battles.model_a[rows]])
        np.testing.assert_array_equal(np.array(part.models)[part.model_b], names[battles.model_b[rows]])
        np.testing.assert_array_equal(part.outcome, battles.outcome[rows])
        np.testing.assert_array_equal(part.time, battles.times()[rows])
    one_model_short = _battles([(0, 1), (1, 2)], ("a", "b", "c", "d"))
    (part,) = split_components(one_model_short)
    assert part.models == ("a", "b", "c") and part is not one_model_short
    none = np.zeros(0, dtype=np.int64)
    no_votes = Battles(models=("a",), model_a=none, model_b=none, outcome=none.astype(np.int8))
    assert split_components(no_votes) == []


def test_cells_are_the_same_for_narrow_and_wide_outcome_codes() -> None:
    battles = _battles([(0, 1), (1, 2), (3, 2), (2, 0)], ("a", "b", "c", "d"), repeat=50)
    sided = np.arange(len(battles)) % 3 != 0
    kwargs = {"models": battles.models, "weight": battles.weight, "time": battles.time, "sided": sided}
    narrow = aggregate_codes(battles.model_a, battles.model_b, battles.outcome, bucket_seconds=7.0, **kwargs)
    wide = aggregate_codes(
        battles.model_a, battles.model_b, battles.outcome.astype(np.int64), bucket_seconds=7.0, **kwargs
    )
    floats = aggregate_codes(
        battles.model_a, battles.model_b, battles.outcome.astype(np.float64), bucket_seconds=7.0, **kwargs
    )
    for got in (narrow, floats):
        for name in ("model_a", "model_b", "outcome", "count", "votes", "time", "sided"):
            np.testing.assert_array_equal(getattr(got, name), getattr(wide, name), err_msg=name)
    assert wide.votes is not None and int(wide.votes.sum()) == len(battles)
