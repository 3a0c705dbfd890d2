"""Simulate manipulating voters in honest traffic and measure the anomalous-annotator defence.

Honest annotators vote from a Bradley-Terry model with ties and a small left-side bias. Three kinds of
manipulators join them: ``left`` (always the left answer), ``random`` (a random outcome) and ``boost``
(vote for one target model whenever it appears, honestly otherwise). The defence fits the leaderboard on
all votes, tests every annotator (``leaderboard.annotators``), refits without the flagged ones, tests again
against the cleaner ratings, and publishes the fit without the finally flagged votes.

Prints recall per kind, the false flag rate among honest annotators, and the target model's rating
(relative to the honest-only fit) with the defence off and on; the last line is JSON.

    .venv/bin/python scripts/sim_manipulation.py --seeds 3
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leaderboard.annotators import FlagRule, annotator_stats, flag_annotators, outcome_probabilities  # noqa: E402
from leaderboard.bt import fit_bt  # noqa: E402
from leaderboard.data import Outcome, aggregate_codes  # noqa: E402

KINDS = ("left", "random", "boost")
LEFT_ADVANTAGE_ELO = 15.0
TIE_RATE = 0.15


@dataclass
class Traffic:
    annotator: npt.NDArray[np.int64]
    kind: npt.NDArray[np.int64]  # per annotator: -1 honest, else index into KINDS
    model_a: npt.NDArray[np.int64]
    model_b: npt.NDArray[np.int64]
    outcome: npt.NDArray[np.int64]
    seconds: npt.NDArray[np.float64]


def simulate(
    rng: np.random.Generator,
    true_ratings: npt.NDArray[np.float64],
    *,
    n_honest: int,
    per_kind: int,
    mean_votes: float,
    target: int,
) -> Traffic:
    n_models = true_ratings.size
    kinds = np.concatenate([np.full(n_honest, -1), np.repeat(np.arange(len(KINDS)), per_kind)])
    n_votes = np.clip(rng.geometric(1.0 / mean_votes, kinds.size), 5, 20 * int(mean_votes))
    who = np.repeat(np.arange(kinds.size), n_votes)
    n = who.size
    a = rng.integers(0, n_models, n)
    b = (a + rng.integers(1, n_models, n)) % n_models
    shifted = true_ratings.copy()
    # Honest voters see the left answer a little favourably (position bias).
    probs = outcome_probabilities(a, b, shifted, tie_rate=TIE_RATE)
    left_boost = 1.0 / (1.0 + 10.0 ** ((shifted[b] - shifted[a] - LEFT_ADVANTAGE_ELO) / 400.0))
    probs[:, 0] = (1 - TIE_RATE) * left_boost
    probs[:, 1] = (1 - TIE_RATE) * (1 - left_boost)
    outcome = (rng.random(n)[:, None] > np.cumsum(probs, axis=1)).sum(axis=1).astype(np.int64)
    outcome = np.minimum(outcome, 2)
    kind_of_vote = kinds[who]
    outcome[kind_of_vote == 0] = Outcome.MODEL_A
    rand = kind_of_vote == 1
    outcome[rand] = rng.integers(0, 3, int(rand.sum()))
    boost = kind_of_vote == 2
    outcome[boost & (a == target)] = Outcome.MODEL_A
    outcome[boost & (b == target)] = Outcome.MODEL_B
    # Everyone reads at human speed: the statistics, not the clock, must catch them.
    seconds = rng.lognormal(np.log(12.0), 0.6, n)
    return Traffic(who, kinds.astype(np.int64), a, b, outcome, seconds)


def fit_ratings(t: Traffic, keep: npt.NDArray[np.bool_], n_models: int) -> npt.NDArray[np.float64]:
    names = tuple(f"m{i}" for i in range(n_models))
    counts = aggregate_codes(t.model_a[keep], t.model_b[keep], t.outcome[keep], models=names)
    return fit_bt(counts).rating


def run_once(args: argparse.Namespace, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    true_ratings = np.sort(rng.normal(1000.0, 120.0, args.models))[::-1].copy()
    target = args.models - 2  # a weak model: boosting it moves it most
    t = simulate(
        rng, true_ratings, n_honest=args.honest, per_kind=args.per_kind, mean_votes=args.votes, target=target
    )
    honest_vote = t.kind[t.annotator] < 0
    all_votes = np.ones(t.annotator.size, dtype=bool)
    rule = FlagRule(alpha=args.alpha, min_votes=args.min_votes)

    r_honest = fit_ratings(t, honest_vote, args.models)
    r_off = fit_ratings(t, all_votes, args.models)
    flagged_ids = np.zeros(t.kind.size, dtype=bool)
    ratings = r_off
    for _ in range(2):
        s = annotator_stats(t.annotator, t.model_a, t.model_b, t.outcome, ratings, seconds=t.seconds)
        flagged, _ = flag_annotators(s, rule)
        flagged_ids[:] = False
        flagged_ids[s.annotators[flagged]] = True
        ratings = fit_ratings(t, ~flagged_ids[t.annotator], args.models)
    r_on = ratings

    out: dict[str, float] = {}
    for k, name in enumerate(KINDS):
        members = t.kind == k
        out[f"recall_{name}"] = float(flagged_ids[members].mean()) if members.any() else float("nan")
    bad = t.kind >= 0
    out["recall"] = float(flagged_ids[bad].mean()) if bad.any() else float("nan")
    # What matters for the board: the share of manipulated votes removed, and recall among the
    # manipulators with enough votes to be tested at all.
    n_votes = np.bincount(t.annotator, minlength=t.kind.size)
    testable = bad & (n_votes >= args.min_votes)
    out["recall_testable"] = float(flagged_ids[testable].mean()) if testable.any() else float("nan")
    out["manipulated_votes_removed"] = float(n_votes[bad & flagged_ids].sum() / max(n_votes[bad].sum(), 1))
    out["false_flag_rate"] = float(flagged_ids[~bad].mean())
    out["target_shift_off"] = float(r_off[target] - r_honest[target])
    out["target_shift_on"] = float(r_on[target] - r_honest[target])
    out["max_abs_shift_off"] = float(np.max(np.abs(r_off - r_honest)))
    out["max_abs_shift_on"] = float(np.max(np.abs(r_on - r_honest)))
    out["votes"] = float(t.annotator.size)
    out["manipulated_vote_share"] = float(1.0 - (t.kind[t.annotator] < 0).mean())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--honest", type=int, default=500, help="honest annotators")
    parser.add_argument("--per-kind", type=int, default=15, help="manipulators of each kind")
    parser.add_argument("--votes", type=float, default=60.0, help="mean votes per annotator (geometric)")
    parser.add_argument("--alpha", type=float, default=FlagRule().alpha)
    parser.add_argument("--min-votes", type=int, default=FlagRule().min_votes)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    args = parser.parse_args(argv)

    runs = [run_once(args, args.seed + i) for i in range(args.seeds)]
    summary = {key: float(np.mean([r[key] for r in runs])) for key in runs[0]}
    print(
        f"{args.seeds} run(s): {args.honest} honest annotators, {args.per_kind} manipulators per kind, "
        f"{args.models} models, ~{summary['votes']:.0f} votes, "
        f"{100 * summary['manipulated_vote_share']:.1f}% of them manipulated"
    )
    for name in KINDS:
        print(f"  recall {name:>6}: {summary[f'recall_{name}']:.3f}")
    print(f"  recall    all: {summary['recall']:.3f}")
    print(f"  recall among manipulators with >= {args.min_votes} votes: {summary['recall_testable']:.3f}")
    print(f"  share of manipulated votes removed: {summary['manipulated_votes_removed']:.3f}")
    print(f"  false flag rate (honest): {summary['false_flag_rate']:.4f}")
    print(
        f"  target model vs honest-only fit: {summary['target_shift_off']:+.1f} Elo with the defence off, "
        f"{summary['target_shift_on']:+.1f} with it on"
    )
    off, on = summary["max_abs_shift_off"], summary["max_abs_shift_on"]
    print(f"  largest move of any model: {off:.1f} off, {on:.1f} on")
    print(json.dumps({"seeds": args.seeds, **{k: round(v, 4) for k, v in summary.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
