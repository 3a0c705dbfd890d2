"""What a judge is worth, on simulated votes where the answer is known: a judge that votes like a steep
human adds effective human votes and correlates with them; a coin-flipping judge adds nothing."""

from __future__ import annotations

import numpy as np

from leaderboard.battles import Battles
from leaderboard.composite.board import composite_board, composite_data
from leaderboard.composite.model import CompositeOptions
from leaderboard.data import Outcome

TRUTH = np.array([-1.2, -0.6, -0.2, 0.2, 0.7, 1.1])


def simulate(seed: int = 4) -> tuple[Battles, tuple[str, ...]]:
    """600 battles with a human vote on each (random sides); both judges judge 3,000 battles in both
    orders, the human ones among them."""
    rng = np.random.default_rng(seed)
    n_battles, n_human = 3000, 600
    a = rng.integers(0, 6, n_battles)
    b = (a + rng.integers(1, 6, n_battles)) % 6
    rows: list[tuple[int, int, int, int, int]] = []  # left, right, winner code, annotator, prompt
    for k in range(n_battles):
        if k < n_human:
            p = 1 / (1 + np.exp(TRUTH[b[k]] - TRUTH[a[k]]))
            rows.append((a[k], b[k], 0 if rng.random() < p else 1, 0, k))
        for left, right in ((a[k], b[k]), (b[k], a[k])):
            p = 1 / (1 + np.exp(1.5 * (TRUTH[right] - TRUTH[left])))
            rows.append((left, right, 0 if rng.random() < p else 1, 1, k))
            rows.append((left, right, 0 if rng.random() < 0.5 else 1, 2, k))
    arr = np.array(rows)
    outcome = np.where(arr[:, 2] == 0, int(Outcome.MODEL_A), int(Outcome.MODEL_B))
    battles = Battles(
        models=tuple(f"m{i}" for i in range(6)),
        model_a=arr[:, 0],
        model_b=arr[:, 1],
        outcome=outcome,
        annotator=arr[:, 3],
        prompt=arr[:, 4],
    )
    return battles, ("person", "llm-good", "llm-coin")


def test_a_good_judge_is_worth_human_votes_and_a_coin_is_not() -> None:
    battles, labels = simulate()
    data = composite_data(battles, labels, judges=["llm-good", "llm-coin"])
    fitted = composite_board(data, battles, options=CompositeOptions(ties=False, self_preference=False))
    meta = fitted.metadata
    good, coin = meta["judges"]["llm-good"], meta["judges"]["llm-coin"]
    assert meta["sources"] == {"human": 600, "llm-coin": 6000, "llm-good": 6000}
    assert good["verdict_worth_in_human_votes"] > 0.1
    assert abs(coin["verdict_worth_in_human_votes"]) < 0.02
    assert good["correlation_with_humans"] > coin["correlation_with_humans"] + 0.1
    assert good["human_votes_needed"]["with"] < 0.5 * good["human_votes_needed"]["without"]
    assert meta["effective_human_votes"] > 2 * meta["n_human_votes"]
    # the learned steepness of the good judge is near the truth (1.5)
    terms = meta["terms"]
    assert 1.2 < terms["llm-good"]["discrimination"]["value"] < 1.8
    # the good judge sees the humans' ratings (no deviations found); the coin's view is flat, so its
    # deviations spread like the ratings themselves (its steepness is then on a view that tells nothing)
    assert terms["llm-good"]["deviation_sd"]["value"] == 0.0 and good["deviation_sd_elo"] == 0.0
    assert terms["llm-coin"]["deviation_sd"]["value"] > 100 and coin["deviation_sd_elo"] > 100
    assert "deviation" in meta["deviation_note"]
    assert fitted.board.method == "composite" and fitted.board.interval == "sandwich"
