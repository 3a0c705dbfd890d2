"""Time `arena import` of a synthetic Chatbot Arena battles file (default 100,000 battles).

    .venv/bin/python scripts/bench_import.py [--battles 100000] [--database-url URL] [--conversations]
    .venv/bin/python scripts/bench_import.py --sizes 200000,1000000 [--ten-million] [--database-url URL]

Writes the file to a temporary folder, imports it into an empty database (SQLite file by default), then
imports it again to show the idempotent path. Prints seconds for each step.

With ``--sizes`` each size is imported by ``arena import`` in its own process (a Parquet file of the
end-to-end benchmark's synthetic battles) and the wall seconds and peak RSS are printed side by side:
an import that streams in batches has about the same peak at 200,000 and 1,000,000 battles.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np
from sqlmodel import SQLModel

from leaderboard.data import OUTCOME_STRINGS
from votes.db import make_engine
from votes.imports.files import import_file

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


def written_bytes() -> int:
    """Bytes this process has caused to be written to storage (``/proc/self/io``; 0 where absent)."""
    try:
        lines = Path("/proc/self/io").read_text().splitlines()
    except OSError:
        return 0
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    return int(fields.get("write_bytes", "0"))


def import_runs(sizes: list[int], *, database_url: str | None, work: Path) -> list[list[object]]:
    """``arena import`` of a synthetic Parquet battles file per size, each in its own process: wall
    seconds and the process's own peak RSS, side by side (a bounded-memory import keeps the peak flat)."""
    from bench_end_to_end import _arena, _env, run_child, write_battles_parquet

    root = Path(__file__).resolve().parents[1]
    rows: list[list[object]] = []
    for n in sizes:
        data = work / f"battles-{n}.parquet"
        if not data.exists():
            write_battles_parquet(data, n, n_models=60, seed=0)
        with ExitStack() as stack:
            if database_url is None:
                for leftover in work.glob(f"import-{n}.db*"):
                    leftover.unlink()
                url = f"sqlite:///{work / f'import-{n}.db'}"
            else:
                url = stack.enter_context(_fresh_postgres(database_url))
            command = _arena("import", str(data), "--database-url", url)
            run = run_child(command, env=_env(root, work), timeout=3600)
        if run.status != 0:
            raise SystemExit(f"import of {n} battles failed: {run.tail}")
        rows.append([n, round(run.seconds, 2), round(run.peak_mb), round(1e6 * run.seconds / n, 2)])
        print(f"{n} battles: {run.seconds:.2f} s, peak {run.peak_mb:.0f} MB", file=sys.stderr, flush=True)
    return rows


def write_waits(data: Path, url: str, *, every_s: float = 0.1) -> tuple[list[float], float]:
    """Import ``data`` in this process while another thread opens a write transaction every ``every_s``
    seconds, as the live vote writer does: the seconds each waited for the writer lock, and the import's
    wall time. (A real vote adds its own few milliseconds of work to the wait.)"""
    import threading

    from sqlalchemy import update

    from votes.tables import model_t

    engine = make_engine(url)
    SQLModel.metadata.create_all(engine)
    probe = make_engine(url)
    waits: list[float] = []
    done = threading.Event()

    def probe_writes() -> None:
        while not done.is_set():
            started = time.perf_counter()
            with probe.begin() as conn:  # BEGIN IMMEDIATE on SQLite: waits for the writer lock
                waits.append(time.perf_counter() - started)
                conn.execute(update(model_t).where(model_t.c.id == -1).values(active=True))
            done.wait(every_s)

    thread = threading.Thread(target=probe_writes, daemon=True)
    started = time.perf_counter()
    thread.start()
    try:
        import_file(engine, data)
    finally:
        done.set()
        thread.join(60)
    wall = time.perf_counter() - started
    engine.dispose()
    probe.dispose()
    return waits, wall


