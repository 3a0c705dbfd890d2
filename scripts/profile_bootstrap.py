"""Where the time of a 1,000-round bootstrap goes, and the old-vs-new multinomial sampler side by side.

Usage::

    python scripts/profile_bootstrap.py                      # 1M/100 and 3M/250, 1,000 rounds
    python scripts/profile_bootstrap.py --sizes medium --rounds 200 --jobs 1

For each size (seeded synthetic battles from ``_bench_common``; generating them is not timed) it times
aggregation, the point fit and ``bootstrap_ratings`` end to end, and checks the point fit against the
exact maximum-likelihood fit of ``bench_fit.exact_mle`` (in Elo, after centring). Then, in the same
process and on the same categories, it times the two samplers in alternation, block by block:
numpy's ``Generator.multinomial`` (the former method) and :func:`leaderboard.bt.bootstrap.draw_multinomial`
(Poisson, then an exact correction of the total), plus one batched refit of a block. Sampler figures
are CPU seconds of one thread (the minimum over repeats, which is the least disturbed by other jobs on
a shared machine); the ratio of the two is the figure to trust. The 1-minute load average is printed
with every figure. The last line is a JSON object with all figures.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _bench_common import SIZES, emit_json_line, machine_info, print_table, synthetic_battles  # noqa: E402
from bench_fit import exact_mle  # noqa: E402

from leaderboard.bt.bootstrap import _Categories, bootstrap_ratings, draw_multinomial  # noqa: E402
from leaderboard.bt.fit import fit_bt  # noqa: E402
from leaderboard.bt.newton import solve_bt_batch  # noqa: E402
from leaderboard.data import aggregate_codes  # noqa: E402


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _cpu_min(fn: Any, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def profile_size(
    name: str,
    n_votes: int,
    n_models: int,
    *,
    rounds: int,
    jobs: int | None,
    block: int,
    repeats: int,
    seed: int,
) -> dict[str, Any]:
    """End-to-end stage times for one size, then the samplers and one refit side by side."""
    battles = synthetic_battles(n_votes, n_models, random_state=seed)
    out: dict[str, Any] = {"size": name, "votes": n_votes, "models": n_models, "rounds": rounds}
    out["load_start"] = _load()
    t0 = time.perf_counter()
    counts = aggregate_codes(battles.model_a, battles.model_b, battles.outcome, models=battles.models)
    t1 = time.perf_counter()
    fit = fit_bt(counts)
    t2 = time.perf_counter()
    boot = bootstrap_ratings(counts, fit=fit, n_rounds=rounds, random_state=seed, n_jobs=jobs)
    t3 = time.perf_counter()
    out.update(
        aggregate_s=t1 - t0,
        fit_s=t2 - t1,
        bootstrap_s=t3 - t2,
        total_s=t3 - t0,
        load_end=_load(),
        cells=counts.n_cells,
    )
    exact = exact_mle(counts)
    out["max_rating_diff_elo"] = float(np.max(np.abs((fit.rating - fit.rating.mean()) - exact)))
    out["n_degenerate"] = boot.n_degenerate

    cats = _Categories(counts, fit)
    out["categories"] = int(cats.votes.size)
    rng_old = np.random.default_rng(seed)
    rng_new = np.random.default_rng(seed + 1)
    old_best = new_best = math.inf
    out["load_sampler"] = _load()
    for _ in range(repeats):  # alternate, so both see the same machine
        old_best = min(old_best, _cpu_min(lambda: rng_old.multinomial(cats.n_total, cats.p, size=block), 1))
        new_best = min(new_best, _cpu_min(lambda: draw_multinomial(cats.votes, block, rng_new), 1))
    draws = draw_multinomial(cats.votes, block, rng_new).astype(np.float64)
    n = np.asarray(draws @ cats.to_n)
    s = np.asarray(draws @ cats.to_s)
    st = fit.stats
    fixed = fit.hessian / math.log(fit.base) ** 2

    def refit() -> None:
        solve_bt_batch(st.lo, st.hi, n, s, n_models=n_models, theta0=fit.theta, fixed_hessian=fixed, tol=1e-9)

    with threadpool_limits(limits=1, user_api="blas"):  # as bootstrap_ratings runs it
        refit_best = _cpu_min(refit, repeats)
    k = cats.votes.size
    out.update(
        old_sampler_ms_per_round=1e3 * old_best / block,
        new_sampler_ms_per_round=1e3 * new_best / block,
        old_ns_per_category=1e9 * old_best / block / k,
        new_ns_per_category=1e9 * new_best / block / k,
        sampler_speedup=old_best / new_best,
        refit_ms_per_round=1e3 * refit_best / block,
        load_sampler_end=_load(),
    )
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="medium,large", help=f"comma list of {', '.join(SIZES)}")
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=None, help="threads (default: bootstrap's default)")
    parser.add_argument("--block", type=int, default=50, help="rounds per sampler timing block")
    parser.add_argument("--repeats", type=int, default=5, help="alternating repeats of the sampler timing")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = []
    for name in args.sizes.split(","):
        n_votes, n_models = SIZES[name.strip()]
        results.append(
            profile_size(
                name.strip(),
                n_votes,
                n_models,
                rounds=args.rounds,
                jobs=args.jobs,
                block=args.block,
                repeats=args.repeats,
                seed=args.seed,
            )
        )
    print_table(
        [
            "size",
            "votes",
            "models",
            "cats",
            "aggregate s",
            "fit s",
            "bootstrap s",
            "total s",
            "load",
            "max diff Elo",
        ],
        [
            [
                r["size"],
                r["votes"],
                r["models"],
                r["categories"],
                r["aggregate_s"],
                r["fit_s"],
                r["bootstrap_s"],
                r["total_s"],
                f"{r['load_start']}-{r['load_end']}",
                r["max_rating_diff_elo"],
            ]
            for r in results
        ],
    )
    print()
    print_table(
        [
            "size",
            "old ms/round",
            "new ms/round",
            "old ns/cat",
            "new ns/cat",
            "sampler speedup",
            "refit ms/round",
            "load",
        ],
        [
            [
                r["size"],
                r["old_sampler_ms_per_round"],
                r["new_sampler_ms_per_round"],
                r["old_ns_per_category"],
                r["new_ns_per_category"],
                r["sampler_speedup"],
                r["refit_ms_per_round"],
                f"{r['load_sampler']}-{r['load_sampler_end']}",
            ]
            for r in results
        ],
    )
    emit_json_line({"machine": machine_info(), "rounds": args.rounds, "jobs": args.jobs, "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
