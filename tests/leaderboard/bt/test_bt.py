"""Bradley-Terry: aggregated == per-vote fit, sklearn == Newton, properties, errors; the whole family."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression

from leaderboard import (
    BTSpec,
    DisconnectedComparisonError,
    NonConvergenceError,
    Outcome,
    PairCounts,
    UnboundedRatingWarning,
    aggregate_battles,
    aggregate_codes,
    bootstrap_ratings,
    fit_bt,
    sandwich_intervals,
    simulate_battles,
)
from leaderboard.battles import Battles
from leaderboard.evaluation.held_out import votes_to_counts

ELO_TOL = 1e-6


def _per_vote_fit(sim_a: np.ndarray, sim_b: np.ndarray, out: np.ndarray, m: int) -> np.ndarray:
    """The notebook way: one design row per vote (a tie is two rows of weight 1), no aggregation."""
    rows, ys, ws = [], [], []
    for a, b, o in zip(sim_a, sim_b, out, strict=True):
        x = np.zeros(m)
        x[a], x[b] = math.log(10), -math.log(10)
        if o in (Outcome.MODEL_A, Outcome.MODEL_B):
            rows.append(x)
            ys.append(1 if o == Outcome.MODEL_A else 0)
            ws.append(2.0)
        else:
            rows += [x, x]
            ys += [1, 0]
            ws += [1.0, 1.0]
    # last model's column dropped (its coefficient is 0), so Newton's method sees a regular problem
    clf = LogisticRegression(C=np.inf, fit_intercept=False, solver="newton-cholesky", tol=1e-14, max_iter=100)
    clf.fit(np.array(rows)[:, :-1], np.array(ys), sample_weight=np.array(ws))
    full = np.append(clf.coef_[0], 0.0)
    coef = full - full.mean()
    ratings: np.ndarray = 400 * coef + 1000
    return ratings


def test_aggregated_fit_equals_per_vote_fit() -> None:
    sim = simulate_battles(np.linspace(900, 1150, 6), 1500, random_state=11, tie_rate=0.2)
    fit = fit_bt(sim.counts())
    ref = _per_vote_fit(sim.model_a, sim.model_b, sim.outcome, 6)
    assert np.max(np.abs(fit.rating - ref)) < ELO_TOL


def test_sklearn_alone_agrees_with_polished_newton() -> None:
    sim = simulate_battles(
        np.random.default_rng(2).normal(1000, 80, 20), 20_000, random_state=3, tie_rate=0.1
    )
    polished = fit_bt(sim.counts())
    raw = fit_bt(sim.counts(), polish=False)
    assert polished.solver.endswith("newton") and raw.solver == "sklearn-lbfgs"
    assert np.max(np.abs(polished.rating - raw.rating)) < 1e-2
    # the polished optimum has a zero gradient
    assert abs(polished.rating.mean() - 1000) < 1e-9


def test_recovers_truth_and_anchor() -> None:
    truth = np.array([800.0, 1000.0, 1100.0, 1300.0])
    sim = simulate_battles(truth, 200_000, random_state=5)
    fit = fit_bt(sim.counts(), anchor=("model-001", 1000.0))
    assert fit.rating[1] == pytest.approx(1000.0)
    assert np.max(np.abs(fit.rating - truth)) < 10


votes = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 4), st.sampled_from([0, 1, 2, 3])).filter(
        lambda v: v[0] != v[1]
    ),
    min_size=30,
    max_size=80,
)
BASE = [(i, j, o) for i in range(5) for j in range(5) if i != j for o in (0, 1)]  # keeps the MLE finite


@settings(max_examples=25, deadline=None)
@given(votes, st.permutations(range(5)))
def test_relabelling_permutes_ratings(extra: list[tuple[int, int, int]], perm: list[int]) -> None:
    data = np.array(BASE + extra)
    names = [f"m{k}" for k in range(5)]
    c1 = aggregate_codes(data[:, 0], data[:, 1], data[:, 2], models=names)
    p = np.array(perm)
    c2 = aggregate_codes(p[data[:, 0]], p[data[:, 1]], data[:, 2], models=names)
    r1, r2 = fit_bt(c1).rating, fit_bt(c2).rating
    assert np.allclose(r2[p], r1, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(votes, st.integers(0, 4), st.integers(0, 3))
def test_adding_a_win_never_lowers_rating(extra: list[tuple[int, int, int]], winner: int, shift: int) -> None:
    data = BASE + extra
    loser = (winner + 1 + shift) % 5
    names = [f"m{k}" for k in range(5)]
    arr = np.array(data)
    before = fit_bt(aggregate_codes(arr[:, 0], arr[:, 1], arr[:, 2], models=names)).rating[winner]
    arr2 = np.array([*data, (winner, loser, 0)])
    after = fit_bt(aggregate_codes(arr2[:, 0], arr2[:, 1], arr2[:, 2], models=names)).rating[winner]
    assert after >= before - 1e-9


def test_disconnected_raises() -> None:
    c = aggregate_battles(
        ["a", "c", "a", "c"], ["b", "d", "b", "d"], ["model_a", "model_a", "model_b", "model_b"]
    )
    with pytest.raises(DisconnectedComparisonError, match="2 parts"):
        fit_bt(c)


def test_only_wins_warns_or_raises() -> None:
    a = ["a", "b", "a", "b", "c"]
    b = ["b", "a", "c", "c", "b"]
    w = ["model_a", "model_b", "model_a", "model_a", "model_a"]  # a beats everyone; b and c trade wins
    c = aggregate_battles(a, b, w)
    with pytest.warns(UnboundedRatingWarning, match="a"):
        fit = fit_bt(c)
    assert fit.unbounded == ("a",) and np.all(np.isfinite(fit.rating)) and fit.ridge > 0
    with pytest.raises(DisconnectedComparisonError):
        fit_bt(c, on_unbounded="raise")


def test_non_convergence_raises() -> None:
    sim = simulate_battles(np.linspace(700, 1400, 12), 5000, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(NonConvergenceError):
            fit_bt(sim.counts(), max_iter=1, polish=False)
        with pytest.raises(NonConvergenceError):
            fit_bt(sim.counts(), max_iter=1, polish=True)


# ----------------------------------------------------------------------------------------------------------
# The rest of the family: position, Davidson ties, time weights, a prior, style covariates

FAMILY_TRUE = np.array([1150.0, 1080.0, 1030.0, 1000.0, 960.0, 920.0])
FAMILY_CENTRED = FAMILY_TRUE - FAMILY_TRUE.mean() + 1000.0


def _votes_counts(b: Battles) -> PairCounts:
    return aggregate_codes(b.model_a, b.model_b, b.outcome, models=b.models)


def test_davidson_position_recovers_parameters_within_intervals() -> None:
    sim = simulate_battles(FAMILY_TRUE, 30_000, position=45.0, nu=0.6, random_state=11)
    counts = _votes_counts(sim)
    fit = fit_bt(counts, spec=BTSpec(position="common", ties="davidson"))
    sandwich = sandwich_intervals(fit=fit)
    boot = bootstrap_ratings(counts, fit=fit, n_rounds=200, random_state=5)
    for iv in (sandwich, boot):
        pos, pos_lo, pos_hi = iv.extra["position_advantage_elo"]
        assert pos_lo < 45.0 < pos_hi
        nu, nu_lo, nu_hi = iv.extra["tie_propensity_nu"]
        assert nu_lo < 0.6 < nu_hi
        covered = (iv.ci_low < FAMILY_CENTRED) & (FAMILY_CENTRED < iv.ci_high)
        assert covered.sum() >= len(FAMILY_TRUE) - 1
    # the two kinds of interval agree on width (within 25% at 200 rounds)
    np.testing.assert_allclose(boot.ci_high - boot.ci_low, sandwich.ci_high - sandwich.ci_low, rtol=0.25)


def test_per_model_position_and_style_coefficients_are_recovered() -> None:
    style = np.array([60.0, -25.0])
    sim = simulate_battles(
        FAMILY_TRUE, 30_000, position=30.0, nu=0.4, n_features=2, style=style, random_state=4
    )
    spec = BTSpec(position="per-model", ties="davidson", features=sim.features, feature_names=("len", "md"))
    fit = fit_bt(votes_to_counts(sim, keep_time=False, per_vote=True), spec=spec)
    iv = sandwich_intervals(fit=fit)
    for name, truth in (("style_len_elo", 60.0), ("style_md_elo", -25.0)):
        _, lo, hi = iv.extra[name]
        assert lo < truth < hi
    inside = [
        lo < 30.0 < hi for k, (_, lo, hi) in iv.extra.items() if k.startswith("position_advantage_elo:")
    ]
    assert sum(inside) >= len(FAMILY_TRUE) - 1
    covered = (iv.ci_low < FAMILY_CENTRED) & (FAMILY_CENTRED < iv.ci_high)
    assert covered.sum() >= len(FAMILY_TRUE) - 1


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
    sim = simulate_battles(FAMILY_TRUE, 8000, nu=0.5, random_state=7)
    counts = _votes_counts(sim)  # no both-bad votes, so excluding them changes nothing but the path
    reference = _sklearn_bt(counts)
    plain = fit_bt(counts, spec=BTSpec(both_bad="exclude"))
    assert plain.solver == "trust-exact"  # the general path, on the cells
    np.testing.assert_allclose(plain.rating, reference, atol=1e-3)
    gaps = []
    for nu in (1e-2, 1e-4, 1e-8):
        spec = BTSpec(ties="davidson", nu_fixed=nu)
        gaps.append(np.max(np.abs(fit_bt(counts, spec=spec).rating - reference)))
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 1e-3


def test_time_weights_track_a_model_that_changed() -> None:
    after = FAMILY_TRUE.copy()
    after[5] = 1200.0  # the weakest model got an update and became the best
    sim = simulate_battles(FAMILY_TRUE, 30_000, nu=0.4, change_at=0.5, ratings_after=after, random_state=0)
    after_centred = after - after.mean() + 1000.0
    for half_life, expect_cover in ((0.08, True), (None, False)):
        spec = BTSpec(ties="davidson", half_life=half_life, now=1.0)
        fit = fit_bt(votes_to_counts(sim, keep_time=True, per_vote=False), spec=spec)
        iv = sandwich_intervals(fit=fit)
        covered = (iv.ci_low < after_centred) & (after_centred < iv.ci_high)
        if expect_cover:
            assert covered.sum() >= len(FAMILY_TRUE) - 1
        else:
            assert not covered[5]


def test_prior_shrinks_a_thin_model_and_vanishes_when_weak() -> None:
    sim = simulate_battles(FAMILY_TRUE, 6000, nu=0.4, random_state=9)
    # a newcomer that won its only three votes
    newcomer = Battles(
        models=(*sim.models, "new"),
        model_a=np.array([6, 6, 6]),
        model_b=np.array([0, 1, 2]),
        outcome=np.array([0, 0, 0]),
    )
    both = Battles(
        models=newcomer.models,
        model_a=np.concatenate([sim.model_a, newcomer.model_a]),
        model_b=np.concatenate([sim.model_b, newcomer.model_b]),
        outcome=np.concatenate([sim.outcome, newcomer.outcome]),
    )
    counts = _votes_counts(both)
    with pytest.raises(NonConvergenceError):
        fit_bt(counts, spec=BTSpec(ties="davidson"))
    shrunk = fit_bt(counts, spec=BTSpec(ties="davidson", prior_sd=150.0))
    assert 1000 < shrunk.rating[6] < 1400
    base = fit_bt(_votes_counts(sim), spec=BTSpec(ties="davidson"))
    weak = fit_bt(_votes_counts(sim), spec=BTSpec(ties="davidson", prior_sd=1e6))
    np.testing.assert_allclose(weak.rating, base.rating, atol=1e-3)


def test_family_failures_raise() -> None:
    no_ties = aggregate_codes(
        np.array([0, 1, 2]), np.array([1, 2, 0]), np.array([0, 0, 1]), models=("a", "b", "c")
    )
    with pytest.raises(ValueError, match="tie"):
        fit_bt(no_ties, spec=BTSpec(ties="davidson"))
    sim = simulate_battles(FAMILY_TRUE[:3], 500, nu=0.4, random_state=1)
    with pytest.raises(NonConvergenceError):
        fit_bt(_votes_counts(sim), spec=BTSpec(ties="davidson"), max_iter=1)
    with pytest.raises(ValueError):
        BTSpec(position="left")  # type: ignore[arg-type]


def test_anchor_shifts_family_ratings_and_intervals() -> None:
    sim = simulate_battles(FAMILY_TRUE, 5000, nu=0.4, random_state=5)
    fit = fit_bt(_votes_counts(sim), spec=BTSpec(ties="davidson"))
    iv = sandwich_intervals(fit=fit, anchor=(sim.models[2], 1200.0))
    assert iv.rating[2] == pytest.approx(1200.0)
    assert iv.ci_high[2] - iv.ci_low[2] == pytest.approx(0.0, abs=1e-6)
    np.testing.assert_allclose(iv.rating - iv.rating[0], fit.rating - fit.rating[0], atol=1e-9)
    assert fit.scale / math.log(fit.base) == pytest.approx(173.7177927613)


def test_rating_scale_is_a_parameter_of_every_path() -> None:
    sim = simulate_battles(FAMILY_TRUE, 5000, position=30.0, nu=0.4, random_state=6)
    counts = _votes_counts(sim)
    for spec in (BTSpec(), BTSpec(position="common", ties="davidson")):
        elo = fit_bt(counts, spec=spec)
        nat = fit_bt(counts, spec=spec, scale=1.0, base=math.e, initial=0.0)
        np.testing.assert_allclose(nat.rating, (elo.rating - 1000.0) * math.log(10) / 400, atol=1e-6)
        for name, value in elo.extras_of(elo.x).items():
            other = nat.extras_of(nat.x)[name]
            assert other == pytest.approx(value if "nu" in name else value * math.log(10) / 400, rel=1e-5)


# ----------------------------------------------------------------------------------------------------------
# Golden cases: small data with answers known independently of this code (see each file's derivation)

GOLDEN = sorted((Path(__file__).parent / "golden").glob("bt_*.json"))


def test_golden_cases_are_found() -> None:
    assert {p.stem for p in GOLDEN} >= {"bt_cycle3", "bt_davidson_two_models", "bt_wikipedia_four_teams"}


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_case(path: Path) -> None:
    case = json.loads(path.read_text(encoding="utf-8"))
    rows = case["battles"]
    counts = aggregate_battles(
        np.repeat([r[0] for r in rows], [r[3] for r in rows]),
        np.repeat([r[1] for r in rows], [r[3] for r in rows]),
        np.repeat([r[2] for r in rows], [r[3] for r in rows]),
        models=case["models"],
    )
    log_strength = 400.0 * np.log10(np.asarray(case["expected_strength"], dtype=float))
    expected = log_strength - log_strength.mean() + 1000.0
    spec = BTSpec(**case["spec"])
    # the plain spec also runs the general path (excluding both-bad votes, of which there are none)
    specs = [spec, BTSpec(both_bad="exclude")] if spec.is_plain else [spec]
    for each in specs:
        fit = fit_bt(counts, spec=each)
        np.testing.assert_allclose(fit.rating, expected, atol=case["rating_tolerance"])
        if "expected_nu" in case:
            assert fit.nu == pytest.approx(case["expected_nu"], rel=1e-6)


def test_a_prior_puts_a_disconnected_field_on_one_scale() -> None:
    # {a, b} and {c, d} never met: without a prior there is no common scale, with one the MAP exists
    counts = aggregate_codes(
        np.array([0, 1, 0, 2, 3, 2]),
        np.array([1, 0, 1, 3, 2, 3]),
        np.array([0, 1, 0, 0, 1, 2]),
        models=tuple("abcd"),
    )
    with pytest.raises(DisconnectedComparisonError):
        fit_bt(counts, spec=BTSpec(ties="davidson"))
    fit = fit_bt(counts, spec=BTSpec(ties="davidson", prior_sd=200.0))
    assert fit.rating[0] > fit.rating[1] and fit.rating[2] > fit.rating[3]
    assert abs(fit.rating.mean() - 1000.0) < 1e-9
    idle = aggregate_codes(np.array([0, 1]), np.array([1, 0]), np.array([0, 2]), models=tuple("abc"))
    with pytest.raises(DisconnectedComparisonError, match="without any battle"):
        fit_bt(idle, spec=BTSpec(ties="davidson", prior_sd=200.0))
