"""Time `arena recompute` on a large battles file, twice, and check the two leaderboard.csv are identical.

    python scripts/bench_recompute.py --votes 1000000 --models 100 --bootstrap 1000 --seed 1

The file is simulated from known strengths (seeded) and written once as JSONL; each run is a separate
`arena recompute` process, timed from start to exit (imports included), with its progress bar shown.
"""

from __future__ import annotations

import argparse
import filecmp
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def write_battles(path: Path, *, n_votes: int, n_models: int, seed: int) -> None:
    """Simulated Chatbot Arena battles (model_a, model_b, winner, tstamp) as JSONL."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    names = np.array([f"model-{i:03d}" for i in range(n_models)])
    strength = np.linspace(1300.0, 900.0, n_models)
    a = rng.integers(0, n_models, n_votes)
    b = (a + rng.integers(1, n_models, n_votes)) % n_models
    p = 1.0 / (1.0 + 10.0 ** ((strength[b] - strength[a]) / 400.0))
    u = rng.random(n_votes)
    winner = np.where(u < 0.1, "tie", np.where(u < 0.1 + 0.9 * p, "model_a", "model_b"))
    frame = pd.DataFrame(
        {"model_a": names[a], "model_b": names[b], "winner": winner, "tstamp": 1.7e9 + np.arange(n_votes)}
    )
    frame.to_json(path, orient="records", lines=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--votes", type=int, default=1_000_000)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=Path("bench-recompute"))
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    source = args.workdir / f"battles-{args.votes}-{args.models}.jsonl"
    if not source.exists():
        started = time.perf_counter()
        write_battles(source, n_votes=args.votes, n_models=args.models, seed=args.seed)
        print(
            f"wrote {source} ({source.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - started:.1f} s"
        )
    arena = Path(sys.executable).with_name("arena")
    seconds = []
    for run in ("run1", "run2"):
        command = [str(arena), "recompute", "--from", str(source), "--bootstrap", str(args.bootstrap)]
        command += ["--seed", str(args.seed), "--out", str(args.workdir / run)]
        started = time.perf_counter()
        subprocess.run(command, check=True)
        seconds.append(time.perf_counter() - started)
        print(f"{run}: {seconds[-1]:.1f} s wall, end to end")
    same = filecmp.cmp(
        args.workdir / "run1" / "leaderboard.csv", args.workdir / "run2" / "leaderboard.csv", shallow=False
    )
    print(f"leaderboard.csv identical across runs: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
