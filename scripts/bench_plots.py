"""Time every snapshot figure at 100 models with realistic names, drawn and saved as the snapshot does.

Every figure of a snapshot (the table :data:`leaderboard.snapshot.figures.FIGURES`: ratings, two
win-rate heatmaps, battle counts, average win rates, bootstrap) is drawn by its own drawer from one
seeded fit on synthetic battles and saved as SVG and PNG through ``save_figure``. Each tree is timed in
its own process (so font caches and imports are paid the same way a fresh ``arena recompute`` pays
them); ``--compare DIR`` (an unpacked ``git archive`` of an older commit that has the table) runs the
same drawing with that tree's ``leaderboard`` package side by side.

    PYTHONPATH=$PWD python scripts/bench_plots.py --compare /tmp/plots-old
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _names(n: int) -> tuple[str, ...]:
    """Model names as public boards have them: organisation prefixes, versions, up to ~48 characters."""
    stems = (
        "meta-llama/Llama-3.1-405B-Instruct-Turbo-v",
        "mistralai/Mixtral-8x22B-Instruct-v0.1-q",
        "Qwen/Qwen2.5-72B-Instruct-",
        "gpt-4o-2024-08-06-",
        "claude-3-5-sonnet-20241022-",
        "gemini-1.5-pro-exp-0827-",
    )
    return tuple(f"{stems[k % len(stems)]}{k:03d}" for k in range(n))


def _worker(n_models: int, n_votes: int, rounds: int, repeats: int) -> None:
    """Draw and save every figure ``repeats`` times; print the best time per figure as JSON."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _bench_common import synthetic_battles

    from leaderboard.bt.compute import compute_leaderboard
    from leaderboard.bt.request import FitRequest
    from leaderboard.snapshot.figures import FIGURES, FigureSources
    from leaderboard.snapshot.render import save_figure

    battles = synthetic_battles(n_votes, n_models, random_state=1)
    battles = replace(battles, models=_names(n_models))
    counts = battles.counts()
    board = compute_leaderboard(counts, FitRequest(n_rounds=rounds, random_state=0))
    sources = FigureSources(board, counts, [board.models[i] for i in board.order()])
    sources.matrices()  # made once, outside the figures' times
    best: dict[str, float] = {}
    cpu: dict[str, float] = {}
    first_total = 0.0
    digests: dict[str, str] = {}
    import hashlib

    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(repeats):
            for stem, spec in FIGURES.items():
                start, start_cpu = time.perf_counter(), time.process_time()
                paths = save_figure(spec.draw(sources), Path(tmp) / stem)
                elapsed = time.perf_counter() - start
                cpu[stem] = min(cpu.get(stem, float("inf")), time.process_time() - start_cpu)
                if repeat == 0:
                    first_total += elapsed
                    digests[stem] = hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()[:12]
                best[stem] = min(best.get(stem, float("inf")), elapsed)
    print(json.dumps({"best": best, "cpu": cpu, "first_total": first_total, "digests": digests}))


def _run(tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        f"--models={args.models}",
        f"--votes={args.votes}",
        f"--rounds={args.rounds}",
        f"--repeats={args.repeats}",
    ]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=tree).stdout  # nosec B603
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--votes", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compare", type=Path, help="an unpacked older tree to time side by side")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.models, args.votes, args.rounds, args.repeats)
        return
    trees = {"this tree": ROOT}
    if args.compare:
        trees["compare"] = args.compare.resolve()
    results = {label: _run(tree, args) for label, tree in trees.items()}
    print(
        f"{args.models} models, SVG + PNG per figure, best of {args.repeats} (wall s; CPU s in the last row);"
        f" load {os.getloadavg()[0]:.1f}"
    )
    header = ["figure", *trees]
    if args.compare:
        header += ["ratio old/new", "same bytes"]
    print("  ".join(f"{h:>18}" for h in header))
    rows = [*results["this tree"]["best"], "total"]
    for stem in rows:
        cells: list[str] = [stem]
        times = []
        for label in trees:
            best = results[label]["best"]
            assert isinstance(best, dict)
            t = sum(best.values()) if stem == "total" else best[stem]
            times.append(t)
            cells.append(f"{t:.3f}")
        if args.compare:
            cells.append(f"{times[1] / times[0]:.2f}x")
            if stem != "total":
                d = [results[label]["digests"] for label in trees]
                cells.append(str(d[0][stem] == d[1][stem]))
            else:
                cells.append("")
        print("  ".join(f"{c:>18}" for c in cells))
    print(
        "  ".join(
            f"{c:>18}" for c in ["total CPU", *(f"{sum(r['cpu'].values()):.3f}" for r in results.values())]
        )
    )
    summary: dict[str, float] = {
        f"plots_{label.replace(' ', '_')}_s": round(sum(r["best"].values()), 3)
        for label, r in results.items()
    }
    summary.update(
        {
            f"plots_cpu_{label.replace(' ', '_')}_s": round(sum(r["cpu"].values()), 3)
            for label, r in results.items()
        }
    )
    summary.update(
        {f"plots_first_{label.replace(' ', '_')}_s": r["first_total"] for label, r in results.items()}
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
