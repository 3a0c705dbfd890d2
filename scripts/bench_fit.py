"""Benchmark the Bradley-Terry fit and its bootstrap against the public implementations, on the same data.

Usage::

    python scripts/bench_fit.py --size medium            # 1M votes, 100 models, 1,000 rounds
    python scripts/bench_fit.py --votes 100000 --models 50 --rounds 200
    python scripts/bench_fit.py --data battles.jsonl.gz --rounds 1000

Every contender runs in a fresh subprocess on the same seeded battles (saved once to a temporary .npz),
so the figures do not disturb each other and each one's peak memory is its own: the worker reads
``ru_maxrss`` (the kernel's high-water resident set size) and also reports the resident size just before
the timed work, so the difference is what the contender itself needed.

Contenders (each called through its own public API):

* ``ours``: ``leaderboard`` -- aggregation, point fit, bootstrap, sandwich intervals;
* ``arena-rank``: ``PairDataset.from_pandas`` + ``BradleyTerry`` (its bootstrap, its sandwich);
* ``evalica``: ``evalica.bootstrap(evalica.bradley_terry, ...)`` with percentile intervals (its default,
  BCa, needs a jackknife of one refit per vote);
* ``choix``: ``ilsr_pairwise_dense`` on the win matrix, point fit only;
* ``lmsys-current``: the current public Chatbot Arena method, written here from its description: L-BFGS
  on the aggregated (model_a, model_b, outcome) cells, a multinomial resample of the cells per round,
  refit each round;
* ``lmsys-classic``: the classic notebook method: resample the votes with replacement, refit
  scikit-learn's ``LogisticRegression`` each round (with a sparse design matrix; the notebook's dense
  one needs 16 bytes per vote per model).

A contender whose full run would take longer than ``--budget`` seconds runs fewer rounds (enough for
about ``--extrapolate-seconds``) and its bootstrap time is extrapolated linearly; the table says so.

Agreement is measured against the exact maximum-likelihood fit (Newton's method on the cells, run to
machine precision here) after centring every rating vector on its mean.

The last line of output is a JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _bench_common import (  # noqa: E402
    SIZES,
    current_rss_mb,
    emit_json_line,
    load_battles_file,
    load_battles_npz,
    machine_info,
    peak_rss_mb,
    print_table,
    save_battles,
    synthetic_battles,
)

from leaderboard.battles import Battles  # noqa: E402
from leaderboard.data import Outcome, PairCounts  # noqa: E402

FloatArray = npt.NDArray[np.float64]

ELO_PER_NAT = 400.0 / math.log(10.0)
BOOTSTRAP_PEERS = ("arena-rank", "evalica", "lmsys-current", "lmsys-classic")
ALL_CONTENDERS = ("ours", "arena-rank", "evalica", "choix", "lmsys-current", "lmsys-classic")
PILOT_ROUNDS = 3


# ----------------------------------------------------------------------------------------------------
# The reference: the exact maximum-likelihood fit.


def exact_mle(counts: PairCounts, *, tol: float = 1e-13, max_iter: int = 100) -> FloatArray:
    """Plain Bradley-Terry MLE (ties as half a win each), by Newton's method, centred, on the Elo scale.

    The Hessian is a weighted graph Laplacian; adding the all-ones outer product pins the free constant
    (sum of ratings zero) so each Newton step is a single dense solve.
    """
    n = counts.n_models
    i, j, w = counts.model_a, counts.model_b, counts.count
    y = np.select(
        [counts.outcome == Outcome.MODEL_A, counts.outcome == Outcome.MODEL_B], [1.0, 0.0], default=0.5
    )
    theta = np.zeros(n)
    for _ in range(max_iter):
        d = theta[i] - theta[j]
        p = 1.0 / (1.0 + np.exp(-d))
        r = w * (y - p)
        grad = np.bincount(i, r, n) - np.bincount(j, r, n)
        h = w * p * (1.0 - p)
        hess = np.zeros((n, n))
        np.add.at(hess, (i, j), -h)
        np.add.at(hess, (j, i), -h)
        hess[np.diag_indices(n)] = -hess.sum(axis=1)
        step = np.linalg.solve(hess + np.ones((n, n)) / n, grad)
        theta += step
        theta -= theta.mean()
        if np.max(np.abs(step)) < tol:
            break
    else:
        raise RuntimeError("the reference Newton fit did not converge")
    rating: FloatArray = ELO_PER_NAT * theta
    return rating


# ----------------------------------------------------------------------------------------------------
# Contenders. Each returns a dict of timings and results; run inside a worker subprocess.


class Plan:
    """How many rounds to time, and whether to extrapolate (shared by every bootstrap contender)."""

    def __init__(self, rounds: int, budget: float, extrapolate_seconds: float) -> None:
        self.rounds = rounds
        self.budget = budget
        self.extrapolate_seconds = extrapolate_seconds

    def run(self, boot: Callable[[int], tuple[FloatArray, FloatArray]]) -> dict[str, Any]:
        """Time ``boot(k)`` (k rounds -> (ci_low, ci_high)); extrapolate to ``rounds`` when too slow."""
        if self.rounds <= PILOT_ROUNDS:
            t0 = time.perf_counter()
            low, high = boot(self.rounds)
            return _boot_result(time.perf_counter() - t0, self.rounds, self.rounds, low, high)
        t0 = time.perf_counter()
        low, high = boot(PILOT_ROUNDS)
        pilot = time.perf_counter() - t0
        estimate = pilot / PILOT_ROUNDS * self.rounds
        if estimate <= self.budget:
            t0 = time.perf_counter()
            low, high = boot(self.rounds)
            return _boot_result(time.perf_counter() - t0, self.rounds, self.rounds, low, high)
        k = int(min(self.rounds, max(PILOT_ROUNDS, self.extrapolate_seconds / (pilot / PILOT_ROUNDS))))
        if k > PILOT_ROUNDS:
            t0 = time.perf_counter()
            low, high = boot(k)
            elapsed = time.perf_counter() - t0
        else:
            elapsed = pilot
        return _boot_result(elapsed / k * self.rounds, k, self.rounds, low, high)


def _boot_result(
    seconds: float, timed: int, rounds: int, low: FloatArray, high: FloatArray
) -> dict[str, Any]:
    return {
        "boot_s": seconds,
        "rounds_timed": timed,
        "extrapolated": timed < rounds,
        "ci_low": low.tolist(),
        "ci_high": high.tolist(),
    }


def _percentiles(samples: FloatArray, level: float) -> tuple[FloatArray, FloatArray]:
    lo, hi = np.percentile(samples, [50 * (1 - level), 50 * (1 + level)], axis=0)
    return lo, hi


def run_ours(battles: Battles, plan: Plan, level: float, seed: int) -> dict[str, Any]:
    """Our pipeline through the leaderboard package's public API."""
    import leaderboard
    from leaderboard.data import aggregate_codes

    fit_bt = leaderboard.fit_bt
    bootstrap_ratings = leaderboard.bootstrap_ratings
    sandwich_intervals = leaderboard.sandwich_intervals

    t0 = time.perf_counter()
    counts = aggregate_codes(battles.model_a, battles.model_b, battles.outcome, models=battles.models)
    t1 = time.perf_counter()
    fit = fit_bt(counts)
    t2 = time.perf_counter()
    boot = bootstrap_ratings(counts, n_rounds=plan.rounds, level=level, random_state=seed, fit=fit)
    t3 = time.perf_counter()
    sandwich = sandwich_intervals(counts, fit=fit, level=level)
    t4 = time.perf_counter()
    rating = np.asarray(fit.rating, dtype=float)
    lo, hi = np.asarray(boot.ci_low, dtype=float), np.asarray(boot.ci_high, dtype=float)
    return {
        "prep_s": t1 - t0,
        "fit_s": t2 - t1,
        "boot_s": t3 - t2,
        "sandwich_s": t4 - t3,
        "rounds_timed": plan.rounds,
        "extrapolated": False,
        "rating": rating.tolist(),
        "ci_low": lo.tolist(),
        "ci_high": hi.tolist(),
        "sandwich_low": np.asarray(sandwich.ci_low, dtype=float).tolist(),
        "sandwich_high": np.asarray(sandwich.ci_high, dtype=float).tolist(),
        "cells": counts.n_cells,
    }