@contextmanager
def _fresh_postgres(url: str) -> Iterator[str]:
    """A new database on the server of ``url`` (:func:`_bench_common.scratch_postgres`), migrated."""
    from _bench_common import scratch_postgres

    from votes.migrate import upgrade_database

    with scratch_postgres(url, "arena_bench_import") as fresh:
        upgrade_database(fresh)
        yield fresh


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--battles", type=int, default=100_000)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--conversations", action="store_true")
    parser.add_argument(
        "--sizes",
        default=None,
        help="comma list of battle counts (e.g. 200000,1000000): `arena import` of each in a child process, "
        "wall seconds and peak RSS side by side",
    )
    parser.add_argument("--ten-million", action="store_true", help="add 10,000,000 battles to --sizes")
    parser.add_argument(
        "--write-waits",
        type=int,
        default=None,
        metavar="N",
        help="import N battles into a fresh SQLite file while a thread opens a write transaction every "
        "0.1 s; print the longest and 99th-percentile wait for the writer lock",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="keep the files here (default: temporary)")
    args = parser.parse_args(argv)
    # Imported here: tests import write_battles from this file as ``scripts.bench_import``.
    from _bench_common import emit_json_line, machine_info, print_table

    if args.write_waits:
        from bench_end_to_end import write_battles_parquet

        with tempfile.TemporaryDirectory() as tmp:
            work = args.workdir or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            data = work / f"battles-{args.write_waits}.parquet"
            if not data.exists():
                write_battles_parquet(data, args.write_waits, n_models=60, seed=0)
            for leftover in work.glob("waits.db*"):
                leftover.unlink()
            with ExitStack() as stack:
                url = f"sqlite:///{work}/waits.db"
                if args.database_url:
                    url = stack.enter_context(_fresh_postgres(args.database_url))
                waits, wall = write_waits(data, url)
        print(machine_info())
        order = sorted(waits)
        p99 = order[min(len(order) - 1, int(0.99 * len(order)))]
        print(
            f"import of {args.write_waits:,} battles: {wall:.1f} s; {len(waits)} write transactions opened "
            f"meanwhile: longest wait {order[-1]:.3f} s, 99th percentile {p99:.3f} s, median "
            f"{order[len(order) // 2]:.3f} s"
        )
        figures = {"battles": args.write_waits, "import_s": wall, "writes": len(waits)}
        emit_json_line({**figures, "max_wait_s": order[-1], "p99_wait_s": p99})
        return 0
    if args.sizes or args.ten_million:
        sizes = [int(s) for s in (args.sizes or "200000,1000000").split(",")]
        if args.ten_million:
            sizes.append(10_000_000)
        with tempfile.TemporaryDirectory() as tmp:
            work = args.workdir or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            rows = import_runs(sizes, database_url=args.database_url, work=work)
        print(machine_info())
        print_table(["battles", "wall s", "peak MB", "us per battle"], rows)
        base = rows[0]
        for row in rows[1:]:
            print(
                f"{row[0]:,} vs {base[0]:,} battles: {row[0] / base[0]:.1f}x the rows, "  # type: ignore[operator]
                f"{row[1] / base[1]:.2f}x the time, {row[2] / base[2]:.2f}x the peak memory"  # type: ignore[operator]
            )
        emit_json_line(
            {
                "battles": [r[0] for r in rows],
                "import_s": [r[1] for r in rows],
                "import_peak_mb": [r[2] for r in rows],
                "backend": "postgresql" if args.database_url else "sqlite",
            }
        )
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "battles.jsonl"
        write_battles(path, args.battles, conversations=args.conversations)
        url = args.database_url or f"sqlite:///{tmp}/bench.db"
        engine = make_engine(url)
        SQLModel.metadata.create_all(engine)
        started, cpu, wrote = time.perf_counter(), time.process_time(), written_bytes()
        report = import_file(engine, path)
        first, first_cpu = time.perf_counter() - started, time.process_time() - cpu
        first_mb = (written_bytes() - wrote) / 1e6
        started, cpu = time.perf_counter(), time.process_time()
        again = import_file(engine, path)
        second, second_cpu = time.perf_counter() - started, time.process_time() - cpu
        engine.dispose()
    print(f"file: {args.battles} battles{' with conversations' if args.conversations else ''}, db: {url}")
    print(
        f"first import: {first:.2f} s wall, {first_cpu:.2f} s CPU, {first_mb:.0f} MB written "
        f"({report.n_added} added)"
    )
    print(f"second import (idempotent): {second:.2f} s wall, {second_cpu:.2f} s CPU ({again.n_added} added)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
