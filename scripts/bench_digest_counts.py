"""An import's occurrence counts on their own: seconds and peak memory for ten million distinct digests.

    .venv/bin/python scripts/bench_digest_counts.py [--rows 10000000] [--batch 20000] [--compare DIR]

:class:`votes.imports.digest_counts.DigestCounts` is what an import holds for every row of a file (to number
repeated rows), so at ten million rows its levels and their merges are the import's memory beyond one
batch. Each tree runs in its own process (``--compare DIR``: another checkout, e.g. before a change, run
side by side on the same load), feeding seeded random digests batch by batch as an import stages them;
its peak is the child's own ``ru_maxrss``. The last line is one JSON object with ``seconds`` and
``peak_mb`` per tree.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from _bench_common import emit_json_line, machine_info, print_table

ROOT = Path(__file__).resolve().parents[1]


def _nothing_earlier(_seqs: Sequence[int]) -> dict[int, str]:
    """The staged digests a repeat would be checked against: random digests never repeat."""
    return {}


def worker(rows: int, batch: int) -> None:
    """Feed ``rows`` random digests in batches and print ``seconds peak_mb`` (run in a child)."""
    from votes.imports.digest_counts import DigestCounts

    rng = np.random.default_rng(0)
    counts = DigestCounts()
    started = time.perf_counter()
    for first in range(0, rows, batch):
        size = min(batch, rows - first)
        digests = rng.bytes(20 * size).hex()
        part = [digests[i : i + 40] for i in range(0, 40 * size, 40)]
        counts.keys(part, first, _nothing_earlier)
    seconds = time.perf_counter() - started
    print(f"{seconds:.2f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")


def run_tree(tree: Path, rows: int, batch: int) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{ROOT / 'scripts'}"}
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        "--rows",
        str(rows),
        "--batch",
        str(batch),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=3600)
    seconds, peak = done.stdout.split()[-2:]
    return float(seconds), float(peak)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--compare", type=Path, help="another checkout to run side by side")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rows <= 0 or args.batch <= 0:
        parser.error("--rows and --batch must be positive")
    if args.worker:
        worker(args.rows, args.batch)
        return
    trees = {"this tree": ROOT, **({f"compare ({args.compare.name})": args.compare} if args.compare else {})}
    figures: dict[str, object] = {"rows": args.rows, "batch": args.batch, "machine": machine_info()}
    table = []
    for label, tree in trees.items():
        seconds, peak = run_tree(tree.resolve(), args.rows, args.batch)
        table.append([label, seconds, peak])
        prefix = "" if tree is ROOT else "compare_"
        figures[f"{prefix}seconds"], figures[f"{prefix}peak_mb"] = seconds, peak
    print_table(["tree", "seconds", "peak MB"], table)
    emit_json_line(figures)


if __name__ == "__main__":
    main()
