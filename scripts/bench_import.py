"""Time `arena import` of a synthetic Chatbot Arena battles file (default 100,000 battles).

    .venv/bin/python scripts/bench_import.py [--battles 100000] [--database-url URL] [--conversations]

Writes the file to a temporary folder, imports it into an empty database (SQLite file by default), then
imports it again to show the idempotent path. Prints seconds for each step.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from sqlmodel import SQLModel

from leaderboard.data import OUTCOME_STRINGS
from votes.db import make_engine
from votes.io import import_file

WINNERS = tuple(OUTCOME_STRINGS.values())


def write_battles(
    path: Path, n: int, *, n_models: int = 30, conversations: bool = False, seed: int = 0
) -> None:
    """A random battles file in the Chatbot Arena format (JSONL)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n_models, n)
    b = (a + rng.integers(1, n_models, n)) % n_models
    w = rng.choice(4, n, p=[0.4, 0.4, 0.12, 0.08])
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            row: dict[str, object] = {
                "question_id": f"q{i}",
                "model_a": f"model-{a[i]:02d}",
                "model_b": f"model-{b[i]:02d}",
                "winner": WINNERS[w[i]],
                "judge": f"judge-{i % 500}",
                "turn": 1,
                "anony": True,
                "language": "English",
                "tstamp": 1_700_000_000.0 + i,
            }
            if conversations:
                question = {"role": "user", "content": f"Question number {i}?"}
                row["conversation_a"] = [question, {"role": "assistant", "content": f"A says {i}."}]
                row["conversation_b"] = [question, {"role": "assistant", "content": f"B says {i}."}]
            fh.write(json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--battles", type=int, default=100_000)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--conversations", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "battles.jsonl"
        write_battles(path, args.battles, conversations=args.conversations)
        url = args.database_url or f"sqlite:///{tmp}/bench.db"
        engine = make_engine(url)
        SQLModel.metadata.create_all(engine)
        started, cpu = time.perf_counter(), time.process_time()
        report = import_file(engine, path)
        first, first_cpu = time.perf_counter() - started, time.process_time() - cpu
        started, cpu = time.perf_counter(), time.process_time()
        again = import_file(engine, path)
        second, second_cpu = time.perf_counter() - started, time.process_time() - cpu
        engine.dispose()
    print(f"file: {args.battles} battles{' with conversations' if args.conversations else ''}, db: {url}")
    print(f"first import: {first:.2f} s wall, {first_cpu:.2f} s CPU ({report.n_added} added)")
    print(f"second import (idempotent): {second:.2f} s wall, {second_cpu:.2f} s CPU ({again.n_added} added)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