def run_arena_rank(battles: Battles, plan: Plan, level: float, seed: int) -> dict[str, Any]:
    """arena-rank: its dataset builder, its L-BFGS fit (JAX), its bootstrap and its sandwich."""
    import pandas as pd
    from arena_rank.models.bradley_terry import BradleyTerry
    from arena_rank.utils.data_utils import PairDataset

    # Its bootstrap uses a multiprocessing pool; forking after JAX has started its threads deadlocks,
    # so its pool workers come from a fork server that imported arena-rank but never ran JAX.
    multiprocessing.set_forkserver_preload(["arena_rank.models.bradley_terry"])
    multiprocessing.set_start_method("forkserver", force=True)
    names = np.asarray(battles.models, dtype=object)
    frame = pd.DataFrame(
        {
            "model_a": names[battles.model_a],
            "model_b": names[battles.model_b],
            "winner": battles.winner_strings(),
        }
    )
    t0 = time.perf_counter()
    dataset = PairDataset.from_pandas(frame)
    t1 = time.perf_counter()
    model = BradleyTerry(n_competitors=dataset.n_competitors)
    model.fit(dataset)
    point = model.compute_ratings_and_cis(dataset, significance_level=1 - level, ci_method="sandwich")
    rating = np.asarray(point["ratings"], dtype=float)  # blocks until JAX is done
    t2 = time.perf_counter()
    # Its sandwich alone, on the fitted model (the call above fitted and then ran it once).
    point = model.compute_ratings_and_cis(dataset, significance_level=1 - level, ci_method="sandwich")
    sandwich_low = np.asarray(point["rating_lower"], dtype=float)
    sandwich_high = np.asarray(point["rating_upper"], dtype=float)
    t3 = time.perf_counter()

    def boot(k: int) -> tuple[FloatArray, FloatArray]:
        out = model.compute_ratings_and_cis(
            dataset, significance_level=1 - level, ci_method="bootstrap", num_bootstrap=k, seed=seed
        )
        return np.asarray(out["rating_lower"], dtype=float), np.asarray(out["rating_upper"], dtype=float)

    result = plan.run(boot)
    order = _order_by(list(dataset.competitors), battles.models)
    result.update(
        prep_s=t1 - t0,
        fit_s=t2 - t1,
        sandwich_s=t3 - t2,
        rating=rating[order].tolist(),
        ci_low=np.asarray(result["ci_low"])[order].tolist(),
        ci_high=np.asarray(result["ci_high"])[order].tolist(),
        sandwich_low=sandwich_low[order].tolist(),
        sandwich_high=sandwich_high[order].tolist(),
    )
    return result


