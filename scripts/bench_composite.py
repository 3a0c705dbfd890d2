"""Benchmark the composite fit (human votes and LLM-judge verdicts on one scale) against a plain fit.

Usage::

    OMP_NUM_THREADS=1 python scripts/bench_composite.py                 # 1M votes, 5 sources, 1,000 rounds
    python scripts/bench_composite.py --votes 100000 --rounds 100       # a quick look

Seeded synthetic data: ``--battles`` battles (votes / sources), each seen once by the human pool and once
by every judge (so a battle is a cluster of ``--sources`` votes). Humans tie 15% of the time; the judges
are steeper than the humans, lean left, the first prefers a three-model family and the last gives soft
verdicts (five levels). Timed:

* the composite: cold fit with the battle-clustered sandwich, a warm refit, and ``--rounds`` bootstrap
  rounds over battles (:func:`leaderboard.composite.fit.bootstrap_composite`);
* the plain fit of the same votes pooled: aggregation plus :func:`leaderboard.bt.fit.fit_bt`, and its
  ``--rounds`` bootstrap (:func:`leaderboard.bt.bootstrap.bootstrap_ratings`, votes resampled one by one,
  the default board's bootstrap).

The last line of output is a JSON object with the figures.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _bench_common import emit_json_line, machine_info, print_table

from leaderboard.bt.bootstrap import bootstrap_ratings
from leaderboard.bt.fit import fit_bt
from leaderboard.composite.fit import bootstrap_composite, fit_composite
from leaderboard.composite.model import CompositeData
from leaderboard.data import Outcome, aggregate_codes

UNIT = 400 / np.log(10)


def synthetic(n_votes: int, n_sources: int, n_models: int, seed: int) -> CompositeData:
    """``n_votes`` votes: every source once on each of ``n_votes // n_sources`` battles."""
    rng = np.random.default_rng(seed)
    n_battles = n_votes // n_sources
    theta = rng.normal(0, 200 / UNIT, n_models)
    a = rng.integers(0, n_models, n_battles)
    b = (a + rng.integers(1, n_models, n_battles)) % n_models
    family = np.isin(np.arange(n_models), [0, 1, 2]).astype(float)
    rows_y, rows_tie = [], []
    for s in range(n_sources):
        disc, pos, pref = (1.0, 0.0, 0.0) if s == 0 else (1.5 + 0.2 * s, 40.0 / s, 80.0 if s == 1 else 0.0)
        eta = disc * (theta[a] - theta[b] + (pos + pref * (family[a] - family[b])) / UNIT)
        p = 1 / (1 + np.exp(-eta))
        u = rng.random(n_battles)
        tie = (u > 0.85) if s == 0 else np.zeros(n_battles, dtype=bool)
        y = (u < (0.85 if s == 0 else 1.0) * p).astype(float)
        if s == n_sources - 1 and s > 0:
            y = np.round(np.clip(p + rng.normal(0, 0.2, n_battles), 0, 1) * 4) / 4  # five-level verdicts
        rows_y.append(y)
        rows_tie.append(tie)
    return CompositeData(
        models=tuple(f"m{i}" for i in range(n_models)),
        sources=("humans", *(f"judge:{s}" for s in range(1, n_sources))),
        model_a=np.tile(a, n_sources),
        model_b=np.tile(b, n_sources),
        source=np.repeat(np.arange(n_sources, dtype=np.int64), n_battles),
        score=np.concatenate(rows_y),
        tie=np.concatenate(rows_tie),
        battle=np.tile(np.arange(n_battles, dtype=np.int64), n_sources),
        family={1: "fam"} if n_sources > 1 else {},
        model_family=["fam", "fam", "fam"] + [None] * (n_models - 3),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--votes", type=int, default=1_000_000)
    parser.add_argument("--sources", type=int, default=5)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    if not (args.sources >= 1 and args.models >= 4 and args.votes >= 10 * args.sources and args.rounds >= 1):
        parser.error("need sources >= 1, models >= 4, votes >= 10 per source and rounds >= 1")
    data = synthetic(args.votes, args.sources, args.models, args.seed)
    figures: dict[str, float] = {}

    start = time.perf_counter()
    fit = fit_composite(data)
    figures["composite_fit_s"] = time.perf_counter() - start
    start = time.perf_counter()
    fit_composite(data, with_cov=False, x0=fit.x)
    figures["composite_refit_s"] = time.perf_counter() - start
    start = time.perf_counter()
    bootstrap_composite(data, rounds=args.rounds, seed=args.seed)
    figures["composite_bootstrap_s"] = time.perf_counter() - start

    start = time.perf_counter()
    # the pooled votes as plain outcomes: soft verdicts rounded to the nearer side, 0.5 a tie
    score = np.where(data.tie, 0.5, data.score)
    outcome = np.select([score > 0.5, score < 0.5], [Outcome.MODEL_A, Outcome.MODEL_B], Outcome.TIE)
    counts = aggregate_codes(data.model_a, data.model_b, outcome, models=data.models)
    plain = fit_bt(counts)
    figures["plain_fit_s"] = time.perf_counter() - start
    start = time.perf_counter()
    bootstrap_ratings(counts, n_rounds=args.rounds, fit=plain, random_state=args.seed)
    figures["plain_bootstrap_s"] = time.perf_counter() - start
    figures["fit_ratio"] = figures["composite_fit_s"] / figures["plain_fit_s"]
    figures["bootstrap_ratio"] = figures["composite_bootstrap_s"] / figures["plain_bootstrap_s"]

    print(
        f"# {args.votes:,} votes ({len(data.model_a):,} used), {args.sources} sources, "
        f"{args.models} models, {args.rounds:,} rounds; converged {fit.converged}"
    )
    print_table(
        ["what", "composite s", "plain s", "ratio"],
        [
            ["fit", figures["composite_fit_s"], figures["plain_fit_s"], figures["fit_ratio"]],
            ["warm refit", figures["composite_refit_s"], None, None],
            [
                f"bootstrap x{args.rounds}",
                figures["composite_bootstrap_s"],
                figures["plain_bootstrap_s"],
                figures["bootstrap_ratio"],
            ],
        ],
    )
    emit_json_line({"votes": len(data.model_a), "sources": args.sources, **figures, **machine_info()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
