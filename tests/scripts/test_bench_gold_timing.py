"""A tiny run of scripts/bench_gold_timing.py, so it cannot rot: it finishes and prints finite ratios."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_gold_timing.py"


def test_bench_gold_timing_small_run() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--votes", "60", "--rate", "0.2", "--prompts", "10", "--models", "4"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert figures["gold_fetch"]["n"] + figures["live_fetch"]["n"] == 60
    assert 0 < figures["gold_share"] < 0.5  # 12 expected; the bound only catches a broken serving path
    assert all(math.isfinite(v) and v > 0 for v in figures["ratios"].values())
