"""The general likelihood over cells: analytic derivatives, the one design matrix, both-bad handling."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import optimize

from leaderboard.bt.cells import Layout, Objective, design_matrix, make_cells
from leaderboard.bt.spec import BTSpec
from leaderboard.data import Outcome, aggregate_codes
from leaderboard.evaluation.held_out import votes_to_counts
from leaderboard.evaluation.simulate import simulate_battles

GRAD_TOL = 1e-5
TRUE = np.array([1150.0, 1080.0, 1030.0, 1000.0, 960.0, 920.0])
NAT_PER_ELO = math.log(10.0) / 400.0

SPECS = [
    BTSpec(),
    BTSpec(position="common"),
    BTSpec(ties="davidson"),
    BTSpec(position="common", ties="davidson", prior_sd=150.0),
    BTSpec(position="per-model", ties="davidson"),
]


def _id(s: BTSpec) -> str:
    return f"{s.position}-{s.ties}-{s.prior_sd}"


@pytest.mark.parametrize("spec", SPECS, ids=_id)
def test_gradient_and_hessian_match_finite_differences(spec: BTSpec) -> None:
    sim = simulate_battles(
        TRUE, 3000, position=40, nu=0.5, n_features=2, style=np.array([30.0, 0.0]), random_state=3
    )
    counts = votes_to_counts(sim, keep_time=True, per_vote=True)
    spec = replace(spec, features=sim.features, feature_names=("a", "b"), now=1.0)
    cells = make_cells(counts, spec)
    cells = cells.with_count(cells.count * (1 + np.arange(cells.count.shape[0]) % 3))
    layout = Layout.of(spec, cells.n_models)
    objective = Objective(cells, spec, layout, nat_per_point=NAT_PER_ELO)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.normal(0, 0.5, layout.size)
        err = optimize.check_grad(
            lambda v: objective.value_grad(v)[0], lambda v: objective.value_grad(v)[1], x
        )
        assert err < GRAD_TOL
        numeric = optimize.approx_fprime(x, lambda v: objective.value_grad(v)[1], 1e-6)
        np.testing.assert_allclose(objective.hess(x), numeric, atol=1e-4)


def test_both_bad_as_tie_or_excluded() -> None:
    counts = aggregate_codes(
        np.array([0, 0, 1, 1, 2, 0]),
        np.array([1, 2, 2, 0, 0, 1]),
        np.array([0, 3, 0, 2, 1, 1]),
        models=("a", "b", "c"),
    )
    tie = make_cells(counts, BTSpec())
    excluded = make_cells(counts, BTSpec(both_bad="exclude"))
    assert tie.count.sum() == 6 and excluded.count.sum() == 5
    assert (tie.outcome == Outcome.TIE).sum() == 2


def test_design_matrix_rows_written_out() -> None:
    left, right = np.array([0, 2, 1]), np.array([1, 0, 2])
    features = np.array([[0.5], [-1.0], [2.0]])
    full = design_matrix(left, right, 3, value=2.0).toarray()
    np.testing.assert_array_equal(full, [[2, -2, 0], [-2, 0, 2], [0, 2, -2]])
    # last model as reference (column dropped), one common position column, one covariate
    ref = design_matrix(left, right, 3, reference=2, n_position=1, features=features).toarray()
    np.testing.assert_array_equal(ref, [[1, -1, 1, 0.5], [-1, 0, 1, -1.0], [0, 1, 1, 2.0]])
    per_model = design_matrix(left, right, 3, reference=2, n_position=3).toarray()
    np.testing.assert_array_equal(per_model[:, 2:], [[1, 0, 0], [0, 0, 1], [0, 1, 0]])