def run_evalica(battles: Battles, plan: Plan, level: float, seed: int) -> dict[str, Any]:
    """evalica: ``bradley_terry`` for the fit, ``bootstrap`` (percentile) for the intervals."""
    import evalica

    names = np.asarray(battles.models, dtype=object)
    xs = names[battles.model_a].tolist()
    ys = names[battles.model_b].tolist()
    code = np.array([evalica.Winner.X, evalica.Winner.Y, evalica.Winner.Draw, evalica.Winner.Draw])
    winners = [evalica.Winner(int(w)) for w in code[battles.outcome]]
    t0 = time.perf_counter()
    fit = evalica.bradley_terry(xs, ys, winners)
    t1 = time.perf_counter()
    scores = fit.scores.reindex(list(battles.models)).to_numpy(dtype=float)
    rating = 400.0 * np.log10(scores)

    def boot(k: int) -> tuple[FloatArray, FloatArray]:
        out = evalica.bootstrap(
            evalica.bradley_terry,
            xs,
            ys,
            winners,
            n_resamples=k,
            confidence_level=level,
            bootstrap_method="percentile",
            random_state=seed,
        )
        # Percentiles of the log strengths, so the intervals are on the Elo scale like everyone else's.
        dist = out.distribution.reindex(columns=list(battles.models)).to_numpy(dtype=float)
        return _percentiles(400.0 * np.log10(dist), level)

    result = plan.run(boot)
    result.update(prep_s=0.0, fit_s=t1 - t0, rating=rating.tolist())
    return result


