"""Vote ingestion under load: the real server (uvicorn) on a fresh database, driven over loopback.

Usage::

    python scripts/bench_votes.py --backend sqlite --seconds 20 --clients 16
    python scripts/bench_votes.py --backend postgresql --workers 2 --seconds 20 --clients 32
    python scripts/bench_votes.py --backend both --workers 2 --writer both --repeat 3   # side by side
    python scripts/bench_votes.py --backend sqlite --metrics both --repeat 5   # /metrics on vs off
    python scripts/bench_votes.py --backend sqlite --compare /tmp/ref --repeat 3  # this tree vs another

``--writer`` chooses who writes the votes: ``process`` (one vote writer process shared by the workers, what
``arena serve`` does with more than one worker), ``inline`` (a writer thread in each worker), or ``both``
to compare them. ``--repeat N`` runs every configuration N times, interleaved so that a noisy neighbour
slows all of them alike, and reports medians. ``--compare DIR`` runs every configuration on the code in DIR
too (a checkout of another commit, e.g. ``git worktree add /tmp/ref cb3da3b``: its own schema, server and
settings, the same load generator), interleaved, and prints this tree's votes/s and CPU per vote as a ratio
of the other's.

For each run it creates a fresh database (a SQLite file in a temporary folder, or a new PostgreSQL database
dropped afterwards), prepares it as ``arena serve --demo`` does, starts ``arena serve`` on a free 127.0.0.1
port, waits until it answers, and runs ``scripts/loadgen.py`` in its own process(es) for ``--seconds``:
every client does the full flow,
``GET /api/battles/next`` then ``POST /api/votes``. The per-annotator and per-address rate limits are
raised for the run, and so are the per-address vote and new-session limits (all clients share one
address and would otherwise be throttled at 300 votes/min);
everything else is the server's default configuration (SQLite: WAL, ``synchronous=FULL``).

Afterwards it stops the server and counts the vote rows: every acknowledged vote must be in the database
(``votes_missing`` is acknowledged votes minus new rows, and should be 0).
Reported: votes/s, latency percentiles of the vote POST, errors, the server's CPU seconds and the
load generator's own. The last line is a JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _bench_common import (  # noqa: E402
    ARENA_COMMAND,
    SERVE_MODULE,
    emit_json_line,
    free_port,
    is_vote_writer,
    machine_info,
    print_table,
    process_table,
)

PG_ADMIN_URL = os.environ.get(
    "ARENA_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def _cpu_by_role(root: int, database: str | None) -> dict[str, float]:
    """CPU seconds so far of the server's processes by role (from /proc): ``workers`` (each web worker),
    ``writer`` (the vote writer process), ``other`` (the supervisor), and ``database``: PostgreSQL's
    backends serving ``database``, whose CPU is spent on the server's behalf on the same two cores."""
    stats = process_table()
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            tree.append(pid)
        todo.extend(child for child, info in stats.items() if info.ppid == pid)
    workers = [pid for pid in tree if "multiprocessing.spawn" in stats[pid].cmd] or [root]
    roles: dict[str, float] = {"other": 0.0, "writer": 0.0, "database": 0.0}
    for pid in tree:
        cpu, cmd = stats[pid].cpu_s, stats[pid].cmd
        if pid in workers:
            roles[f"worker {pid}"] = cpu
        elif is_vote_writer(cmd):
            roles["writer"] += cpu
        else:
            roles["other"] += cpu
    if database:
        roles["database"] = sum(
            p.cpu_s for p in stats.values() if p.cmd.startswith("postgres:") and f" {database} " in p.cmd
        )
    return roles


def _count_votes(url: str) -> int:
    from sqlalchemy import text

    from votes.db import make_engine

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            # Votes on golds and repeat battles are acknowledged like any vote but kept apart from `vote`.
            return sum(
                int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())  # noqa: S608
                for table in ("vote", "goldvote", "repeatvote")
            )
    finally:
        engine.dispose()


def _wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode} before answering")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/leaderboard", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the server did not answer within {timeout:.0f} s")


def _log_tail(path: Path) -> str:
    return " / ".join(path.read_text(errors="replace").strip().splitlines()[-8:])


