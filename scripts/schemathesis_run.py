"""The long schemathesis run: every API operation with many generated requests (default 250 each).

Runs tests/arena/web/test_schemathesis.py with more examples: no 5xx, responses and content types as the
OpenAPI schema says. The last line is JSON.

    .venv/bin/python scripts/schemathesis_run.py --examples 250
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess  # nosec B404 - runs pytest on our own test file
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=250, help="generated requests per operation")
    args = parser.parse_args(argv)
    env = {**os.environ, "ARENA_SCHEMATHESIS_EXAMPLES": str(args.examples)}
    started = time.perf_counter()
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/arena/web/test_schemathesis.py",
    ]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)  # nosec B603
    tail = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr[-500:]
    print(result.stdout[-3000:])
    print(json.dumps({"examples_per_operation": args.examples, "passed": result.returncode == 0,
                      "summary": tail, "seconds": round(time.perf_counter() - started, 1)}))  # fmt: skip
    return result.returncode


if __name__ == "__main__":
    raise SystemExit(main())