def run_choix(battles: Battles, plan: Plan, level: float, seed: int) -> dict[str, Any]:  # noqa: ARG001
    """choix: the point fit only (it has no bootstrap), from the dense win matrix (ties half each way)."""
    import choix

    n = len(battles.models)
    t0 = time.perf_counter()
    wins = np.zeros((n, n))
    a, b, o = battles.model_a, battles.model_b, battles.outcome
    np.add.at(wins, (a[o == Outcome.MODEL_A], b[o == Outcome.MODEL_A]), 1.0)
    np.add.at(wins, (b[o == Outcome.MODEL_B], a[o == Outcome.MODEL_B]), 1.0)
    tie = o >= Outcome.TIE
    np.add.at(wins, (a[tie], b[tie]), 0.5)
    np.add.at(wins, (b[tie], a[tie]), 0.5)
    t1 = time.perf_counter()
    params = choix.ilsr_pairwise_dense(wins, max_iter=1000)
    t2 = time.perf_counter()
    return {"prep_s": t1 - t0, "fit_s": t2 - t1, "rating": (ELO_PER_NAT * params).tolist()}


def _cells(battles: Battles) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], FloatArray, FloatArray]:
    """The public method's aggregation: unique (model_a, model_b, score) cells with their counts."""
    import pandas as pd

    score = np.select(
        [battles.outcome == Outcome.MODEL_A, battles.outcome == Outcome.MODEL_B], [1.0, 0.0], 0.5
    )
    frame = pd.DataFrame({"a": battles.model_a, "b": battles.model_b, "y": score})
    grouped = frame.groupby(["a", "b", "y"], sort=False).size().reset_index(name="n")
    return (
        grouped["a"].to_numpy(np.int64),
        grouped["b"].to_numpy(np.int64),
        grouped["y"].to_numpy(float),
        grouped["n"].to_numpy(float),
    )


def _lbfgs_fit(
    a: npt.NDArray[np.int64], b: npt.NDArray[np.int64], y: FloatArray, w: FloatArray, n: int
) -> FloatArray:
    """Weighted logistic loss on the cells, minimised by SciPy's L-BFGS with an analytic gradient."""
    from scipy.optimize import minimize
    from scipy.special import expit, log1p

    total = w.sum()

    def loss(theta: FloatArray) -> tuple[float, FloatArray]:
        d = theta[a] - theta[b]
        p = expit(d)
        value = -np.sum(w * (y * d - (np.maximum(d, 0) + log1p(np.exp(-np.abs(d)))))) / total
        r = w * (y - p) / total
        grad: FloatArray = (np.bincount(b, r, n) - np.bincount(a, r, n)).astype(np.float64)
        return float(value), grad

    res = minimize(loss, np.zeros(n), jac=True, method="L-BFGS-B", options={"maxiter": 1000, "gtol": 1e-9})
    theta: FloatArray = res.x - res.x.mean()
    return ELO_PER_NAT * theta


def run_lmsys_current(battles: Battles, plan: Plan, level: float, seed: int) -> dict[str, Any]:
    """Current public Chatbot Arena method: L-BFGS on cells, multinomial resampling of the cells."""
    n = len(battles.models)
    t0 = time.perf_counter()
    a, b, y, w = _cells(battles)
    t1 = time.perf_counter()
    rating = _lbfgs_fit(a, b, y, w, n)
    t2 = time.perf_counter()

    def boot(k: int) -> tuple[FloatArray, FloatArray]:
        rng = np.random.default_rng(seed)
        draws = rng.multinomial(int(w.sum()), w / w.sum(), size=k).astype(float)
        samples = np.stack([_lbfgs_fit(a, b, y, draws[r], n) for r in range(k)])
        return _percentiles(samples, level)

    result = plan.run(boot)
    result.update(prep_s=t1 - t0, fit_s=t2 - t1, rating=rating.tolist())
    return result


