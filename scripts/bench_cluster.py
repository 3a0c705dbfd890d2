"""Benchmark the cluster bootstrap against the i.i.d. one on the same votes: seconds and their ratio.

The cluster bootstrap aggregates the votes per cluster into cells once, then draws each round as a
multinomial over clusters times the per-cluster cell counts; the target is at most twice the i.i.d.
bootstrap's time (1M votes, 1,000 rounds). Both run side by side in this process, alternately, on the
same fit; the figures are medians over ``--repeats``.

    .venv/bin/python scripts/bench_cluster.py --votes 1000000 --models 100 --annotators 5000 --rounds 1000
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from leaderboard import BTSpec, bootstrap_ratings, cluster_cells, fit_bt, simulate_battles


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--votes", type=int, default=20_000)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--annotators", type=int, default=500)
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--cluster", default="annotator", help="annotator, prompt or annotator,prompt")
    parser.add_argument("--method", choices=("bt", "davidson-position"), default="bt")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if min(args.votes, args.models - 1, args.annotators, args.prompts, args.rounds, args.repeats) < 1:
        parser.error("sizes must be positive (and --models at least 2)")
    spec = BTSpec() if args.method == "bt" else BTSpec(position="common", ties="davidson")
    truth = np.random.default_rng(args.seed).normal(1000, 150, args.models)
    sim = simulate_battles(
        truth,
        args.votes,
        random_state=args.seed,
        pair_skew=0.5,
        position=30.0,
        nu=0.3 if args.method != "bt" else 0.0,
        n_annotators=args.annotators,
        annotator_sd=40.0,
        annotator_position_sd=80.0,
        n_prompts=args.prompts,
    )
    counts = sim.counts()
    fit = fit_bt(counts, spec=spec)
    t0 = time.perf_counter()
    clusters = cluster_cells(sim, counts, args.cluster)
    aggregate = time.perf_counter() - t0
    iid_times: list[float] = []
    cluster_times: list[float] = []
    widths: dict[str, float] = {}
    for r in range(args.repeats):
        for name, given in (("iid", None), ("cluster", clusters)):
            t0 = time.perf_counter()
            boot = bootstrap_ratings(
                counts, fit=fit, n_rounds=args.rounds, random_state=r, n_jobs=args.jobs, clusters=given
            )
            (iid_times if given is None else cluster_times).append(time.perf_counter() - t0)
            widths[name] = float(np.mean(boot.ci_high - boot.ci_low))
    iid = float(np.median(iid_times))
    clustered = float(np.median(cluster_times))
    result = {
        "votes": args.votes,
        "models": args.models,
        "cells": counts.n_cells,
        "cluster": args.cluster,
        "clusters": list(clusters.n_levels),
        "cluster_rows": int(clusters.codes.shape[0]),
        "method": args.method,
        "rounds": args.rounds,
        "aggregate_seconds": round(aggregate, 3),
        "iid_seconds": round(iid, 3),
        "cluster_seconds": round(clustered, 3),
        "ratio": round((clustered + aggregate) / iid, 3),
        "mean_width_iid": round(widths["iid"], 2),
        "mean_width_cluster": round(widths["cluster"], 2),
    }
    print(
        f"{args.votes:,} votes, {args.rounds} rounds: i.i.d. {iid:.2f} s, cluster by {args.cluster} "
        f"{clustered:.2f} s (+{aggregate:.2f} s aggregation), ratio {result['ratio']:.2f}"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
