"""Time the two certificates a snapshot's metadata carries, fragility and precision, on a large board.

    PYTHONPATH=$PWD python scripts/bench_certificates.py [--votes 1000000] [--models 100]
        [--compare /tmp/old-tree] [--repeats 3]

The board is :func:`_bench_common.synthetic_battles` (the votes ``bench_end_to_end`` writes to its
Parquet file), fitted once with the default method. Each tree runs in its own process (``--compare``: an
unpacked ``git archive`` of an older commit) and reports wall and CPU seconds of
:func:`leaderboard.design.fragility.fragility` and :func:`leaderboard.design.precision.board_precision` (best
of ``--repeats``) and a digest of their answers, so the table also says whether the two trees agree. CPU
seconds are the steadier figure on a shared machine; wall seconds show threads waiting on each other
(the small linear algebra of both certificates used to run multi-threaded).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("fragility", "precision")


def _worker(n_votes: int, n_models: int, repeats: int) -> None:
    """Fit the board once, time each certificate ``repeats`` times; print one JSON line."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _bench_common import synthetic_battles

    from leaderboard.bt.compute import compute_leaderboard
    from leaderboard.bt.fit import fit_bt
    from leaderboard.bt.request import FitRequest
    from leaderboard.design.fragility import fragility
    from leaderboard.design.precision import board_precision

    counts = synthetic_battles(n_votes, n_models, random_state=0).counts()
    board = compute_leaderboard(counts, FitRequest(n_rounds=20, random_state=0))
    fit = fit_bt(counts)
    runs: dict[str, Callable[[], object]] = {
        "fragility": lambda: fragility(counts, fit=fit).describe(),
        "precision": lambda: board_precision(board, counts),
    }
    out: dict[str, Any] = {}
    for name, run in runs.items():
        wall, cpu = float("inf"), float("inf")
        answer: object = None
        for _ in range(repeats):
            w0, c0 = time.perf_counter(), time.process_time()
            answer = run()
            wall = min(wall, time.perf_counter() - w0)
            cpu = min(cpu, time.process_time() - c0)
        digest = hashlib.sha256(json.dumps(answer, sort_keys=True).encode()).hexdigest()[:12]
        out[name] = {"wall": wall, "cpu": cpu, "digest": digest}
    print(json.dumps(out))


def _run(tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        f"--votes={args.votes}",
        f"--models={args.models}",
        f"--repeats={args.repeats}",
    ]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=tree).stdout  # nosec B603
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--votes", type=int, default=1_000_000)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compare", type=Path, help="an unpacked older tree to time side by side")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.votes, args.models, args.repeats)
        return 0
    trees = {"this tree": ROOT}
    if args.compare:
        trees["compare"] = args.compare.resolve()
    results = {label: _run(tree, args) for label, tree in trees.items()}
    print(
        f"{args.votes:,} votes, {args.models} models, best of {args.repeats}; load {os.getloadavg()[0]:.1f}"
    )
    header = ["certificate"] + [f"{label} {kind}" for label in trees for kind in ("wall s", "CPU s")]
    if args.compare:
        header.append("same answer")
    print("  ".join(f"{h:>20}" for h in header))
    summary: dict[str, object] = {}
    for part in PARTS:
        cells = [part]
        for label, result in results.items():
            cells += [f"{result[part]['wall']:.3f}", f"{result[part]['cpu']:.3f}"]
            key = label.replace(" ", "_")
            summary[f"{part}_{key}_wall_s"] = round(result[part]["wall"], 3)
            summary[f"{part}_{key}_cpu_s"] = round(result[part]["cpu"], 3)
        if args.compare:
            same = len({result[part]["digest"] for result in results.values()}) == 1
            cells.append(str(same))
            summary[f"{part}_same_answer"] = same
        print("  ".join(f"{c:>20}" for c in cells))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