def run_backend(
    args: argparse.Namespace,
    backend: str,
    writer: str = "auto",
    metrics: str = "default",
    tree: str | None = None,
) -> dict[str, Any]:
    """One benchmark run on one backend (on the code in ``tree``, or this checkout's); returns the figures."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from votes.db import make_engine

    workers = args.workers or (1 if backend == "sqlite" else 2)
    with tempfile.TemporaryDirectory(prefix="bench_votes_") as tmp:
        admin = None
        if backend == "sqlite":
            url = f"sqlite:///{tmp}/votes.db"
        else:
            admin = make_engine(PG_ADMIN_URL)
            name = f"arena_bench_{uuid.uuid4().hex[:10]}"
            with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            url = make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
        port = free_port()
        env = dict(
            os.environ,
            ARENA_DATABASE_URL=url,
            ARENA_SECRET_KEY=uuid.uuid4().hex * 2,
            ARENA_RATE_LIMIT_PER_MINUTE="100000000",
            ARENA_RATE_LIMIT_PER_ADDRESS_PER_MINUTE="100000000",
            ARENA_VOTES_PER_ADDRESS_PER_MINUTE="100000000",
            ARENA_VOTES_PER_ADDRESS_PER_DAY="100000000",
            ARENA_NEW_SESSIONS_PER_ADDRESS_PER_HOUR="100000000",
            ARENA_SNAPSHOT_DIR=str(Path(tmp) / "snapshots"),
        )
        if metrics != "default":
            env["ARENA_METRICS"] = metrics
        # The database is prepared as `arena serve --demo` does it, without the first published snapshot
        # (the run measures votes); then the real `arena serve` runs on it.
        if tree is None:
            from arena.cli.commands.serve import prepare_database

            prepare_database(url, demo=True, demo_votes=args.demo_votes, seed=args.seed)
        else:  # the other checkout's schema and demo data, by its own code
            env["PYTHONPATH"] = tree
            prepare = (
                f"import sys, importlib, arena.cli as c; serve = importlib.import_module({SERVE_MODULE}); "
                "serve.prepare_database(sys.argv[1], demo=True, "
                "demo_votes=int(sys.argv[2]), seed=int(sys.argv[3]))"
            )
            subprocess.run(
                [sys.executable, "-c", prepare, url, str(args.demo_votes), str(args.seed)],
                env=env,
                cwd=tmp,
                check=True,
            )
        cmd = [sys.executable, "-c", ARENA_COMMAND, "serve", "--host", "127.0.0.1", "--port", str(port)]
        cmd += ["--workers", str(workers), "--log-level", "warning", "--worker-startup-timeout", "120"]
        if writer != "auto":
            cmd.append("--writer-process" if writer == "process" else "--no-writer-process")
        log = open(Path(tmp) / "server.log", "wb")  # noqa: SIM115 - closed below
        server = subprocess.Popen(cmd, env=env, cwd=tmp, stdout=log, stderr=subprocess.STDOUT)
        try:
            try:
                _wait_ready(port, server, args.startup_timeout)
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}; server log: {_log_tail(Path(tmp) / 'server.log')}") from None
            before = _count_votes(url)
            database = make_url(url).database if backend == "postgresql" else None
            gen = [
                sys.executable,
                str(Path(__file__).resolve().with_name("loadgen.py")),
                "--port",
                str(port),
                "--clients",
                str(args.clients),
                "--seconds",
                str(args.seconds),
                "--ramp",
                str(args.ramp),
                "--processes",
                str(args.loadgen_processes),
                "--max-votes",
                str(args.max_votes),
                "--seed",
                str(args.seed),
            ]
            loadgen = subprocess.Popen(gen, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(args.ramp)  # CPU is measured over the measured window only, as the latencies are
            cpu0 = _cpu_by_role(server.pid, database)
            t0 = time.perf_counter()
            try:
                out, err = loadgen.communicate(timeout=args.ramp + args.seconds + 180)
            except subprocess.TimeoutExpired:
                loadgen.kill()
                out, err = loadgen.communicate()
            wall = time.perf_counter() - t0
            cpu1 = _cpu_by_role(server.pid, database)
            used = {role: cpu1[role] - cpu0.get(role, 0.0) for role in cpu1}
            server_cpu = sum(v for role, v in used.items() if role != "database")
            done = subprocess.CompletedProcess(gen, loadgen.returncode, out, err)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode != 0 or not lines:
                raise RuntimeError(f"loadgen failed: {done.stderr.strip()[-500:]}")
            figures: dict[str, Any] = json.loads(lines[-1])
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(10)
            log.close()
        after = _count_votes(url)
        server_log = (Path(tmp) / "server.log").read_text(errors="replace")
        if admin is not None:
            with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
            admin.dispose()
    figures.update(
        backend=backend,
        workers=workers,
        writer=_writer_kind(writer, workers),
        writer_option=writer,
        metrics=metrics,
        tree=tree or "this",
        new_vote_rows=after - before,
        votes_missing=figures["votes"] + figures["ramp_votes"] - (after - before),
        server_cpu_s=server_cpu,
        server_cpu_ms_per_vote=1000 * server_cpu / figures["votes"] if figures["votes"] else None,
        server_cpu_share=server_cpu / wall if wall > 0 else None,
        worker_cpu_shares=sorted(
            (round(v / wall, 3) for role, v in used.items() if role.startswith("worker")), reverse=True
        ),
        writer_cpu_share=used["writer"] / wall,
        database_cpu_share=used["database"] / wall,
        server_errors_logged=server_log.count("Traceback"),
    )
    return figures


def _writer_kind(option: str, workers: int) -> str:
    """Where the votes were written: a shared writer process, or a writer thread in each worker."""
    return option if option != "auto" else ("process" if workers > 1 else "inline")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="sqlite")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument(
        "--workers", type=int, help="server worker processes (default: 1 on SQLite, 2 on PostgreSQL)"
    )
    parser.add_argument(
        "--writer",
        choices=("auto", "process", "inline", "both"),
        default="auto",
        help="votes written by one writer process shared by the workers, or by a thread in each worker "
        "(default as `arena serve`: a writer process with more than one worker); both: compare them",
    )
    parser.add_argument(
        "--metrics",
        choices=("default", "on", "off", "both"),
        default="default",
        help="ARENA_METRICS for the served site (default: as configured, on unless set); both: on and off "
        "side by side, interleaved, with their ratio",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each configuration, interleaved; medians reported"
    )
    parser.add_argument(
        "--compare",
        metavar="DIR",
        help="also run every configuration on the code in DIR (a checkout of another commit), interleaved, "
        "and print the ratios",
    )
    parser.add_argument(
        "--ramp",
        type=float,
        default=2.0,
        help="seconds over which the clients arrive one after another, before the measured --seconds",
    )
    parser.add_argument("--loadgen-processes", type=int, default=1, help="load generator processes")
    parser.add_argument("--max-votes", type=int, default=1_000_000, help="bound on vote attempts")
    parser.add_argument("--demo-votes", type=int, default=200, help="demo votes loaded before the run")
    parser.add_argument("--startup-timeout", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    writers = ["inline", "process"] if args.writer == "both" else [args.writer]
    metric_modes = ["on", "off"] if args.metrics == "both" else [args.metrics]
    trees = ["this", str(Path(args.compare).resolve())] if args.compare else ["this"]
    configs = [(b, w, m, t) for b in backends for w in writers for m in metric_modes for t in trees]
    runs: list[dict[str, Any]] = []
    # Interleaved, so that a noisy neighbour slows every configuration alike, not one of them.
    for round_ in range(args.repeat):
        for backend, writer, metrics, tree in configs:
            if args.repeat > 1 or args.compare:
                print(
                    f"round {round_ + 1}/{args.repeat}: {backend}, writer {writer}, metrics {metrics}, "
                    f"code {tree}",
                    file=sys.stderr,
                )
            runs.append(run_backend(args, backend, writer, metrics, None if tree == "this" else tree))
    summaries = [
        _summary([r for r in runs if (r["backend"], r["writer_option"], r["metrics"], r["tree"]) == c])
        for c in configs
    ]
    print_table(
        [
            "backend",
            "workers",
            "writer",
            "metrics",
            "code",
            "clients",
            "runs",
            "votes/s",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "errors",
            "missing",
            "server CPU",
            "workers CPU",
            "writer CPU",
            "db CPU",
            "loadgen CPU",
        ],
        [
            [
                r["backend"],
                r["workers"],
                r["writer"],
                r["metrics"],
                r["tree"],
                r["clients"],
                r["n_runs"],
                r["votes_per_s"],
                r["p50_ms"],
                r["p95_ms"],
                r["p99_ms"],
                r["errors"],
                r["votes_missing"],
                f"{r['server_cpu_share']:.0%}",
                " + ".join(f"{w:.0%}" for w in r["worker_cpu_shares"]),
                f"{r['writer_cpu_share']:.0%}",
                f"{r['database_cpu_share']:.0%}" if r["backend"] == "postgresql" else "-",
                f"{r['loadgen_cpu_share']:.0%}",
            ]
            for r in summaries
        ],
    )
    print(
        "\nCPU: seconds of CPU per second of wall time (100% = one core); the machine has",
        os.cpu_count(),
        "cores. Server = workers (busiest first) + writer process; db = PostgreSQL's backends for the run.",
    )
    if args.repeat > 1:
        print("With --repeat: medians over the runs (errors and missing: totals).")
    last = dict(summaries[-1])
    if args.metrics == "both":
        ratios = {}
        for on, off in zip(summaries[::2], summaries[1::2], strict=True):
            ratio = on["votes_per_s"] / off["votes_per_s"] if off["votes_per_s"] else float("nan")
            ratios[f"{on['backend']}/{on['writer']}"] = ratio
            print(f"metrics on / off, {on['backend']}, writer {on['writer']}: {ratio:.3f} of the votes/s")
        last["metrics_on_off_ratio"] = ratios
    if args.compare:
        compared = {}
        for this, ref in zip(summaries[::2], summaries[1::2], strict=True):
            speed = this["votes_per_s"] / ref["votes_per_s"] if ref["votes_per_s"] else float("nan")
            cpu = (
                this["server_cpu_ms_per_vote"] / ref["server_cpu_ms_per_vote"]
                if this["server_cpu_ms_per_vote"] and ref["server_cpu_ms_per_vote"]
                else float("nan")
            )
            label = f"{this['backend']}/{this['writer']}/metrics {this['metrics']}"
            compared[label] = {"votes_per_s": speed, "cpu_per_vote": cpu}
            print(
                f"this tree / {ref['tree']}, {label}: {speed:.3f} of the votes/s, {cpu:.3f} of the server "
                f"CPU per vote ({this['server_cpu_ms_per_vote']:.3f} vs {ref['server_cpu_ms_per_vote']:.3f} "
                "ms)"
            )
        last["compare_ratio"] = compared
    if len(summaries) > 1:
        last["configs"] = summaries
    if len(runs) > 1:
        last["runs"] = runs
    last["benchmark"] = "votes"
    last["machine"] = machine_info()
    emit_json_line(last)
    return 0 if all(r["votes_missing"] == 0 for r in runs) else 1


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One configuration's runs: medians of the rates, latencies and CPU shares; totals of the failures."""
    out = (
        dict(runs[0])
        if len(runs) == 1
        else {k: runs[0][k] for k in ("backend", "workers", "writer", "metrics", "tree", "clients")}
    )
    shares = ("server_cpu_share", "writer_cpu_share", "database_cpu_share", "loadgen_cpu_share")
    for key in ("votes_per_s", "p50_ms", "p95_ms", "p99_ms", *shares):
        out[key] = statistics.median(r[key] for r in runs)
    per_vote = [r["server_cpu_ms_per_vote"] for r in runs if r["server_cpu_ms_per_vote"] is not None]
    out["server_cpu_ms_per_vote"] = statistics.median(per_vote) if per_vote else None
    n_workers = len(runs[0]["worker_cpu_shares"])
    out["worker_cpu_shares"] = [  # busiest worker first, then the next, each a median over the runs
        statistics.median(r["worker_cpu_shares"][i] for r in runs if len(r["worker_cpu_shares"]) > i)
        for i in range(n_workers)
    ]
    for key in ("errors", "votes_missing", "votes", "new_vote_rows"):
        out[key] = sum(r[key] for r in runs)
    out["n_runs"] = len(runs)
    return out


if __name__ == "__main__":
    sys.exit(main())
