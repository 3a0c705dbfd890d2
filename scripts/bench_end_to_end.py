"""What a maintainer waits for, end to end: recompute from a file, import, publish, start-up, and the public
Chatbot Arena methods run from the same file.

    .venv/bin/python scripts/bench_end_to_end.py [--votes 1000000] [--models 100] [--rounds 1000]
        [--ten-million] [--ten-million-store] [--compare /path/to/other/checkout]
        [--skip recompute,import,publish]
        [--reuse-import] [--publish-repeat 3] [--peers lmsys-current]
        [--postgres-url postgresql+psycopg://postgres@127.0.0.1:5432/test]

The battles file is written once (seeded, :func:`_bench_common.synthetic_battles`) as Parquet in
``--workdir``. Every path runs in its own process, timed from start to exit (imports included), and its peak
memory is the child's own ``ru_maxrss`` (from ``os.wait4``). Bytecode is cached in ``--workdir`` (or
``--pycache``) and compiled by an untimed warm-up run (a small recompute and import), as an installed package
has its ``.pyc`` files, even where the shell sets ``PYTHONDONTWRITEBYTECODE``. With ``--compare DIR`` every
path of Arena runs a second time with ``PYTHONPATH=DIR`` (another checkout, e.g. before a change), so the
table shows both side by side from one run on one machine load. The peers (:mod:`bench_fit`'s public methods)
read the Parquet file with pandas, code the models and fit with 1,000 bootstrap rounds; a bootstrap too slow
for ``--budget`` is timed on fewer rounds and extrapolated (marked ``*``). With ``--postgres-url`` the same
file is also imported into PostgreSQL, right after the SQLite import of the same tree: into a new database on
that server (never the database the URL names), migrated by the tree's own ``arena db upgrade`` untimed (the
SQLite import migrates its new file inside its timed run) and dropped after.

The last line is one JSON object: ``recompute_1m_s``, ``recompute_1m_peak_mb``, ``import_1m_s``,
``import_1m_peak_mb``, ``import_pg_1m_s``, ``import_pg_1m_peak_mb`` (null without ``--postgres-url``),
``publish_1m_s``, ``recompute_10m_s``, ``recompute_10m_peak_mb`` (null without
``--ten-million``), ``import_10m_s``, ``import_10m_peak_mb``, ``publish_10m_s``, ``publish_10m_peak_mb``
(null without ``--ten-million-store``: the 10x file imported into a new SQLite store, published from it,
and the store deleted again, some 4.4 GB at 10M votes), ``cli_start_s``, ``peer_<name>_s``, and the
same keys prefixed ``compare_`` with ``--compare``. The ``1m``/``10m`` names are kept when ``--votes``
asks for another size (see ``votes``).

The SQLite store of each tree is kept in ``--workdir``, named by the battles file; ``--reuse-import``
publishes from it again without importing (its import is then not timed), and ``--publish-repeat N``
publishes N times and keeps the fastest, so a change to publish is timed without a minute of import.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _bench_common import (
    ARENA_COMMAND,
    emit_json_line,
    machine_info,
    print_table,
    remove_sqlite_store,
    scratch_postgres,
    synthetic_battles,
)

from leaderboard.data import OUTCOME_STRINGS

PEERS = ("lmsys-current", "lmsys-classic")
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Run:
    """One child process: wall seconds, its own peak RSS, exit status and the tail of its output."""

    seconds: float
    peak_mb: float
    status: int
    tail: str
    stdout: str


def write_battles_parquet(path: Path, n_votes: int, n_models: int, seed: int) -> None:
    """The synthetic battles as a Chatbot Arena Parquet file (model_a, model_b, winner, tstamp, anony,
    language), written aside and renamed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    battles = synthetic_battles(n_votes, n_models, random_state=seed)
    names = np.array(battles.models, dtype=object)
    winners = np.array([OUTCOME_STRINGS[k] for k in sorted(OUTCOME_STRINGS)], dtype=object)
    table = pa.table(
        {
            "model_a": pa.array(names[battles.model_a], pa.string()),
            "model_b": pa.array(names[battles.model_b], pa.string()),
            "winner": pa.array(winners[battles.outcome], pa.string()),
            "tstamp": pa.array(1.7e9 + np.arange(n_votes, dtype=np.float64)),
            "anony": pa.array(np.ones(n_votes, dtype=bool)),
            "language": pa.array(np.full(n_votes, "English", dtype=object), pa.string()),
        }
    )
    tmp = path.with_suffix(".part")
    pq.write_table(table, tmp)
    tmp.replace(path)


