"""The probit link of the one engine: Thurstone-Mosteller and Glenn-David ties beside Bradley-Terry."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from scipy.special import ndtr

from leaderboard.battles import Battles
from leaderboard.bt.cells import Layout, Objective, make_cells
from leaderboard.bt.compute import compute_leaderboard
from leaderboard.bt.fit import fit_bt, predict_proba
from leaderboard.bt.probit import PROBIT_NATS, probit_proba, probit_row_terms
from leaderboard.bt.request import FitRequest
from leaderboard.bt.spec import BTSpec
from leaderboard.data import PairCounts, aggregate_codes
from leaderboard.evaluation.simulate import simulate_battles

FD_TOL = 1e-5
TRUE = np.array([1000.0, 1150.0, 1300.0, 900.0, 1050.0, 1500.0])


def _counts(b: Battles) -> PairCounts:
    return aggregate_codes(b.model_a, b.model_b, b.outcome, models=b.models)


@pytest.mark.parametrize(
    "spec",
    [
        BTSpec(link="probit"),
        BTSpec(link="probit", position="common"),
        BTSpec(link="probit", ties="glenn-david"),
        BTSpec(link="probit", ties="glenn-david", position="per-model", prior_sd=150.0),
    ],
)
def test_probit_gradient_and_hessian_match_finite_differences(spec: BTSpec) -> None:
    b = simulate_battles(TRUE[:4], 800, link="probit", tau=0.3, position=20.0, random_state=3)
    cells = make_cells(_counts(b), spec)
    layout = Layout.of(spec, 4)
    objective = Objective(cells, spec, layout, nat_per_point=math.log(10) / 400)
    x = np.random.default_rng(0).normal(scale=0.5, size=layout.size)
    _, grad = objective.value_grad(x)
    numeric = approx_fprime(x, lambda y: objective.value_grad(y)[0], 1e-7)
    assert np.allclose(grad, numeric, atol=FD_TOL)
    hess = objective.hess(x)
    numeric_h = np.array(
        [approx_fprime(x, lambda y, k=k: objective.value_grad(y)[1][k], 1e-7) for k in range(x.size)]
    )
    assert np.allclose(hess, numeric_h, atol=FD_TOL)


def test_probit_rows_are_the_plain_normal_probabilities() -> None:
    u = np.array([-40.0, -3.0, -0.2, 0.0, 0.7, 5.0, 40.0])
    z = u / PROBIT_NATS
    tau = 0.4
    proba = probit_proba(u, math.log(tau))
    assert np.allclose(proba.sum(axis=1), 1.0)
    assert np.allclose(proba[:, 0], ndtr(z - tau)) and np.allclose(proba[:, 2], ndtr(-z - tau))
    moderate = np.abs(z) < 5
    assert np.allclose(proba[moderate, 1], ndtr(z + tau)[moderate] - ndtr(z - tau)[moderate])
    assert np.all(proba[:, 1] > 0)  # no underflow to zero in the tails
    sign = np.array([1.0, -1.0, 0.0])
    tie = np.array([0.0, 0.0, 1.0])
    for k in range(u.size):
        uu = np.full(3, u[k])
        ll = probit_row_terms(uu, sign, tie, math.log(tau))[0]
        assert np.allclose(np.exp(ll), proba[k, [0, 2, 1]], rtol=1e-9, atol=0)
    # without a threshold a tie scores half a win and half a loss
    ll_half = probit_row_terms(u, np.zeros_like(u), np.ones_like(u), None)[0]
    assert np.all(np.isfinite(ll_half))
    assert np.allclose(ll_half[moderate], 0.5 * (np.log(ndtr(z)) + np.log(ndtr(-z)))[moderate])


def test_glenn_david_recovers_ratings_threshold_and_position() -> None:
    b = simulate_battles(TRUE, 40_000, link="probit", tau=0.35, position=40.0, random_state=5)
    fit = fit_bt(_counts(b), spec=BTSpec(link="probit", ties="glenn-david", position="common"))
    centred = TRUE - TRUE.mean() + 1000.0
    assert np.max(np.abs(fit.rating - centred)) < 15.0
    extras = fit.extras_of(fit.x)
    assert extras["tie_threshold_tau"] == pytest.approx(0.35, abs=0.02)
    assert extras["position_advantage_elo"] == pytest.approx(40.0, abs=8.0)
    proba = predict_proba(fit, b.model_a[:5], b.model_b[:5])
    assert np.allclose(proba.sum(axis=1), 1.0)


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_tm_and_bt_rank_alike_on_data_from_either_model(link: str) -> None:
    b = simulate_battles(TRUE, 20_000, link=link, random_state=11)  # type: ignore[arg-type]
    counts = _counts(b)
    bt = fit_bt(counts)
    tm = fit_bt(counts, spec=BTSpec(link="probit"))
    assert np.argsort(bt.rating).tolist() == np.argsort(tm.rating).tolist() == np.argsort(TRUE).tolist()


@pytest.mark.parametrize(
    ("link", "tau", "nu", "logit_spec", "probit_spec"),
    [
        ("logit", 0.0, 0.0, BTSpec(), BTSpec(link="probit")),
        ("probit", 0.0, 0.0, BTSpec(), BTSpec(link="probit")),
        ("logit", 0.0, 0.6, BTSpec(ties="davidson"), BTSpec(link="probit", ties="glenn-david")),
        ("probit", 0.3, 0.0, BTSpec(ties="davidson"), BTSpec(link="probit", ties="glenn-david")),
    ],
)
def test_aic_picks_the_generating_link(
    link: str, tau: float, nu: float, logit_spec: BTSpec, probit_spec: BTSpec
) -> None:
    # a wide field, so that the tails (where the two curves differ) carry many votes
    wide = np.linspace(700.0, 1700.0, 8)
    b = simulate_battles(wide, 60_000, link=link, tau=tau, nu=nu, random_state=7)  # type: ignore[arg-type]
    counts = _counts(b)
    fits = {"logit": fit_bt(counts, spec=logit_spec), "probit": fit_bt(counts, spec=probit_spec)}
    aic = {k: 2 * f.n_params - 2 * f.log_likelihood for k, f in fits.items()}
    assert fits["logit"].n_params == fits["probit"].n_params
    assert min(aic, key=aic.__getitem__) == link


def test_probit_methods_run_through_the_sandwich_and_the_bootstrap() -> None:
    b = simulate_battles(TRUE[:4], 3000, link="probit", tau=0.3, position=30.0, random_state=2)
    counts = _counts(b)
    for interval in ("sandwich", "bootstrap"):
        lb = compute_leaderboard(
            counts, FitRequest(method="glenn-david-position", interval=interval, n_rounds=40, random_state=1)
        )
        assert np.all(lb.ci_low <= lb.rating) and np.all(lb.rating <= lb.ci_high)
        assert np.all(lb.ci_high - lb.ci_low > 0)
        tau = lb.parameters_fitted["tie_threshold_tau"]
        assert tau["ci_low"] < 0.3 < tau["ci_high"]
    tm = compute_leaderboard(counts, FitRequest(method="tm", interval="sandwich"))
    assert tm.method == "tm" and np.all(tm.ci_high > tm.ci_low)


def test_thurstone_mosteller_forecasts_ties_at_the_tie_rate_and_splits_the_rest_by_phi() -> None:
    b = simulate_battles(TRUE[:4], 2000, link="probit", tau=0.3, random_state=8)
    counts = _counts(b)
    fit = fit_bt(counts, spec=BTSpec(link="probit"))
    left, right = np.array([0, 3, 2]), np.array([1, 0, 1])
    z = (fit.theta[left] - fit.theta[right]) / PROBIT_NATS
    rate = float(np.mean(b.outcome >= 2))
    expected = np.column_stack([(1 - rate) * ndtr(z), np.full(3, rate), (1 - rate) * ndtr(-z)])
    assert np.allclose(predict_proba(fit, left, right), expected)
    no_ties = aggregate_codes(b.model_a, b.model_b, np.where(b.outcome >= 2, 0, b.outcome), models=b.models)
    with pytest.raises(ValueError, match="tie"):
        fit_bt(no_ties, spec=BTSpec(link="probit", ties="glenn-david"))


def test_spec_refuses_a_tie_model_of_the_other_link() -> None:
    with pytest.raises(ValueError, match="logit"):
        BTSpec(link="probit", ties="davidson")
    with pytest.raises(ValueError, match="probit"):
        BTSpec(ties="glenn-david")
    with pytest.raises(ValueError, match="link"):
        BTSpec(link="cauchit")  # type: ignore[arg-type]
    assert not BTSpec(link="probit").is_plain
