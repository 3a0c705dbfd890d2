"""Simulated crowd with gold battles: does the sequential rule of :mod:`leaderboard.quality.gold` catch the
clickers, spare the honest, and give back the ratings of a clean crowd once the flagged votes are removed?

1,000 annotators: 85% honest (gold accuracy drawn per annotator from Beta(18, 2), mean 0.9; a wrong gold
vote picks one of the two other answers at random), 5% coin-flip left/right, 5% uniform over
left/right/tie, 5% always-left. Each casts ``votes`` votes of which 5% are golds (20 of 400, 30 of 600); a
quarter of the golds are identical texts (right vote: tie), the rest have a right side drawn at random.
Live votes: 20 models with ratings drawn from N(1000, 200^2) Elo; an honest voter follows Bradley-Terry
with 10% ties; clickers vote by their pattern. The error of a fit is the RMS difference between fitted
and true ratings (both centred). Prints a table and, last, one JSON line with the shares pooled over seeds.

With the flagged votes removed, the rest are also fitted weighted by each annotator's posterior of
honesty from their gold record (:func:`leaderboard.quality.gold.honest_posterior`, prior ``--prior``).

    python scripts/gold_sim.py [--seeds 20] [--annotators 1000] [--prior 0.85]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from leaderboard.battles import Battles
from leaderboard.bt.fit import fit_bt
from leaderboard.data import Outcome
from leaderboard.quality.gold import GoldRule, gold_accuracy, honest_posterior

N_MODELS = 20
GOLD_RATE = 0.05
KINDS = ("honest", "coin", "uniform", "left")
SHARES = (0.85, 0.05, 0.05, 0.05)
LEFT, RIGHT, TIE = 0, 1, 2


def crowd(rng: np.random.Generator, n: int) -> npt.NDArray[np.int64]:
    return rng.choice(len(KINDS), size=n, p=SHARES)


def clicks(rng: np.random.Generator, kind: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The vote of a non-honest annotator of each ``kind`` (left, right, tie)."""
    coin = rng.integers(0, 2, size=kind.size)
    uniform = rng.integers(0, 3, size=kind.size)
    return np.select([kind == 1, kind == 2], [coin, uniform], LEFT)


