"""The composite fit: reduces to plain Bradley-Terry of pooled votes, and recovers per-source terms."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from leaderboard.bt.fit import fit_bt
from leaderboard.bt.spec import DisconnectedComparisonError
from leaderboard.composite.fit import bootstrap_composite, fit_composite
from leaderboard.composite.layout import make_layout
from leaderboard.composite.likelihood import log_posterior_gradient, log_posterior_hessian, make_vote_cells
from leaderboard.composite.model import CompositeData, CompositeOptions
from leaderboard.composite.spread import estimate_deviation_sd, spread_moments
from leaderboard.data import Outcome, aggregate_codes

OFF = CompositeOptions(
    discrimination=False, position=False, ties=False, self_preference=False, deviations=False
)


def _votes(rng: np.random.Generator, n: int, m: int, n_sources: int) -> CompositeData:
    theta = rng.normal(0, 1, m)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    p = 1 / (1 + np.exp(-(theta[a] - theta[b])))
    u = rng.random(n)
    tie = u > 0.9
    score = (u < 0.9 * p).astype(float)
    return CompositeData(
        models=tuple(f"m{i}" for i in range(m)),
        sources=tuple(["humans"] + [f"judge:{j}" for j in range(1, n_sources)]),
        model_a=a,
        model_b=b,
        source=rng.integers(0, n_sources, n),
        score=score,
        tie=tie,
        battle=np.arange(n) // 2,
    )


def test_extra_terms_off_equals_plain_pooled_bt() -> None:
    data = _votes(np.random.default_rng(3), 4000, 8, 3)
    outcome = np.where(data.tie, Outcome.TIE, np.where(data.score == 1, Outcome.MODEL_A, Outcome.MODEL_B))
    counts = aggregate_codes(data.model_a, data.model_b, outcome, models=data.models)
    plain = fit_bt(counts)
    composite = fit_composite(data, OFF)
    assert composite.converged
    assert np.max(np.abs(composite.rating - plain.rating)) < 0.01
    np.testing.assert_array_equal(composite.discrimination, 1.0)


def test_learning_terms_changes_the_fit_and_recovers_them() -> None:
    rng = np.random.default_rng(5)
    m, n = 8, 30000
    theta = np.linspace(-1.5, 1.5, m)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    src = rng.integers(0, 2, n)
    disc = np.array([1.0, 1.6])
    pos = np.array([0.0, 0.25])
    fam = np.isin(np.arange(m), [0, 1]).astype(float)
    sp = np.array([0.0, 0.4])
    eta = disc[src] * (theta[a] - theta[b] + pos[src] + sp[src] * (fam[a] - fam[b]))
    score = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    data = CompositeData(
        models=tuple(f"m{i}" for i in range(m)),
        sources=("humans", "judge:x"),
        model_a=a,
        model_b=b,
        source=src,
        score=score,
        tie=np.zeros(n, dtype=bool),
        battle=np.arange(n),
        family={1: "fam"},
        model_family=["fam", "fam"] + [None] * (m - 2),
    )
    fit = fit_composite(data, CompositeOptions(ties=False))
    unit = 400 / np.log(10)
    assert abs(fit.discrimination[1] - 1.6) < 4 * fit.discrimination_se[1] + 0.02
    assert abs(fit.position[1] - 0.25 * unit) < 4 * fit.position_se[1] + 2
    assert abs(fit.self_preference[1] - 0.4 * unit) < 4 * fit.self_preference_se[1] + 2
    truth = 1000 + unit * (theta - theta.mean())
    assert np.max(np.abs(fit.rating - truth) / fit.rating_se) < 4.5
    pooled = fit_composite(data, OFF)
    assert np.max(np.abs(pooled.rating - truth)) > np.max(np.abs(fit.rating - truth))


def test_soft_scores_and_clusters_widen_and_bootstrap_runs() -> None:
    data = _votes(np.random.default_rng(7), 2000, 5, 2)
    soft = CompositeData(**{**data.__dict__, "score": np.clip(data.score * 0.8 + 0.1, 0, 1)})
    fit = fit_composite(soft)
    assert fit.converged and np.all(np.isfinite(fit.rating_se))
    independent = fit_composite(CompositeData(**{**data.__dict__, "battle": None}), OFF)
    # duplicate every vote: as one cluster per battle the intervals stay; as independent votes they shrink
    doubled = {k: np.concatenate([v, v]) for k, v in data.__dict__.items() if isinstance(v, np.ndarray)}
    doubled["battle"] = np.concatenate([np.arange(len(data.model_a))] * 2)
    clustered = fit_composite(CompositeData(**{**data.__dict__, **doubled}), OFF)
    assert np.allclose(clustered.rating_se, independent.rating_se, rtol=0.05)
    low, high, _ = bootstrap_composite(data, OFF, rounds=20, seed=1)
    assert np.all(low < fit.rating + 200) and np.all(low <= high)


@pytest.mark.parametrize(
    "change",
    [{"score": np.full(4, 1.5)}, {"source": np.array([0, 0, 0, 5])}, {"model_b": np.array([0, 0, 1, 1])}],
)
def test_hostile_inputs_are_refused(change: dict[str, object]) -> None:
    base = {
        "models": ("a", "b", "c"),
        "sources": ("humans",),
        "model_a": np.array([0, 1, 2, 0]),
        "model_b": np.array([1, 2, 0, 2]),
        "source": np.zeros(4, dtype=np.int64),
        "score": np.array([1.0, 0.0, 1.0, 0.5]),
        "tie": np.zeros(4, dtype=bool),
    }
    with pytest.raises(ValueError):
        CompositeData(**{**base, **change})  # type: ignore[arg-type]


def test_disconnected_graph_is_refused() -> None:
    data = CompositeData(
        models=("a", "b", "c", "d"),
        sources=("humans",),
        model_a=np.array([0, 2]),
        model_b=np.array([1, 3]),
        source=np.zeros(2, dtype=np.int64),
        score=np.array([1.0, 0.0]),
        tie=np.zeros(2, dtype=bool),
    )
    with pytest.raises(DisconnectedComparisonError):
        fit_composite(data)


def test_position_confounded_with_ratings_is_fixed_and_named() -> None:
    """Humans only ever see the better model on the left; the judge sees both orders. The humans'
    position term cannot be told apart from the ratings, so it is fixed at 0 and named; the judge's is
    still learned, and the ratings come out near the truth rather than thousands of points apart."""
    rng = np.random.default_rng(11)
    m, n = 5, 6000
    theta = np.linspace(1.0, -1.0, m)  # model 0 best
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    src = rng.integers(0, 2, n)
    better_left = np.minimum(a, b), np.maximum(a, b)
    a = np.where(src == 0, better_left[0], a)
    b = np.where(src == 0, better_left[1], b)
    pos = np.array([0.0, 0.5])  # the humans have none; the judge leans left
    eta = theta[a] - theta[b] + pos[src]
    score = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    data = CompositeData(
        models=tuple(f"m{i}" for i in range(m)),
        sources=("humans", "judge:x"),
        model_a=a,
        model_b=b,
        source=src,
        score=score,
        tie=np.zeros(n, dtype=bool),
    )
    fit = fit_composite(data, CompositeOptions(ties=False, discrimination=False, self_preference=False))
    assert set(fit.position_fixed) == {"humans"} and "both orders" in fit.position_fixed["humans"]
    assert fit.position[0] == 0.0 and np.isnan(fit.position_se[0])
    unit = 400 / np.log(10)
    assert abs(fit.position[1] - 0.5 * unit) < 4 * fit.position_se[1] + 2
    truth = 1000 + unit * (theta - theta.mean())
    assert np.max(np.abs(fit.rating - truth) / fit.rating_se) < 4.5
    assert list(np.argsort(-fit.rating)) == list(range(m))
    # the humans alone: same verdict, and the fit stays on a sensible scale
    humans = fit_composite(
        CompositeData(
            models=data.models,
            sources=("humans",),
            model_a=a[src == 0],
            model_b=b[src == 0],
            source=np.zeros(int(np.sum(src == 0)), dtype=np.int64),
            score=score[src == 0],
            tie=np.zeros(int(np.sum(src == 0)), dtype=bool),
        )
    )
    assert set(humans.position_fixed) == {"humans"}
    assert np.max(np.abs(humans.rating - 1000)) < 400
    # with the term switched off nothing is recorded as fixed
    off = fit_composite(data, OFF)
    assert off.position_fixed == {}


def test_analytic_gradient_and_hessian_match_finite_differences() -> None:
    """Every term on (discrimination, position with some unsided votes, ties, a family, soft scores, the
    judges' deviations with a shifted prior mean), at
    a point away from the optimum so the second-derivative terms of ``eta = a u`` matter."""
    data = _votes(np.random.default_rng(13), 1500, 5, 3)
    data = CompositeData(
        **{
            **data.__dict__,
            "score": np.clip(data.score * 0.7 + 0.15, 0, 1),
            "sided": np.arange(1500) % 4 != 0,
            "family": {1: "f", 2: "g"},
            "model_family": ["f", "f", "g", None, None],
        }
    )
    options = CompositeOptions()
    lay = make_layout(data, options, np.array([0.0, 0.3, 0.2]))  # both judges' deviations, with their prior
    # the deviations' Jacobian: five models less the common shift and the self-preferred family's
    # direction per judge, only on the judges' log discriminations, and none in the loose fit
    cut = len(data.models) - 1
    assert lay.view_dims[cut : cut + 2].tolist() == [3.0, 3.0] and np.sum(lay.view_dims) == 6.0
    assert not np.any(make_layout(data, options, np.array([0.0, 0.3, 0.2]), loose=True).view_dims)
    lay = replace(lay, centre=np.random.default_rng(3).normal(0, 0.1, lay.n_params))  # a bootstrap round's
    cells = make_vote_cells(data, options, lay)
    stats = cells.stats(np.random.default_rng(1).random(1500) * 2)
    x = np.random.default_rng(2).normal(0, 0.3, lay.n_params)
    _, grad = log_posterior_gradient(x, lay, cells, stats)
    hess = log_posterior_hessian(x, lay, cells, stats)
    step = 1e-6
    fd_grad, fd_hess = np.empty_like(grad), np.empty_like(hess)
    for k in range(len(x)):
        up, down = x.copy(), x.copy()
        up[k] += step
        down[k] -= step
        (f_up, g_up), (f_down, g_down) = (
            log_posterior_gradient(up, lay, cells, stats),
            log_posterior_gradient(down, lay, cells, stats),
        )
        fd_grad[k] = (f_up - f_down) / (2 * step)
        fd_hess[:, k] = (g_up - g_down) / (2 * step)
    np.testing.assert_allclose(grad, fd_grad, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(hess, fd_hess, rtol=1e-5, atol=1e-3)
    assert lay.sizes[1:] == (2, 3, 3, 2, 10)  # every kind of term is exercised


def test_always_left_judge_has_finite_terms_and_leaves_the_ratings_alone() -> None:
    """A judge that picks the left answer on both orders of every battle: without the weak priors its
    position and discrimination have no finite maximum (the fit stops wherever the tolerance and the
    optimiser's path say: where along the valley of equal left advantage ``a * position`` is arbitrary);
    with them it has a unique optimum, nearer, and the ratings are the humans' alone."""
    rng = np.random.default_rng(1)
    m, n = 6, 6000
    theta = np.linspace(-1, 1, m)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    src = rng.integers(0, 2, n)
    human = (rng.random(n) < 1 / (1 + np.exp(-(theta[a] - theta[b])))).astype(float)
    data = CompositeData(
        models=tuple(f"m{i}" for i in range(m)),
        sources=("humans", "judge:left"),
        model_a=a,
        model_b=b,
        source=src,
        score=np.where(src == 1, 1.0, human),
        tie=np.zeros(n, dtype=bool),
        battle=np.arange(n),
    )
    options = CompositeOptions(ties=False)
    fit = fit_composite(data, options)
    free = fit_composite(
        data, CompositeOptions(ties=False, prior_sd_elo=None, prior_sd_log_discrimination=None)
    )
    assert fit.converged
    # the left advantage on the judge's own votes, the quantity that runs away without the priors
    left, free_left = (f.discrimination[1] * f.position[1] for f in (fit, free))
    assert left < 0.7 * free_left and fit.discrimination[1] < free.discrimination[1]
    assert fit.position[1] < 600 and fit.discrimination[1] < 10
    keep = src == 0
    humans = fit_composite(
        CompositeData(
            models=data.models,
            sources=("humans",),
            model_a=a[keep],
            model_b=b[keep],
            source=src[keep],
            score=human[keep],
            tie=np.zeros(int(keep.sum()), dtype=bool),
        ),
        options,
    )
    assert np.max(np.abs(fit.rating - humans.rating)) < 0.2 * float(np.min(humans.rating_se))


def _deviating_board(seed: int, deviation: float) -> tuple[CompositeData, np.ndarray]:
    """10 models, 1,500 human votes and a steep judge on 15,000 battles that sees each model off the human
    rating by its own deviation (standard deviation ``deviation``, natural-log units)."""
    rng = np.random.default_rng(seed)
    m, n_human, n_judge = 10, 1500, 15000
    theta = rng.normal(0, 0.8, m)
    seen = theta + rng.normal(0, deviation, m) if deviation else theta
    a = rng.integers(0, m, n_human + n_judge)
    b = (a + rng.integers(1, m, n_human + n_judge)) % m
    src = (np.arange(n_human + n_judge) >= n_human).astype(np.int64)
    view = np.where(src == 1, 2.0, 1.0)[:, None] * np.stack([theta, seen])[src, :]
    eta = view[np.arange(len(a)), a] - view[np.arange(len(a)), b]
    data = CompositeData(
        models=tuple(f"m{i}" for i in range(m)),
        sources=("humans", "judge:x"),
        model_a=a,
        model_b=b,
        source=src,
        score=(rng.random(len(a)) < 1 / (1 + np.exp(-eta))).astype(float),
        tie=np.zeros(len(a), dtype=bool),
        battle=np.arange(len(a)),
    )
    return data, 1000 + 400 / np.log(10) * (theta - theta.mean())


def test_no_deviations_reduce_to_the_fit_without_them() -> None:
    """A spread fixed at 0 is exactly the fit without deviations, and so is the fit of a judge that sees
    the human ratings when the data put its spread at 0 (Cochran's p well above any threshold: the
    spread of its loose deviations is the sampling noise)."""
    data, _ = _deviating_board(22, 0.0)
    options = CompositeOptions(ties=False, self_preference=False)
    plain = fit_composite(data, replace(options, deviations=False))
    zero = fit_composite(data, replace(options, deviation_sd_elo=0.0))
    np.testing.assert_array_equal(zero.rating, plain.rating)
    np.testing.assert_array_equal(zero.rating_se, plain.rating_se)
    fit = fit_composite(data, options)
    assert fit.deviation_sd[1] == 0 and fit.deviation_p_value[1] > 0.3
    # the same optimum reached from another start (the loose fit's): equal to the optimiser's tolerance
    np.testing.assert_allclose(fit.rating, plain.rating, atol=1e-2)
    np.testing.assert_allclose(fit.rating_se, plain.rating_se, rtol=1e-4)


def test_a_deviating_judge_widens_the_intervals_to_cover_the_human_ratings() -> None:
    """A judge off the human ratings by 50 Elo per model: the spread is found, the intervals carry it and
    cover the human ratings (without deviations they are narrow around the judge's view and miss), yet
    stay narrower than the humans' alone; the bootstrap with the randomised prior agrees in width."""
    unit = 400 / np.log(10)
    data, truth = _deviating_board(22, 50 / unit)
    options = CompositeOptions(ties=False, self_preference=False)
    fit = fit_composite(data, options)
    plain = fit_composite(data, replace(options, deviations=False))
    humans = fit_composite(
        CompositeData(
            **{
                **data.__dict__,
                **{k: v[data.source == 0] for k, v in data.__dict__.items() if isinstance(v, np.ndarray)},
            }
        ),
        options,
    )
    assert 25 < fit.deviation_sd[1] < 100 and fit.deviation_p_value[1] < 1e-3
    assert np.max(np.abs(fit.rating - truth) / fit.rating_se) < 3.5
    assert np.max(np.abs(plain.rating - truth) / plain.rating_se) > 4
    assert np.mean(plain.rating_se) < np.mean(fit.rating_se) < np.mean(humans.rating_se)
    low, high, _ = bootstrap_composite(data, options, rounds=60, seed=3)
    ratio = float(np.mean(high - low) / np.mean(2 * 1.96 * fit.rating_se))
    assert 0.75 < ratio < 1.3


def test_spread_moments_are_unbiased_and_ignore_the_projected_directions() -> None:
    """Correlated estimates (a shared rating error) with arbitrary values and huge variance along the
    directions only the prior sets (common shift, view, family): the moment estimate of tau^2 is unbiased
    over many draws, its reported sampling variance matches the spread of the estimates, and with no
    spread Cochran's p-value is uniform (mean 1/2)."""
    rng = np.random.default_rng(5)
    k = 20
    view = rng.normal(0, 1, k)
    member = (np.arange(k) < 3).astype(float)
    directions = np.stack([np.ones(k), view, member], axis=1)
    noise = np.diag(rng.uniform(0.01, 0.04, k)) + 0.01  # per-model noise plus a shared part
    cov = noise + directions @ np.diag([1e4, 1e4, 1e4]) @ directions.T
    chol = np.linalg.cholesky(noise)
    for tau in (0.0, 0.3):
        estimates, p_values, variances = [], [], []
        for _ in range(400):
            d = chol @ rng.normal(size=k) + tau * rng.normal(size=k) + directions @ rng.normal(0, 50, 3)
            tau2, p, variance = spread_moments(d, cov, directions)
            estimates.append(tau2)
            p_values.append(p)
            variances.append(variance)
        if tau:
            assert abs(np.mean(estimates) / tau**2 - 1) < 0.1
            assert abs(np.mean(variances) / np.var(estimates) - 1) < 0.25
        else:
            assert abs(np.mean(p_values) - 0.5) < 0.05 and np.mean(estimates) < 0.01


@pytest.mark.slow
def test_the_estimated_spread_is_unbiased_on_boards_with_a_known_one() -> None:
    """The loose fit measures the deviations at the view's smallest scale (``c delta``, ``c^2`` about
    0.77 here); the estimate divides that out, so over many boards ``E tau_hat^2`` is the true one."""
    unit = 400 / np.log(10)
    tau = 0.3
    estimates = [
        float(estimate_deviation_sd(_deviating_board(seed, tau)[0], CompositeOptions(ties=False))[0][1])
        for seed in range(60)
    ]
    assert 0.85 < np.mean(np.square(estimates)) / (unit * tau) ** 2 < 1.15