def run_child(cmd: list[str], *, env: dict[str, str], timeout: float, cwd: Path | None = None) -> Run:
    """Run ``cmd``; its wall time and its own peak RSS (``wait4``), never the sum over earlier children.

    It runs outside any checkout (``cwd``, a temporary folder by default): ``python -c`` puts the
    working folder first on ``sys.path``, which would shadow the ``PYTHONPATH`` of the tree measured."""
    cwd = cwd if cwd is not None else Path(tempfile.gettempdir())
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)  # nosec B603
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    tail = " / ".join(text.strip().splitlines()[-3:])
    return Run(seconds, usage.ru_maxrss / 1024.0, proc.returncode, tail, text)


def _env(tree: Path, pycache: Path) -> dict[str, str]:
    """The child's environment: ``tree`` on the path, and bytecode cached in ``pycache`` (written even
    when this shell sets ``PYTHONDONTWRITEBYTECODE``), as an installed package has its ``.pyc`` files;
    recompiling some 1,700 modules in every process would time the compiler, not Arena."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONWARNINGS="ignore", ARENA_LOG_LEVEL="WARNING")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)  # mirrors source paths: trees do not collide
    return env


def warm_bytecode(tree: Path, work: Path, args: argparse.Namespace) -> None:
    """Compile every module the measured paths import, untimed: a small recompute with plots (and an
    import when one is measured) on a few thousand votes, with the environment of the timed runs."""
    small = work / f"warm-{args.models}-{args.seed}.parquet"
    if not small.exists():
        write_apart(small, 5_000, args.models, args.seed)
    env = _env(tree, args.pycache)
    run_child(_arena("--help"), env=env, timeout=args.timeout)
    run_child(
        _arena("recompute", "--from", str(small), "--bootstrap", "10", "--out", str(work / "warm-out")),
        env=env,
        timeout=args.timeout,
    )
    if "import" not in args.skip:
        db = work / "warm.db"
        db.unlink(missing_ok=True)
        run_child(
            _arena("import", str(small), "--database-url", f"sqlite:///{db}"), env=env, timeout=args.timeout
        )


def _publish(tree: Path, url: str, snapshot_dir: Path, args: argparse.Namespace) -> list[str]:
    """``arena publish`` of the store at ``url`` into ``snapshot_dir``, with the run's rounds and seed: the
    overall board alone, as every tree publishes it (a tree whose publish makes every category and language
    board by default is asked for the overall one with ``--no-slices``)."""
    command = tree / "arena" / "cli" / "commands" / "publish.py"
    one_board = ["--no-slices"] if command.is_file() and "--no-slices" in command.read_text() else []
    return _arena(
        "publish",
        *("--database-url", url, "--snapshot-dir", str(snapshot_dir)),
        *("--bootstrap", str(args.rounds), "--seed", str(args.seed)),
        *one_board,
    )


def _arena(*args: str) -> list[str]:
    return [sys.executable, "-c", ARENA_COMMAND, *args]


class Runs(dict[str, Run]):
    """Runs by path name; each is printed (to stderr) as soon as it is measured, so a long benchmark
    interrupted half way still leaves its figures."""

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag

    def __setitem__(self, key: str, run: Run) -> None:
        super().__setitem__(key, run)
        print(
            f"[{self.tag}] {key}: {run.seconds:.2f} s, peak {run.peak_mb:.0f} MB, exit {run.status}",
            file=sys.stderr,
            flush=True,
        )


def arena_paths(tree: Path, data: Path, work: Path, args: argparse.Namespace, tag: str) -> dict[str, Run]:
    """Every Arena path on one checkout: start-up, recompute, import into SQLite, publish from it (its
    bytecode compiled beforehand, see :func:`warm_bytecode`)."""
    warm_bytecode(tree, work, args)
    env = _env(tree, args.pycache)
    runs = Runs(tag)
    runs["cli_start"] = min(
        (run_child(_arena("--help"), env=env, timeout=120) for _ in range(3)), key=lambda r: r.seconds
    )
    rounds = str(args.rounds)
    seed = str(args.seed)
    if "recompute" not in args.skip:
        runs["recompute"] = run_child(
            _arena(
                "recompute",
                "--from",
                str(data),
                "--bootstrap",
                rounds,
                "--seed",
                seed,
                "--out",
                str(work / f"r-{tag}"),
            ),
            env=env,
            timeout=args.timeout,
        )
    # the store is named by the battles file it holds, so --reuse-import never publishes other votes
    db = work / f"votes-{tag}-{data.stem}.db"
    url = f"sqlite:///{db}"
    imported = args.reuse_import and db.exists()
    if not imported:
        remove_sqlite_store(db)
    if "import" not in args.skip and not imported:
        runs["import"] = run_child(
            _arena("import", str(data), "--database-url", url), env=env, timeout=args.timeout
        )
        imported = runs["import"].status == 0
        if args.postgres_url:
            runs["import_pg"] = import_postgres(data, env, args)
    if "publish" not in args.skip and imported:
        for _ in range(args.publish_repeat):
            run = run_child(_publish(tree, url, work / f"snap-{tag}", args), env=env, timeout=args.timeout)
            print(f"[{tag}] publish run: {run.seconds:.2f} s, peak {run.peak_mb:.0f} MB", file=sys.stderr)
            if run.status != 0 or "publish" not in runs or run.seconds < runs["publish"].seconds:
                runs["publish"] = run
            if run.status != 0:
                break
    return runs


def store_paths(tree: Path, data: Path, args: argparse.Namespace, tag: str) -> dict[str, Run]:
    """The import of ``data`` (the 10x file) into a new SQLite store and a publish from it, each timed
    with its own peak memory; the store is deleted afterwards (gigabytes at 10M votes)."""
    env = _env(tree, args.pycache)
    db = args.workdir / f"votes10-{tag}.db"
    url = f"sqlite:///{db}"
    remove_sqlite_store(db)
    runs: dict[str, Run] = {}
    try:
        runs["import_10m"] = run_child(
            _arena("import", str(data), "--database-url", url), env=env, timeout=args.timeout
        )
        print(f"[{tag}] import_10m: {runs['import_10m'].seconds:.2f} s", file=sys.stderr, flush=True)
        if runs["import_10m"].status == 0:
            runs["publish_10m"] = run_child(
                _publish(tree, url, args.workdir / f"snap10-{tag}", args), env=env, timeout=args.timeout
            )
            print(f"[{tag}] publish_10m: {runs['publish_10m'].seconds:.2f} s", file=sys.stderr, flush=True)
    finally:
        remove_sqlite_store(db)
    return runs


def import_postgres(data: Path, env: dict[str, str], args: argparse.Namespace) -> Run:
    """``arena import`` of ``data`` into a new PostgreSQL database, migrated beforehand (untimed) by the
    measured tree's ``arena db upgrade``; a failed migration is returned as the run."""
    with scratch_postgres(args.postgres_url, "arena_bench_e2e") as url:
        upgraded = run_child(_arena("db", "upgrade", "--database-url", url), env=env, timeout=args.timeout)
        if upgraded.status != 0:
            return upgraded
        return run_child(_arena("import", str(data), "--database-url", url), env=env, timeout=args.timeout)