def gold_votes(
    rng: np.random.Generator, kind: npt.NDArray[np.int64], golds: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    n = kind.size
    who = np.repeat(np.arange(n), golds)
    right = np.where(rng.random(who.size) < 0.25, TIE, rng.integers(0, 2, size=who.size))
    accuracy = rng.beta(18, 2, size=n)
    honest_ok = rng.random(who.size) < accuracy[who]
    wrong = (right + rng.integers(1, 3, size=who.size)) % 3
    honest_vote = np.where(honest_ok, right, wrong)
    vote = np.where(kind[who] == 0, honest_vote, clicks(rng, kind[who]))
    return who, vote == right


def live_votes(
    rng: np.random.Generator, kind: npt.NDArray[np.int64], live: int, rating: np.ndarray
) -> Battles:
    who = np.repeat(np.arange(kind.size), live)
    a = rng.integers(0, N_MODELS, size=who.size)
    b = (a + rng.integers(1, N_MODELS, size=who.size)) % N_MODELS
    p_a = 1 / (1 + 10 ** ((rating[b] - rating[a]) / 400))
    u = rng.random(who.size)
    honest = np.where(u < 0.1, TIE, np.where(rng.random(who.size) < p_a, LEFT, RIGHT))
    vote = np.where(kind[who] == 0, honest, clicks(rng, kind[who]))
    outcome = np.select(
        [vote == LEFT, vote == RIGHT], [int(Outcome.MODEL_A), int(Outcome.MODEL_B)], int(Outcome.TIE)
    )
    return Battles(
        models=tuple(f"m{i}" for i in range(N_MODELS)),
        model_a=a.astype(np.int64),
        model_b=b.astype(np.int64),
        outcome=outcome.astype(np.int8),
        annotator=who.astype(np.int64),
    )


def rating_error(battles: Battles, weight: npt.NDArray[np.float64], truth: np.ndarray) -> float:
    """RMS error of the fit with each annotator's votes weighted (0 leaves them out)."""
    if battles.annotator is None:
        raise ValueError("the battles need their annotators")
    kept = battles.take(np.flatnonzero(weight[battles.annotator] > 0))
    if kept.annotator is None:
        raise ValueError("the battles need their annotators")
    fit = fit_bt(replace(kept, weight=weight[kept.annotator]).counts())
    got = fit.rating - fit.rating.mean()
    return float(np.sqrt(np.mean((got - (truth - truth.mean())) ** 2)))


def one_seed(seed: int, n: int, votes: int, rule: GoldRule, prior: float = 0.85) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    kind = crowd(rng, n)
    golds = round(votes * GOLD_RATE)
    who, correct = gold_votes(rng, kind, golds)
    acc = gold_accuracy(who, correct, n, rule)
    truth = rng.normal(1000, 200, size=N_MODELS)
    battles = live_votes(rng, kind, votes - golds, truth)
    clicker = (kind == 1) | (kind == 2)
    return {
        "clickers": int(clicker.sum()),
        "clickers_flagged": int((acc.flagged & clicker).sum()),
        "left": int((kind == 3).sum()),
        "left_flagged": int((acc.flagged & (kind == 3)).sum()),
        "honest": int((kind == 0).sum()),
        "honest_flagged": int((acc.flagged & (kind == 0)).sum()),
        "error_all": rating_error(battles, np.ones(n), truth),
        "error_removed": rating_error(battles, (~acc.flagged).astype(float), truth),
        # flagged left out, everyone else weighted by their posterior of honesty from the gold record
        "error_weighted": rating_error(
            battles, np.where(acc.flagged, 0.0, honest_posterior(acc.n_gold, acc.n_right, rule, prior)), truth
        ),
        "error_clean": rating_error(battles, (kind == 0).astype(float), truth),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--annotators", type=int, default=1000)
    parser.add_argument(
        "--prior", type=float, default=0.85, help="Prior share of honest annotators of the weighting."
    )
    args = parser.parse_args()
    rule = GoldRule()
    summary: dict[str, dict[str, float]] = {}
    print(f"rule: p_honest {rule.p_honest}, p_guess {rule.p_guess}, threshold {rule.threshold:.2f}")
    print(
        "votes golds  clicker recall  always-left recall  honest flagged  RMS all  removed  weighted  clean"
        "  ratio  weighted ratio"
    )
    for votes in (400, 600):
        rows = [one_seed(s, args.annotators, votes, rule, args.prior) for s in range(args.seeds)]
        tot = {k: sum(r[k] for r in rows) for k in rows[0]}
        recall = tot["clickers_flagged"] / tot["clickers"]
        honest = tot["honest_flagged"] / tot["honest"]
        ratio = tot["error_removed"] / tot["error_clean"]
        weighted = tot["error_weighted"] / tot["error_clean"]
        left = tot["left_flagged"] / tot["left"]
        errors = [tot[k] / len(rows) for k in ("error_all", "error_removed", "error_weighted", "error_clean")]
        print(
            f"{votes:5d} {round(votes * GOLD_RATE):5d}  {recall:14.4f}  {left:18.4f}  {honest:14.4f}"
            f"  {errors[0]:7.2f}  {errors[1]:7.2f}  {errors[2]:8.2f}  {errors[3]:5.2f}  {ratio:5.3f}"
            f"  {weighted:14.3f}"
        )
        summary[f"golds_{round(votes * GOLD_RATE)}"] = {
            "recall": round(recall, 4),
            "honest_flagged": round(honest, 4),
            "always_left_recall": round(tot["left_flagged"] / tot["left"], 4),
            "error_ratio_removed_to_clean": round(ratio, 4),
            "error_ratio_weighted_to_clean": round(weighted, 4),
        }
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