def run_lmsys_classic(battles: Battles, plan: Plan, level: float, seed: int) -> dict[str, Any]:
    """Classic notebook method: two rows per vote (a tie is one win each way), LogisticRegression, and
    a with-replacement resample of the votes per round."""
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression

    n_models = len(battles.models)
    a, b, o = battles.model_a, battles.model_b, battles.outcome

    def fit(idx: npt.NDArray[np.int64]) -> FloatArray:
        aa, bb, oo = a[idx], b[idx], o[idx]
        m = aa.size
        rows = np.repeat(np.arange(2 * m), 2)
        cols = np.empty(4 * m, dtype=np.int64)
        cols[0::2] = np.concatenate([aa, aa])
        cols[1::2] = np.concatenate([bb, bb])
        vals = np.tile([math.log(10.0), -math.log(10.0)], 2 * m)
        x = sparse.csr_matrix((vals, (rows, cols)), shape=(2 * m, n_models))
        label = np.concatenate([oo == Outcome.MODEL_A, (oo == Outcome.MODEL_A) | (oo >= Outcome.TIE)])
        lr = LogisticRegression(fit_intercept=False, penalty=None, tol=1e-6)
        lr.fit(x, label.astype(int))
        coef = np.asarray(400.0 * lr.coef_[0], dtype=np.float64)
        centred: FloatArray = coef - coef.mean()
        return centred

    t0 = time.perf_counter()
    rating = fit(np.arange(a.size))
    t1 = time.perf_counter()

    def boot(k: int) -> tuple[FloatArray, FloatArray]:
        rng = np.random.default_rng(seed)
        samples = np.stack([fit(rng.integers(0, a.size, a.size)) for _ in range(k)])
        return _percentiles(samples, level)

    result = plan.run(boot)
    result.update(prep_s=0.0, fit_s=t1 - t0, rating=rating.tolist())
    return result


RUNNERS: dict[str, Callable[[Battles, Plan, float, int], dict[str, Any]]] = {
    "ours": run_ours,
    "arena-rank": run_arena_rank,
    "evalica": run_evalica,
    "choix": run_choix,
    "lmsys-current": run_lmsys_current,
    "lmsys-classic": run_lmsys_classic,
}
IMPORTS = {
    "ours": "leaderboard",
    "arena-rank": "arena_rank.models.bradley_terry",
    "evalica": "evalica",
    "choix": "choix",
    "lmsys-current": "scipy.optimize",
    "lmsys-classic": "sklearn.linear_model",
}


def _order_by(names: list[str], models: tuple[str, ...]) -> npt.NDArray[np.int64]:
    where = {name: k for k, name in enumerate(names)}
    return np.array([where[m] for m in models], dtype=np.int64)


def worker(args: argparse.Namespace) -> int:
    """Run one contender on the saved battles and print its figures as one JSON line."""
    import importlib

    name = args.worker
    try:
        importlib.import_module(IMPORTS[name])
        if name == "ours":
            import leaderboard

            missing = [
                f
                for f in ("fit_bt", "bootstrap_ratings", "sandwich_intervals")
                if not hasattr(leaderboard, f)
            ]
            if missing:
                raise ImportError(f"leaderboard does not export {', '.join(missing)} yet")
    except ImportError as exc:
        print(json.dumps({"name": name, "skipped": f"not importable: {exc}"}), flush=True)
        return 0
    battles = load_battles_npz(Path(args.npz))
    plan = Plan(args.rounds, args.budget, args.extrapolate_seconds)
    rss_before = current_rss_mb()
    t0 = time.perf_counter()
    result = RUNNERS[name](battles, plan, args.level, args.seed)
    result["wall_s"] = time.perf_counter() - t0
    result["name"] = name
    result["rss_before_mb"] = rss_before
    result["peak_rss_mb"] = peak_rss_mb()
    result["peak_rss_children_mb"] = peak_rss_mb(children=True)
    print(json.dumps(result), flush=True)
    return 0


