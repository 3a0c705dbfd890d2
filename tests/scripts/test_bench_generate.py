"""A tiny run of scripts/bench_generate.py against the scripted server, so it cannot rot: it must store
every answer through `arena generate` and print both walls side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fake_openai import FakeOpenAI, serve_fake_openai

ROOT = Path(__file__).resolve().parents[2]


def test_bench_generate_small_run() -> None:
    with serve_fake_openai(FakeOpenAI()) as fake:
        proc = subprocess.run(  # noqa: S603
            [sys.executable, str(ROOT / "scripts" / "bench_generate.py"), "--endpoint", f"a={fake.base_url}",
             "--endpoint", f"b={fake.base_url}@served-b", "-n", "10"],
            capture_output=True, text=True, timeout=240, check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
        assert fake.n_requests == 40  # 20 answers by arena generate, 20 by the bare client
        assert {b["model"] for b in fake.bodies} == {"a", "served-b"}
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert figures["answers"] == 20 and figures["endpoints"] == 2
    assert figures["generate_s"] > 0 and figures["bare_client_s"] > 0
    ratio = figures["generate_s"] / figures["bare_client_s"]
    assert abs(figures["generate_over_bare"] - ratio) < 0.05 * ratio + 0.01
