"""Coverage of the 95% bootstrap intervals on simulated leaderboards with known true ratings.

Pools, over many seeded leaderboards, the share of (model, leaderboard) pairs whose percentile interval
contains the true rating; the target is between 93% and 97%. Prints a table line per batch and one JSON
line at the end.

    .venv/bin/python scripts/coverage_sim.py --leaderboards 100 --models 20 --votes 20000 --rounds 1000
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from leaderboard import bootstrap_ratings, sandwich_intervals, simulate_battles


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaderboards", type=int, default=100)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--votes", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--level", type=float, default=0.95)
    parser.add_argument("--spread", type=float, default=150.0, help="sd of the true ratings (Elo)")
    parser.add_argument("--pair-skew", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    hits = sandwich_hits = total = 0
    start = time.perf_counter()
    for k in range(args.leaderboards):
        truth = rng.normal(0.0, args.spread, args.models)
        truth = truth - truth.mean() + 1000.0
        sim = simulate_battles(
            truth, args.votes, random_state=int(rng.integers(2**31)), pair_skew=args.pair_skew
        )
        counts = sim.counts()
        boot = bootstrap_ratings(counts, n_rounds=args.rounds, level=args.level, random_state=k)
        sw = sandwich_intervals(counts, level=args.level)
        hits += int(np.sum((boot.ci_low <= truth) & (truth <= boot.ci_high)))
        sandwich_hits += int(np.sum((sw.ci_low <= truth) & (truth <= sw.ci_high)))
        total += args.models
        if (k + 1) % 10 == 0:
            print(
                f"{k + 1:4d} leaderboards  bootstrap {hits / total:.4f}  sandwich {sandwich_hits / total:.4f}"
            )
    coverage = hits / total
    # binomial standard error, ignoring the (positive) correlation within a leaderboard
    se = float(np.sqrt(coverage * (1 - coverage) / total))
    result = {
        "leaderboards": args.leaderboards,
        "models": args.models,
        "votes": args.votes,
        "rounds": args.rounds,
        "level": args.level,
        "coverage": round(coverage, 4),
        "coverage_se": round(se, 4),
        "sandwich_coverage": round(sandwich_hits / total, 4),
        "in_target_93_97": 0.93 <= coverage <= 0.97,
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(result))
    return 0 if result["in_target_93_97"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
