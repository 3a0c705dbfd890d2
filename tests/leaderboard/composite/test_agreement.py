"""Agreement statistics against hand counts on small cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from leaderboard.battles import Battles
from leaderboard.composite.agreement import (
    cohen_kappa,
    pair_agreement,
    position_report,
    self_preference,
    verdict_table,
    vote_scores,
)
from leaderboard.data import Outcome

A, B, T = Outcome.MODEL_A, Outcome.MODEL_B, Outcome.TIE
TOL = 1e-12


def test_cohen_kappa_by_hand() -> None:
    # 10 items; rater x: 6 yes 4 no; y: 5 yes 5 no; they agree on 7 (4 yes-yes, 3 no-no).
    x = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    y = [1, 1, 1, 1, 0, 0, 0, 0, 0, 1]
    p_o, p_e = 0.7, 0.6 * 0.5 + 0.4 * 0.5
    assert cohen_kappa(x, y) == pytest.approx((p_o - p_e) / (1 - p_e), abs=TOL)
    assert cohen_kappa(x, x) == pytest.approx(1.0, abs=TOL)
    assert math.isnan(cohen_kappa([], []))


def battles(rows: list[tuple[int, int, int, int, Outcome]]) -> Battles:
    """rows of (annotator, prompt, left model, right model, outcome) over models m0..m2."""
    arr = np.array([r[:4] for r in rows], dtype=np.int64)
    return Battles(
        models=("m0", "m1", "m2"),
        model_a=arr[:, 2],
        model_b=arr[:, 3],
        outcome=np.array([r[4] for r in rows], dtype=np.int8),
        annotator=arr[:, 0],
        prompt=arr[:, 1],
    )


def test_verdicts_both_orders_and_agreement() -> None:
    data = battles(
        [
            # judge 0 on prompt 1 (m0 vs m1) in both orders: m0 wins both times -> +1 for m0
            (0, 1, 0, 1, A), (0, 1, 1, 0, B),
            # judge 0 on prompt 2: the first shown wins both times -> inconsistent -> tie
            (0, 2, 0, 1, A), (0, 2, 1, 0, A),
            # judge 1: m0 wins on prompt 1, tie on prompt 2, m1 wins on prompt 3 (judge 0 absent there)
            (1, 1, 1, 0, B), (1, 2, 0, 1, T), (1, 3, 0, 1, B),
        ]
    )  # fmt: skip
    table = verdict_table(vote_scores(data))
    assert table.loc[(1, 0, 1), 0] == 1 and table.loc[(2, 0, 1), 0] == 0
    agreement = pair_agreement(table, 0, 1, ("j0", "j1"))
    assert (agreement.n_with_ties, agreement.agreement_with_ties) == (2, 1.0)
    assert (agreement.n_without_ties, agreement.agreement_without_ties) == (1, 1.0)
    position = position_report(data, vote_scores(data), 0)
    assert position.n_swapped == 2 and position.consistency == 0.5
    assert position.n_decisive == 4 and position.first_win_rate == 0.75


def test_first_position_term_has_the_sign_of_the_bias() -> None:
    rows = []
    for p in range(40):  # every pair both ways; the left side wins 3 times in 4
        for a, b in ((0, 1), (1, 2), (0, 2)):
            rows += [(0, p, a, b, A if p % 4 else B), (0, p, b, a, A if p % 4 != 1 else B)]
    data = battles(rows)
    report = position_report(data, vote_scores(data), 0)
    assert report.first_win_rate == pytest.approx(0.75, abs=TOL)
    # P(left) = 0.75 between equals: 400 * log10(3) rating points.
    assert report.position_elo == pytest.approx(400 * math.log10(3), abs=1e-3)


def test_self_preference_against_a_reference() -> None:
    data = battles(
        [
            # judge 0 of m0's family: m0 beats m1 and m2; reference 1: m0 loses to m1, ties with m2
            (0, 1, 0, 1, A), (0, 2, 2, 0, B), (1, 1, 0, 1, B), (1, 2, 0, 2, T),
            # a comparison without m0 does not count
            (0, 3, 1, 2, A), (1, 3, 1, 2, B),
        ]
    )  # fmt: skip
    table = verdict_table(vote_scores(data))
    n, judge, reference = self_preference(table, 0, [0], [1])
    assert (n, judge, reference) == (2, 1.0, 0.25)