# ----------------------------------------------------------------------------------------------------
# The parent: data, workers, agreement, the table and the JSON line.


def _run_worker(name: str, npz: Path, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        name,
        "--npz",
        str(npz),
        "--rounds",
        str(args.rounds),
        "--budget",
        str(args.budget),
        "--extrapolate-seconds",
        str(args.extrapolate_seconds),
        "--level",
        str(args.level),
        "--seed",
        str(args.seed),
    ]
    env = dict(os.environ, PYTHONWARNINGS="ignore", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    timeout = 3 * args.budget + 4 * args.extrapolate_seconds + 600
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {"name": name, "failed": f"timed out after {timeout:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"name": name, "failed": f"exit {proc.returncode}: " + " / ".join(tail)}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _centred(x: Any) -> FloatArray:
    arr = np.asarray(x, dtype=float)
    out: FloatArray = arr - arr.mean()
    return out


def _width_ratio(res: dict[str, Any], ours: dict[str, Any] | None, low: str, high: str) -> float | None:
    if ours is None or low not in res or low not in ours:
        return None
    theirs = np.asarray(res[high]) - np.asarray(res[low])
    mine = np.asarray(ours[high]) - np.asarray(ours[low])
    return float(np.median(theirs / mine))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--size", choices=sorted(SIZES), default="medium", help="standard size (votes/models)"
    )
    parser.add_argument("--votes", type=int, help="number of synthetic votes (overrides --size)")
    parser.add_argument("--models", type=int, help="number of synthetic models (overrides --size)")
    parser.add_argument("--data", help="a Chatbot Arena battles file instead of synthetic data")
    parser.add_argument("--rounds", type=int, default=1000, help="bootstrap rounds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--level", type=float, default=0.95, help="interval level")
    parser.add_argument(
        "--contenders",
        default=",".join(ALL_CONTENDERS),
        help=f"comma list out of {', '.join(ALL_CONTENDERS)}",
    )
    parser.add_argument(
        "--budget", type=float, default=600.0, help="seconds a bootstrap may take before it is extrapolated"
    )
    parser.add_argument(
        "--extrapolate-seconds",
        type=float,
        default=60.0,
        help="seconds to spend timing an extrapolated bootstrap",
    )
    parser.add_argument("--worker", choices=ALL_CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--npz", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    unknown = sorted(set(contenders) - set(ALL_CONTENDERS))
    if unknown:
        raise SystemExit(f"unknown contenders: {', '.join(unknown)}")

    if args.data:
        battles = load_battles_file(args.data)
        source = str(args.data)
    else:
        default_votes, default_models = SIZES[args.size]
        n_votes = args.votes or default_votes
        n_models = args.models or default_models
        battles = synthetic_battles(n_votes, n_models, random_state=args.seed)
        source = f"synthetic(seed={args.seed})"
    counts = battles.counts()
    reference = exact_mle(counts)
    share = np.bincount(battles.outcome, minlength=4) / battles.n_votes
    print(
        f"{battles.n_votes:,} votes, {len(battles.models)} models, {counts.n_cells:,} cells, "
        f"{args.rounds} rounds; ties {share[2] + share[3]:.1%} (both bad {share[3]:.1%}), "
        f"left wins {share[0]:.1%} vs right {share[1]:.1%}; source {source}",
        flush=True,
    )

    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_fit_") as tmp:
        npz = Path(tmp) / "battles.npz"
        save_battles(battles, npz)
        for name in contenders:
            print(f"  running {name} ...", flush=True, file=sys.stderr)
            results[name] = _run_worker(name, npz, args)

    ours = results.get("ours") if "failed" not in results.get("ours", {"failed": 1}) else None
    if ours is not None and "skipped" in ours:
        ours = None
    ours_s = ours["prep_s"] + ours["fit_s"] + ours["boot_s"] if ours else None
    rows: list[list[object]] = []
    skipped: dict[str, str] = {}
    totals: dict[str, float] = {}
    diffs: dict[str, float] = {}
    for name, res in results.items():
        if "skipped" in res or "failed" in res:
            skipped[name] = res.get("skipped") or res["failed"]
            rows.append([name, None, None, None, None, None, None, None, None, None, skipped[name][:60]])
            continue
        has_boot = "boot_s" in res
        total = res["prep_s"] + res["fit_s"] + (res["boot_s"] if has_boot else 0.0)
        totals[name] = total
        diff = float(np.max(np.abs(_centred(res["rating"]) - _centred(reference))))
        diffs[name] = diff
        note = ""
        if res.get("extrapolated"):
            note = f"bootstrap extrapolated from {res['rounds_timed']} rounds"
        elif not has_boot:
            note = "point fit only"
        ratio = total / ours_s if (ours_s and has_boot) else None
        rows.append(
            [
                name,
                res["prep_s"],
                res["fit_s"],
                res.get("boot_s"),
                res.get("sandwich_s"),
                total,
                ratio,
                res["peak_rss_mb"],
                res["peak_rss_mb"] - res["rss_before_mb"],
                diff,
                note,
            ]
        )
    print()
    print_table(
        [
            "contender",
            "prep s",
            "fit s",
            f"boot s ({args.rounds})",
            "sandwich s",
            "total s",
            "x ours",
            "peak MB",
            "+MB",
            "max |dElo| vs MLE",
            "note",
        ],
        rows,
    )
    agreement_rows = []
    for name, res in results.items():
        if name in totals and name != "ours":
            agreement_rows.append(
                [
                    name,
                    res.get("rounds_timed"),
                    diffs[name],
                    _width_ratio(res, ours, "ci_low", "ci_high"),
                    _width_ratio(res, ours, "sandwich_low", "sandwich_high"),
                ]
            )
    if agreement_rows:
        print()
        print_table(
            ["contender", "rounds run", "max |dElo| vs MLE", "boot width / ours", "sandwich width / ours"],
            agreement_rows,
        )
        print(
            "Width ratios are medians over models of (peer interval width / ours); a peer's percentile "
            "interval from only a few rounds is too narrow, so read those with its 'rounds run'."
        )
    if skipped:
        print("\nskipped: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    print(
        "\nTimes are wall seconds on this machine; peak MB is the worker process's ru_maxrss (+MB: above its "
        "resident size before the timed work); 'x ours' is each bootstrap pipeline's total over ours."
    )

    peers = {k: v for k, v in totals.items() if k in BOOTSTRAP_PEERS}
    fastest = min(peers, key=peers.__getitem__) if peers else None
    figures: dict[str, Any] = {
        "benchmark": "fit",
        "votes": battles.n_votes,
        "models": len(battles.models),
        "cells": counts.n_cells,
        "rounds": args.rounds,
        "ours_s": ours_s,
        "ours_aggregate_s": ours["prep_s"] if ours else None,
        "ours_fit_s": ours["fit_s"] if ours else None,
        "ours_bootstrap_s": ours["boot_s"] if ours else None,
        "ours_sandwich_s": ours["sandwich_s"] if ours else None,
        "ours_peak_rss_mb": ours["peak_rss_mb"] if ours else None,
        "fastest_peer": fastest,
        "fastest_peer_s": peers[fastest] if fastest else None,
        "speedup_vs_fastest_peer": (peers[fastest] / ours_s) if (fastest and ours_s) else None,
        "max_rating_diff": diffs.get("ours"),
        "peers_s": {k: round(v, 3) for k, v in totals.items() if k != "ours"},
        "peers_extrapolated": [k for k, v in results.items() if v.get("extrapolated")],
        "max_rating_diff_peers": {k: v for k, v in diffs.items() if k != "ours"},
        "skipped": skipped,
        "machine": machine_info(),
    }
    emit_json_line(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
