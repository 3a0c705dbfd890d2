"""The default ``optimal`` pairing policy: a newcomer is sampled first, every pair keeps the floor, the
logged probability is the drawn pair's, and ratings are read on their rater's scale."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from arena.settings import Settings
from arena.voting.pairing import choose_battle, optimal_design, pair_weights
from tests.arena.voting.test_pairing_markdown import catalog


def _settled_counts(ids: list[int], n: int) -> dict[tuple[int, int], int]:
    return {(a, b): n for i, a in enumerate(ids) for b in ids[i + 1 :]}


def test_default_policy_is_optimal() -> None:
    assert Settings.model_fields["pairing_policy"].default == "optimal"


def test_newcomer_gets_most_votes_and_every_pair_keeps_the_floor() -> None:
    old = [1, 2, 3, 4, 5]
    ratings = {m: 1000.0 + 30 * m for m in old}
    design = optimal_design(
        [*old, 6], counts=_settled_counts(old, 400), ratings=ratings, system="elo", floor=0.1
    )
    assert sum(design.values()) == pytest.approx(1.0)
    newcomer = sum(p for pair, p in design.items() if 6 in pair)
    assert newcomer > 0.8
    assert min(design.values()) >= 0.1 / len(design) - 1e-12


def test_trueskill_ratings_are_read_on_their_scale() -> None:
    ids = [1, 2, 3, 4]
    counts = _settled_counts(ids, 50)
    # The same forecasts on both scales: a gap of 100 Elo against its TrueSkill equivalent.
    elo = optimal_design(ids, counts=counts, ratings={1: 1000, 2: 1100, 3: 1200, 4: 1300}, system="elo")
    per_elo = 0.00576 / 0.2888  # natural-log units per point: Elo, TrueSkill (25/6 beta)
    ts = {1: 25.0, 2: 25 + 100 * per_elo, 3: 25 + 200 * per_elo, 4: 25 + 300 * per_elo}
    trueskill = optimal_design(ids, counts=counts, ratings=ts, system="trueskill")
    naive = optimal_design(ids, counts=counts, ratings=ts, system="elo")  # TrueSkill read as Elo points
    gap = max(abs(elo[p] - trueskill[p]) for p in elo)
    assert gap < 0.03
    assert max(abs(elo[p] - naive[p]) for p in elo) > 3 * gap


def test_choose_battle_logs_the_design_probability_and_explores_unknown_pairs() -> None:
    cat = catalog(n_prompts=4, models=(1, 2, 3))
    design = {(1, 2): 0.8, (1, 3): 0.1}  # (2, 3) unknown: weighted like the largest
    weights = pair_weights([(1, 2), (1, 3), (2, 3)], policy="optimal", counts={}, design=design)
    assert weights == [0.8, 0.1, 0.8]
    rng = random.Random(3)
    picks: Counter[tuple[int, int]] = Counter()
    for _ in range(400):
        choice = choose_battle(cat, policy="optimal", counts={}, seen=set(), rng=rng, design=design)
        assert choice is not None
        pair = (
            min(choice.output_a.model_id, choice.output_b.model_id),
            max(choice.output_a.model_id, choice.output_b.model_id),
        )
        assert choice.pair_probability == pytest.approx(weights[[(1, 2), (1, 3), (2, 3)].index(pair)] / 1.7)
        picks[pair] += 1
    assert picks[(1, 3)] < picks[(1, 2)] / 3
    assert pair_weights([(1, 2)], policy="optimal", counts={}, design={}) == [1.0]
