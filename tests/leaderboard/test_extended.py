"""The extended BT engine: gradients, parameter recovery, the plain-BT limit, failure modes."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize
from sklearn.linear_model import LogisticRegression

from leaderboard.data import Outcome, PairCounts, aggregate_codes
from leaderboard.evaluate import Battles, simulate_battles, votes_to_counts
from leaderboard.extended import (
    ELO_PER_NAT,
    ConvergenceError,
    FitSpec,
    _layout,
    _Objective,
    bootstrap_extended,
    fit_extended,
    make_cells,
    sandwich_extended,
)

GRAD_TOL = 1e-5
TRUE = np.array([1150.0, 1080.0, 1030.0, 1000.0, 960.0, 920.0])
TRUE_CENTRED = TRUE - TRUE.mean() + 1000.0


def _counts(b: Battles) -> PairCounts:
    return aggregate_codes(b.left, b.right, b.outcome, models=b.models)


def _multinomial(seed: int):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)

    def draw(count: np.ndarray, n_rounds: int):  # type: ignore[no-untyped-def]
        for _ in range(n_rounds):
            yield rng.multinomial(int(count.sum()), count / count.sum()).astype(float)

    return draw


SPECS = [
    FitSpec(),
    FitSpec(position="common"),
    FitSpec(ties="davidson"),
    FitSpec(position="common", ties="davidson", prior_sd=150.0),
    FitSpec(position="per-model", ties="davidson"),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.position}-{s.ties}-{s.prior_sd}")
def test_gradient_and_hessian_match_finite_differences(spec: FitSpec) -> None:
    sim = simulate_battles(
        3000, TRUE, position_elo=40, nu=0.5, n_features=2, style_elo=np.array([30.0, 0.0]), random_state=3
    )
    counts = votes_to_counts(sim, keep_time=True, per_vote=True)
    cells = make_cells(counts, spec, features=sim.features, feature_names=("a", "b"), now=1.0)
    cells = cells.with_count(cells.count * (1 + np.arange(cells.count.shape[0]) % 3))
    layout = _layout(cells, spec)
    objective = _Objective(cells, spec, layout)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.normal(0, 0.5, layout.size)
        err = optimize.check_grad(
            lambda v: objective.value_grad(v)[0], lambda v: objective.value_grad(v)[1], x
        )
        assert err < GRAD_TOL
        numeric = optimize.approx_fprime(x, lambda v: objective.value_grad(v)[1], 1e-6)
        np.testing.assert_allclose(objective.hess(x), numeric, atol=1e-4)


def test_davidson_position_recovers_parameters_within_intervals() -> None:
    sim = simulate_battles(30_000, TRUE, position_elo=45.0, nu=0.6, random_state=11)
    spec = FitSpec(position="common", ties="davidson")
    cells = make_cells(_counts(sim), spec)
    fit = fit_extended(cells, spec)
    sandwich = sandwich_extended(cells, fit)
    boot = bootstrap_extended(cells, fit, resample=_multinomial(5), n_rounds=200)
    for iv in (sandwich, boot):
        pos, pos_lo, pos_hi = iv.extra["position_advantage_elo"]
        assert pos_lo < 45.0 < pos_hi
        nu, nu_lo, nu_hi = iv.extra["tie_propensity_nu"]
        assert nu_lo < 0.6 < nu_hi
        covered = (iv.rating_low < TRUE_CENTRED) & (TRUE_CENTRED < iv.rating_high)
        assert covered.sum() >= len(TRUE) - 1
    # the two kinds of interval agree on width (within 25% at 200 rounds)
    np.testing.assert_allclose(
        boot.rating_high - boot.rating_low, sandwich.rating_high - sandwich.rating_low, rtol=0.25
    )


def test_per_model_position_and_style_coefficients_are_recovered() -> None:
    style = np.array([60.0, -25.0])
    sim = simulate_battles(
        30_000, TRUE, position_elo=30.0, nu=0.4, n_features=2, style_elo=style, random_state=4
    )
    spec = FitSpec(position="per-model", ties="davidson")
    cells = make_cells(
        votes_to_counts(sim, keep_time=False, per_vote=True),
        spec,
        features=sim.features,
        feature_names=("len", "md"),
    )
    fit = fit_extended(cells, spec)
    iv = sandwich_extended(cells, fit)
    for name, truth in (("style_len_elo", 60.0), ("style_md_elo", -25.0)):
        _, lo, hi = iv.extra[name]
        assert lo < truth < hi
    inside = [
        lo < 30.0 < hi for k, (_, lo, hi) in iv.extra.items() if k.startswith("position_advantage_elo:")
    ]
    assert sum(inside) >= len(TRUE) - 1
    covered = (iv.rating_low < TRUE_CENTRED) & (TRUE_CENTRED < iv.rating_high)
    assert covered.sum() >= len(TRUE) - 1


def _sklearn_bt(counts: PairCounts) -> np.ndarray:
    """The plain, obvious BT: logistic regression on rows, a win weighing 2, a tie 1 for each side."""
    n = counts.n_models
    rows, ys, ws = [], [], []
    for a, b, o, c in zip(counts.model_a, counts.model_b, counts.outcome, counts.count, strict=True):
        x = np.zeros(n)
        x[a], x[b] = np.log(10), -np.log(10)
        if o in (Outcome.MODEL_A, Outcome.MODEL_B):
            rows.append(x)
            ys.append(1 if o == Outcome.MODEL_A else 0)
            ws.append(2 * c)
        else:
            rows += [x, x]
            ys += [1, 0]
            ws += [c, c]
    lr = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-10, max_iter=1000)
    lr.fit(np.array(rows), np.array(ys), sample_weight=np.array(ws))
    coef = lr.coef_[0]
    rating: np.ndarray = 400 * (coef - coef.mean()) + 1000
    return rating


def test_davidson_reduces_to_plain_bt_as_nu_goes_to_zero() -> None:
    sim = simulate_battles(8000, TRUE, nu=0.5, random_state=7)
    counts = _counts(sim)
    reference = _sklearn_bt(counts)
    plain = fit_extended(make_cells(counts, FitSpec()), FitSpec())
    np.testing.assert_allclose(plain.rating, reference, atol=1e-3)
    gaps = []
    for nu in (1e-2, 1e-4, 1e-8):
        spec = FitSpec(ties="davidson", nu_fixed=nu)
        gaps.append(np.max(np.abs(fit_extended(make_cells(counts, spec), spec).rating - reference)))
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 1e-3


def test_time_weights_track_a_model_that_changed() -> None:
    after = TRUE.copy()
    after[5] = 1200.0  # the weakest model got an update and became the best
    sim = simulate_battles(30_000, TRUE, nu=0.4, change_at=0.5, ratings_after=after, random_state=2)
    after_centred = after - after.mean() + 1000.0
    for half_life, expect_cover in ((0.08, True), (None, False)):
        spec = FitSpec(ties="davidson", half_life=half_life)
        cells = make_cells(votes_to_counts(sim, keep_time=True, per_vote=False), spec, now=1.0)
        fit = fit_extended(cells, spec)
        iv = sandwich_extended(cells, fit)
        covered = (iv.rating_low < after_centred) & (after_centred < iv.rating_high)
        if expect_cover:
            assert covered.sum() >= len(TRUE) - 1
        else:
            assert not covered[5]


def test_prior_shrinks_a_thin_model_and_vanishes_when_weak() -> None:
    sim = simulate_battles(6000, TRUE, nu=0.4, random_state=9)
    # a newcomer that won its only three votes
    newcomer = Battles(
        models=(*sim.models, "new"),
        left=np.array([6, 6, 6]),
        right=np.array([0, 1, 2]),
        outcome=np.array([0, 0, 0]),
    )
    both = Battles(
        models=newcomer.models,
        left=np.concatenate([sim.left, newcomer.left]),
        right=np.concatenate([sim.right, newcomer.right]),
        outcome=np.concatenate([sim.outcome, newcomer.outcome]),
    )
    counts = _counts(both)
    with pytest.raises(ConvergenceError):
        fit_extended(make_cells(counts, FitSpec(ties="davidson")), FitSpec(ties="davidson"))
    shrunk = fit_extended(
        make_cells(counts, FitSpec(ties="davidson", prior_sd=150.0)), FitSpec(ties="davidson", prior_sd=150.0)
    )
    assert 1000 < shrunk.rating[6] < 1400
    base = fit_extended(make_cells(_counts(sim), FitSpec(ties="davidson")), FitSpec(ties="davidson"))
    weak = fit_extended(
        make_cells(_counts(sim), FitSpec(ties="davidson", prior_sd=1e6)),
        FitSpec(ties="davidson", prior_sd=1e6),
    )
    np.testing.assert_allclose(weak.rating, base.rating, atol=1e-3)


def test_both_bad_as_tie_or_excluded() -> None:
    counts = aggregate_codes(
        np.array([0, 0, 1, 1, 2, 0]),
        np.array([1, 2, 2, 0, 0, 1]),
        np.array([0, 3, 0, 2, 1, 1]),
        models=("a", "b", "c"),
    )
    tie = make_cells(counts, FitSpec())
    excluded = make_cells(counts, FitSpec(both_bad="exclude"))
    assert tie.count.sum() == 6 and excluded.count.sum() == 5
    assert (tie.outcome == Outcome.TIE).sum() == 2


def test_failures_raise() -> None:
    no_ties = aggregate_codes(
        np.array([0, 1, 2]), np.array([1, 2, 0]), np.array([0, 0, 1]), models=("a", "b", "c")
    )
    with pytest.raises(ValueError, match="tie"):
        fit_extended(make_cells(no_ties, FitSpec(ties="davidson")), FitSpec(ties="davidson"))
    sim = simulate_battles(500, TRUE[:3], nu=0.4, random_state=1)
    cells = make_cells(_counts(sim), FitSpec(ties="davidson"))
    with pytest.raises(ConvergenceError):
        fit_extended(cells, FitSpec(ties="davidson"), max_iter=1)
    with pytest.raises(ValueError):
        FitSpec(position="left")  # type: ignore[arg-type]


def test_anchor_shifts_ratings_and_intervals() -> None:
    sim = simulate_battles(5000, TRUE, nu=0.4, random_state=5)
    spec = FitSpec(ties="davidson")
    cells = make_cells(_counts(sim), spec)
    fit = fit_extended(cells, spec)
    iv = sandwich_extended(cells, fit, anchor=2, anchor_rating=1200.0)
    assert iv.rating[2] == pytest.approx(1200.0)
    assert iv.rating_high[2] - iv.rating_low[2] == pytest.approx(0.0, abs=1e-6)
    np.testing.assert_allclose(iv.rating - iv.rating[0], fit.rating - fit.rating[0], atol=1e-9)
    assert ELO_PER_NAT == pytest.approx(173.7177927613)


def test_registered_methods_fill_a_leaderboard_and_plain_bt_matches_issue3() -> None:
    from leaderboard import compute_leaderboard
    from leaderboard.extended import compute_extended

    sim = simulate_battles(6000, TRUE, position_elo=50.0, nu=0.5, random_state=12)
    counts = _counts(sim)
    board = compute_leaderboard(counts, method="davidson-position", n_rounds=100, random_state=3)
    fitted = board.parameters_fitted
    assert set(fitted) == {"position_advantage_elo", "tie_propensity_nu"}
    assert fitted["position_advantage_elo"]["ci_low"] < 50.0 < fitted["position_advantage_elo"]["ci_high"]
    assert board.method == "davidson-position" and board.rank_low.min() == 1
    again = compute_leaderboard(counts, method="davidson-position", n_rounds=100, random_state=3)
    np.testing.assert_array_equal(board.ci_low, again.ci_low)
    # plain BT through this engine equals the issue-3 fit, point and sandwich intervals
    ours = compute_extended(counts, method="bt", interval="sandwich")
    theirs = compute_leaderboard(counts, method="bt", interval="sandwich")
    np.testing.assert_allclose(ours.rating, theirs.rating, atol=1e-6)
    np.testing.assert_allclose(ours.ci_high - ours.ci_low, theirs.ci_high - theirs.ci_low, rtol=1e-6)
    with pytest.raises(ValueError, match="options"):
        compute_leaderboard(counts, method="davidson", colour="red")


def test_both_bad_rates_are_reported_per_model() -> None:
    from leaderboard.extended import compute_extended

    sim = simulate_battles(3000, TRUE, nu=0.5, random_state=13)
    outcome = sim.outcome.copy()
    worst = (sim.left == 5) | (sim.right == 5)
    flip = worst & (outcome == Outcome.TIE)
    outcome[flip] = Outcome.BOTHBAD
    counts = aggregate_codes(sim.left, sim.right, outcome, models=sim.models)
    board = compute_extended(counts, method="davidson", interval="sandwich")
    rates = {k.split(":")[1]: v for k, v in board.parameters_fitted.items() if k.startswith("both_bad_rate:")}
    assert rates[sim.models[5]]["value"] > 0.1
    assert rates[sim.models[0]]["value"] < rates[sim.models[5]]["value"]
    assert rates[sim.models[5]]["ci_low"] < rates[sim.models[5]]["value"] < rates[sim.models[5]]["ci_high"]
    excluded = compute_extended(counts, method="davidson", interval="none", both_bad="exclude")
    assert excluded.n_votes == board.n_votes
