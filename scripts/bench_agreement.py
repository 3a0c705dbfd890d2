"""`arena agreement` at scale: 100,000 simulated battles (1,000 annotators, 5,000 prompts, 8 models, three
languages) read from a JSONL file and reported with every interval; prints the seconds of each stage and
their ratio to the 5 s budget (CPU seconds of this process beside wall seconds, the machine is shared)."""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from votes.reads.annotated import agreement_input_from_file, agreement_of

BUDGET = 5.0


def write_battles(path: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    pairs = np.array([rng.choice(8, 2, replace=False) for _ in range(n)])
    winners = rng.choice(["model_a", "model_b", "tie", "tie (bothbad)"], p=[0.4, 0.4, 0.1, 0.1], size=n)
    prompts, judges = rng.integers(5000, size=n), rng.integers(1000, size=n)
    with gzip.open(path, "wt") as fh:
        for k in range(n):
            row = {
                "question_id": str(prompts[k]),
                "model_a": f"m{pairs[k, 0]}",
                "model_b": f"m{pairs[k, 1]}",
                "winner": str(winners[k]),
                "judge": f"u{judges[k]}",
                "language": ("en", "fr", "de")[k % 3],
            }
            fh.write(json.dumps(row) + "\n")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "battles.jsonl.gz"
        write_battles(path, n)
        wall, cpu = time.perf_counter(), time.process_time()
        read = agreement_input_from_file(path)
        wall_read, cpu_read = time.perf_counter() - wall, time.process_time() - cpu
        wall, cpu = time.perf_counter(), time.process_time()
        agreement_of(read)
        wall_stats, cpu_stats = time.perf_counter() - wall, time.process_time() - cpu
    total_cpu = cpu_read + cpu_stats
    print(
        f"{n} battles: read {wall_read:.2f} s wall / {cpu_read:.2f} s CPU, report {wall_stats:.2f} s wall"
        f" / {cpu_stats:.2f} s CPU; CPU total / budget {total_cpu / BUDGET:.2f}, wall total / budget "
        f"{(wall_read + wall_stats) / BUDGET:.2f}"
    )


if __name__ == "__main__":
    main()