def peer_worker(name: str, data: Path, args: argparse.Namespace) -> int:
    """One public method end to end from the file: pandas reads it, the models are coded, then the fit
    and bootstrap of :mod:`bench_fit` (extrapolated when too slow)."""
    import bench_fit
    import pandas as pd

    from leaderboard.battles import Battles

    t0 = time.perf_counter()
    frame = pd.read_parquet(data, columns=["model_a", "model_b", "winner"])
    codes, models = pd.factorize(pd.concat([frame["model_a"], frame["model_b"]], ignore_index=True))
    n = len(frame)
    outcome_of = {v: k for k, v in OUTCOME_STRINGS.items()}
    battles = Battles(
        models=tuple(str(m) for m in models),
        model_a=codes[:n].astype(np.int64),
        model_b=codes[n:].astype(np.int64),
        outcome=np.asarray(frame["winner"].map(outcome_of).to_numpy(), dtype=np.int8),
    )
    load_s = time.perf_counter() - t0
    plan = bench_fit.Plan(args.rounds, args.budget, args.extrapolate_seconds)
    result = bench_fit.RUNNERS[name](battles, plan, 0.95, args.seed)
    # The bootstrap may be extrapolated: the total is what the whole run would take.
    timed_boot = result["boot_s"] * result["rounds_timed"] / args.rounds
    inside = time.perf_counter() - t0
    out = {
        "load_s": load_s,
        "inside_s": inside,
        "total_s": inside - timed_boot + result["boot_s"],
        "extrapolated": result["rounds_timed"] < args.rounds,
    }
    print(json.dumps(out), flush=True)
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=int, default=1_000_000)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1000, help="bootstrap rounds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=Path("bench-end-to-end"))
    parser.add_argument(
        "--pycache",
        type=Path,
        help="where the bytecode is cached (default: WORKDIR/pycache); one shared by runs compiles once",
    )
    parser.add_argument("--ten-million", action="store_true", help="also recompute from 10M votes (slow)")
    parser.add_argument(
        "--ten-million-store",
        action="store_true",
        help="also import the 10M votes into a new SQLite store and publish from it (minutes; the store, "
        "4.4 GB, is deleted after)",
    )
    parser.add_argument("--compare", type=Path, help="another checkout to run side by side (PYTHONPATH)")
    parser.add_argument(
        "--postgres-url",
        help="also import into a new database on this PostgreSQL server (the named database is untouched)",
    )
    parser.add_argument("--skip", default="", help="comma list out of recompute, import, publish, peers")
    parser.add_argument(
        "--reuse-import",
        action="store_true",
        help="publish from the store an earlier run imported (kept in --workdir) instead of importing again",
    )
    parser.add_argument(
        "--publish-repeat", type=int, default=1, help="publish this many times; the fastest is reported"
    )
    parser.add_argument("--peers", default=",".join(PEERS), help=f"comma list out of {', '.join(PEERS)}")
    parser.add_argument("--budget", type=float, default=120.0, help="seconds before a peer is extrapolated")
    parser.add_argument("--extrapolate-seconds", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per path")
    parser.add_argument("--peer-worker", choices=PEERS, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if args.pycache is None:
        args.pycache = args.workdir / "pycache"
    return args


def _dataset(work: Path, n_votes: int, args: argparse.Namespace) -> Path:
    path = work / f"battles-{n_votes}-{args.models}-{args.seed}.parquet"
    if not path.exists():
        started = time.perf_counter()
        write_apart(path, n_votes, args.models, args.seed)
        print(f"wrote {path} in {time.perf_counter() - started:.1f} s", flush=True)
    return path


def write_apart(path: Path, n_votes: int, n_models: int, seed: int) -> None:
    """:func:`write_battles_parquet` in a forked child. Not in this process: Linux hands the peak memory
    of a process that runs ``exec`` on to the program it becomes (``ru_maxrss``), and every measured
    path is started from here, so a 10M-vote table built here showed as every later path's peak (1.7 GB
    for ``arena --help``)."""
    writer = multiprocessing.get_context("fork").Process(
        target=write_battles_parquet, args=(path, n_votes, n_models, seed)
    )
    writer.start()
    writer.join()
    if writer.exitcode != 0:
        raise RuntimeError(f"writing {path} failed (exit status {writer.exitcode})")


def _cell(run: Run | None) -> tuple[float | None, float | None]:
    if run is None or run.status != 0:
        return None, None
    return run.seconds, run.peak_mb


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.peer_worker:
        return peer_worker(args.peer_worker, args.data, args)
    args.workdir.mkdir(parents=True, exist_ok=True)
    load_before = machine_info()
    data = _dataset(args.workdir, args.votes, args)
    trees = {"": ROOT}
    if args.compare is not None:
        trees["compare_"] = args.compare.resolve()
    results: dict[str, dict[str, Run]] = {}
    for prefix, tree in trees.items():
        results[prefix] = arena_paths(tree, data, args.workdir, args, prefix or "this")
        if args.ten_million:
            big = _dataset(args.workdir, 10 * args.votes, args)
            results[prefix]["recompute_10m"] = run_child(
                _arena(
                    "recompute",
                    "--from",
                    str(big),
                    "--bootstrap",
                    str(args.rounds),
                    "--seed",
                    str(args.seed),
                    "--out",
                    str(args.workdir / f"r10-{prefix or 'this'}"),
                ),
                env=_env(tree, args.pycache),
                timeout=args.timeout,
            )
        if args.ten_million_store:
            big = _dataset(args.workdir, 10 * args.votes, args)
            results[prefix].update(store_paths(tree, big, args, prefix or "this"))
    peers: dict[str, dict[str, Any]] = {}
    if "peers" not in args.skip:
        for name in [p.strip() for p in args.peers.split(",") if p.strip()]:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--peer-worker", name, "--data", str(data)]
            cmd += ["--rounds", str(args.rounds), "--seed", str(args.seed), "--budget", str(args.budget)]
            cmd += ["--extrapolate-seconds", str(args.extrapolate_seconds)]
            run = run_child(cmd, env=_env(ROOT, args.pycache), timeout=args.timeout)
            lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
            peers[name] = {"run": run, **(json.loads(lines[-1]) if run.status == 0 and lines else {})}

    figures: dict[str, Any] = {"votes": args.votes, "models": args.models, "rounds": args.rounds}
    rows: list[list[object]] = []
    labels = {
        "cli_start": "arena --help",
        "recompute": f"recompute --from parquet --bootstrap {args.rounds} (plots)",
        "recompute_10m": "recompute, 10x votes",
        "import": "import parquet (SQLite)",
        "import_pg": "import parquet (PostgreSQL)",
        "publish": f"publish --bootstrap {args.rounds} (SQLite)",
        "import_10m": "import, 10x votes (SQLite)",
        "publish_10m": "publish, 10x votes (SQLite)",
    }
    keys = {
        "cli_start": "cli_start",
        "recompute": "recompute_1m",
        "recompute_10m": "recompute_10m",
        "import": "import_1m",
        "import_pg": "import_pg_1m",
        "publish": "publish_1m",
        "import_10m": "import_10m",
        "publish_10m": "publish_10m",
    }
    for path, label in labels.items():
        row: list[object] = [label]
        for prefix in trees:
            seconds, peak = _cell(results[prefix].get(path))
            done = results[prefix].get(path)
            if done is not None and done.status != 0:
                print(f"{prefix or 'this'} {path} failed (exit {done.status}): {done.tail}", file=sys.stderr)
            row += [seconds, peak]
            figures[f"{prefix}{keys[path]}_s"] = seconds
            figures[f"{prefix}{keys[path]}_peak_mb"] = peak
        rows.append(row)
    for name, res in peers.items():
        seconds, peak = _cell(res["run"])
        # the process's wall time (imports and reading included), its bootstrap extrapolated when too slow
        total = None if seconds is None else seconds - res["inside_s"] + res["total_s"]
        mark = "*" if res.get("extrapolated") else ""
        rows.append(
            [f"peer {name}: pandas read + fit + bootstrap{mark}", total, peak]
            + [None, None] * (len(trees) - 1)
        )
        figures[f"peer_{name.replace('-', '_')}_s"] = total
        figures[f"peer_{name.replace('-', '_')}_peak_mb"] = peak
    header = ["path"]
    for prefix in trees:
        name = "this tree" if not prefix else f"compare ({trees[prefix].name})"
        header += [f"{name} s", f"{name} peak MB"]
    print_table(header, rows)
    print("* bootstrap timed on fewer rounds and extrapolated")
    print(
        f"bytecode cached in {args.pycache} (PYTHONPYCACHEPREFIX), compiled by an untimed "
        "warm-up run of each tree: an installed package has its .pyc files"
    )
    figures["machine_before"] = load_before
    figures["machine_after"] = machine_info()
    emit_json_line(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
