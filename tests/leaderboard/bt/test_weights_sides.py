"""Weighted votes and votes with an unknown side, through aggregation, every fit, bootstrap and sandwich."""

from __future__ import annotations

import numpy as np
import pytest

from leaderboard.battles import Battles
from leaderboard.bt.bootstrap import bootstrap_ratings
from leaderboard.bt.fit import fit_bt
from leaderboard.bt.intervals import sandwich_intervals
from leaderboard.bt.spec import BTSpec
from leaderboard.data import Outcome
from leaderboard.evaluation.held_out import votes_to_counts

RATING_TOL = 1e-6
SPECS = {
    "plain": BTSpec(),
    "position": BTSpec(position="common"),
    "davidson": BTSpec(ties="davidson"),
    "prior": BTSpec(prior_sd=300.0),
}
MODELS = ("m0", "m1", "m2", "m3")


def _random_battles(n: int, seed: int) -> Battles:
    rng = np.random.default_rng(seed)
    strength = np.array([0.0, 0.4, 0.8, 1.2])
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(1, 4, n)) % 4
    p = 1.0 / (1.0 + np.exp(-(strength[a] - strength[b] + 0.3)))
    u = rng.random(n)
    outcome = np.where(u < 0.1, Outcome.TIE, np.where(u < 0.1 + 0.9 * p, Outcome.MODEL_A, Outcome.MODEL_B))
    return Battles(models=MODELS, model_a=a, model_b=b, outcome=outcome.astype(np.int8))


def _concat(*parts: Battles) -> Battles:
    def cat(name: str) -> np.ndarray | None:
        cols = [getattr(p, name) for p in parts]
        if all(c is None for c in cols):
            return None
        fill = {"weight": 1.0, "sided": True}[name]
        filled = [np.full(len(p), fill) if c is None else c for p, c in zip(parts, cols, strict=True)]
        return np.concatenate(filled)

    return Battles(
        models=MODELS,
        model_a=np.concatenate([p.model_a for p in parts]),
        model_b=np.concatenate([p.model_b for p in parts]),
        outcome=np.concatenate([p.outcome for p in parts]),
        weight=cat("weight"),
        sided=None if cat("sided") is None else np.asarray(cat("sided"), dtype=bool),
    )


@pytest.mark.parametrize("name", sorted(SPECS))
def test_weight_three_equals_the_votes_written_three_times(name: str) -> None:
    base = _random_battles(400, seed=1)
    strong = np.arange(len(base)) % 5 == 0
    weighted = Battles(
        models=MODELS,
        model_a=base.model_a,
        model_b=base.model_b,
        outcome=base.outcome,
        weight=np.where(strong, 3.0, 1.0),
    )
    repeated = _concat(base, base.take(strong), base.take(strong))
    spec = SPECS[name]
    fit_w = fit_bt(weighted.counts(), spec=spec)
    fit_r = fit_bt(repeated.counts(), spec=spec)
    np.testing.assert_allclose(fit_w.rating, fit_r.rating, atol=RATING_TOL)
    np.testing.assert_allclose(fit_w.position, fit_r.position, atol=1e-8)
    # the vote number stays that of the file: a weight is not a count of votes
    assert fit_w.n_votes == len(base)
    assert fit_r.n_votes == len(base) + 2 * int(strong.sum())


@pytest.mark.parametrize("name", ["plain", "position", "prior"])
def test_a_soft_label_is_the_hand_weighted_pair_of_wins(name: str) -> None:
    """A preference of 1.25 (a quarter of the way to the right answer) is a left win of weight 0.75 and
    a right win of weight 0.25; at 1.5 it is exactly a tie, as plain Bradley-Terry scores a tie."""
    base = _random_battles(300, seed=2)
    n_soft = 60
    a = np.tile(np.array([0, 1, 2]), n_soft // 3)
    b = np.tile(np.array([3, 2, 0]), n_soft // 3)
    pref = np.tile(np.array([1.25, 1.5, 1.9]), n_soft // 3)
    soft = Battles(
        models=MODELS,
        model_a=np.concatenate([a, a]),
        model_b=np.concatenate([b, b]),
        outcome=np.concatenate([np.full(n_soft, Outcome.MODEL_A), np.full(n_soft, Outcome.MODEL_B)]).astype(
            np.int8
        ),
        weight=np.concatenate([2.0 - pref, pref - 1.0]),
    )
    # by hand: a tie for each 1.5, and for the others win and loss written out with weights 3:1 and 1:9
    rows: list[tuple[int, int, int, float]] = []
    for i, j, p in zip(a, b, pref, strict=True):
        if p == 1.5:
            rows.append((int(i), int(j), Outcome.TIE, 1.0))
        else:
            rows.append((int(i), int(j), Outcome.MODEL_A, float(2.0 - p)))
            rows.append((int(i), int(j), Outcome.MODEL_B, float(p - 1.0)))
    hand = Battles(
        models=MODELS,
        model_a=np.array([r[0] for r in rows]),
        model_b=np.array([r[1] for r in rows]),
        outcome=np.array([r[2] for r in rows], dtype=np.int8),
        weight=np.array([r[3] for r in rows]),
    )
    spec = SPECS[name]
    fit_soft = fit_bt(_concat(base, soft).counts(), spec=spec)
    fit_hand = fit_bt(_concat(base, hand).counts(), spec=spec)
    np.testing.assert_allclose(fit_soft.rating, fit_hand.rating, atol=RATING_TOL)
    fit_unweighted = fit_bt(base.counts(), spec=spec)
    assert np.max(np.abs(fit_soft.rating - fit_unweighted.rating)) > 1.0


def test_bootstrap_and_sandwich_see_the_weights() -> None:
    base = _random_battles(500, seed=3)
    heavy = np.where(base.model_a == 0, 4.0, 1.0)
    weighted = Battles(
        models=MODELS, model_a=base.model_a, model_b=base.model_b, outcome=base.outcome, weight=heavy
    )
    for spec in (BTSpec(), BTSpec(position="common")):
        fit_w = fit_bt(weighted.counts(), spec=spec)
        fit_u = fit_bt(base.counts(), spec=spec)
        boot = bootstrap_ratings(weighted.counts(), fit=fit_w, n_rounds=40, random_state=0)
        np.testing.assert_allclose(boot.rating, fit_w.rating)
        # the rounds are centred near the weighted estimate, not the unweighted one
        centre = np.median(boot.ratings, axis=0)
        assert np.abs(centre - fit_w.rating).max() < np.abs(centre - fit_u.rating).max()
        # meat: sum over votes of weight^2 g g^T; a weight of 4 counts 16 times in it, 4 times in H
        robust = sandwich_intervals(fit=fit_w)
        unweighted = sandwich_intervals(fit=fit_u)
        assert robust.ci_high[0] - robust.ci_low[0] > unweighted.ci_high[0] - unweighted.ci_low[0]


def test_plain_and_general_sandwich_agree_with_weights() -> None:
    base = _random_battles(300, seed=4)
    w = np.where(base.outcome == Outcome.TIE, 0.5, 2.0)
    weighted = Battles(
        models=MODELS, model_a=base.model_a, model_b=base.model_b, outcome=base.outcome, weight=w
    )
    plain = sandwich_intervals(fit=fit_bt(weighted.counts()))
    general = sandwich_intervals(fit=fit_bt(weighted.counts(), spec=BTSpec(prior_sd=1e9)))
    np.testing.assert_allclose(plain.ci_low, general.ci_low, atol=1e-3)
    np.testing.assert_allclose(plain.ci_high, general.ci_high, atol=1e-3)


def test_the_position_term_does_not_learn_from_unknown_sides() -> None:
    sided = _random_battles(400, seed=5)
    unsided = _random_battles(400, seed=6)
    flip = np.arange(len(unsided)) % 2 == 0
    swapped_outcome = unsided.outcome.copy()
    swapped_outcome[flip & (unsided.outcome == Outcome.MODEL_A)] = Outcome.MODEL_B
    swapped_outcome[flip & (unsided.outcome == Outcome.MODEL_B)] = Outcome.MODEL_A
    flipped = Battles(
        models=MODELS,
        model_a=np.where(flip, unsided.model_b, unsided.model_a),
        model_b=np.where(flip, unsided.model_a, unsided.model_b),
        outcome=swapped_outcome,
    )
    no_side = np.zeros(len(unsided), dtype=bool)
    spec = BTSpec(position="common")
    as_given = fit_bt(_concat(sided, Battles(**{**unsided.__dict__, "sided": no_side})).counts(), spec=spec)
    as_flipped = fit_bt(_concat(sided, Battles(**{**flipped.__dict__, "sided": no_side})).counts(), spec=spec)
    np.testing.assert_allclose(as_given.rating, as_flipped.rating, atol=RATING_TOL)
    np.testing.assert_allclose(as_given.position, as_flipped.position, atol=1e-9)
    # with the sides believed, turning half of them round does move the advantage
    believed = fit_bt(_concat(sided, unsided).counts(), spec=spec)
    believed_flipped = fit_bt(_concat(sided, flipped).counts(), spec=spec)
    assert abs(believed.position[0] - believed_flipped.position[0]) > 0.05
    # all sides unknown: nothing to learn the advantage from, said rather than guessed
    only = Battles(**{**unsided.__dict__, "sided": no_side})
    with pytest.raises(ValueError, match="known side"):
        fit_bt(only.counts(), spec=spec)


def test_evaluation_cells_keep_weights_and_sides() -> None:
    base = _random_battles(200, seed=7)
    b = Battles(
        models=MODELS,
        model_a=base.model_a,
        model_b=base.model_b,
        outcome=base.outcome,
        time=np.arange(len(base), dtype=np.float64),
        weight=np.linspace(0.5, 2.0, len(base)),
        sided=np.arange(len(base)) % 3 != 0,
    )
    for keep_time, per_vote in ((False, False), (True, False), (True, True)):
        counts = votes_to_counts(b, keep_time=keep_time, per_vote=per_vote)
        assert b.weight is not None and b.sided is not None
        assert counts.count.sum() == pytest.approx(float(b.weight.sum()))
        assert counts.n_votes == len(b)
        assert counts.sided is not None
        assert counts.count[~counts.sided].sum() == pytest.approx(float(b.weight[~b.sided].sum()))
