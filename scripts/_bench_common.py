"""Helpers the benchmark scripts share: synthetic battles, battles files, memory, tables, the JSON line.

The scripts run as plain files (``python scripts/bench_fit.py``), so this module is imported by its
name from the scripts folder; it imports the project's packages, never the other way round.
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from leaderboard.battles import Battles
from leaderboard.data import Outcome

__all__ = [
    "SIZES",
    "Timer",
    "current_rss_mb",
    "emit_json_line",
    "free_port",
    "load_battles_file",
    "load_battles_npz",
    "machine_info",
    "peak_rss_mb",
    "print_table",
    "save_battles",
    "scratch_postgres",
    "synthetic_battles",
]

#: The issue's three standard sizes: (votes, models).
SIZES: dict[str, tuple[int, int]] = {
    "small": (100_000, 50),
    "medium": (1_000_000, 100),
    "large": (3_000_000, 250),
}


# `python -c` runs the `arena` command of whichever tree is first on PYTHONPATH: its console script's function
# arena.cli.main:main, or in a tree from before the command line became a package the module arena.cli (which
# before that had only the app). Benchmarks that compare two checkouts run both through it.
ARENA_COMMAND = (
    "import importlib, arena.cli as c; "
    "c = importlib.import_module('arena.cli.main') if hasattr(c, '__path__') else c; "
    "getattr(c, 'main', c.app)()"
)
# The serve command's module of such a tree (for prepare_database).
SERVE_MODULE = "'arena.cli.commands.serve' if hasattr(c, '__path__') else 'arena.commands.serve'"


def save_battles(battles: Battles, path: Path) -> None:
    """Write integer-coded battles to an ``.npz`` file (what each benchmark worker reads)."""
    np.savez(
        path,
        models=np.array(battles.models, dtype=str),
        model_a=battles.model_a,
        model_b=battles.model_b,
        outcome=battles.outcome,
    )


def load_battles_npz(path: Path) -> Battles:
    """Read battles written by :func:`save_battles`."""
    with np.load(path) as z:
        return Battles(
            models=tuple(str(m) for m in z["models"]),
            model_a=z["model_a"],
            model_b=z["model_b"],
            outcome=z["outcome"],
        )


def synthetic_battles(
    n_votes: int,
    n_models: int,
    *,
    random_state: int = 0,
    tie_nu: float = 0.42,
    left_advantage_elo: float = 15.0,
    popularity_sigma: float = 1.0,
) -> Battles:
    """Seeded battles that look like a public arena's.

    * Ratings spread like a real leaderboard (normal, sd 120 Elo around 1000).
    * Skewed pair frequencies: each model gets a log-normal popularity and a pair is drawn with
      probability proportional to the product of its two popularities, so a few pairs are very common
      and many are rare (as when new models get most of the traffic).
    * Outcomes follow Davidson's tie model with ``tie_nu`` chosen so that about 15% of votes are ties;
      a tie is "both bad" more often when both models are weak.
    * The left side gets a small advantage of ``left_advantage_elo`` Elo.
    """
    rng = np.random.default_rng(random_state)
    rating = rng.normal(1000.0, 120.0, n_models)
    popularity = rng.lognormal(0.0, popularity_sigma, n_models)
    weight = np.outer(popularity, popularity)
    np.fill_diagonal(weight, 0.0)
    flat = weight.ravel() / weight.sum()
    pair = rng.choice(flat.size, size=n_votes, p=flat)
    a = (pair // n_models).astype(np.int64)
    b = (pair % n_models).astype(np.int64)
    log10_strength = (rating - 1000.0) / 400.0
    pa = 10.0 ** (log10_strength[a] + left_advantage_elo / 400.0)
    pb = 10.0 ** log10_strength[b]
    pt = tie_nu * np.sqrt(pa * pb)
    total = pa + pb + pt
    u = rng.random(n_votes) * total
    outcome = np.full(n_votes, Outcome.TIE, dtype=np.int8)
    outcome[u < pa] = Outcome.MODEL_A
    outcome[(u >= pa) & (u < pa + pb)] = Outcome.MODEL_B
    # Among ties, weak pairs are more often "both bad" (from about 10% to about 60%).
    mean_rating = 0.5 * (rating[a] + rating[b])
    p_bothbad = 0.1 + 0.5 / (1.0 + np.exp((mean_rating - 950.0) / 60.0))
    bothbad = (outcome == Outcome.TIE) & (rng.random(n_votes) < p_bothbad)
    outcome[bothbad] = Outcome.BOTHBAD
    width = len(str(n_models - 1))
    models = tuple(f"model-{i:0{width}d}" for i in range(n_models))
    return Battles(models=models, model_a=a, model_b=b, outcome=outcome)


def load_battles_file(path: str | Path) -> Battles:
    """Read a Chatbot Arena battles file (JSON, JSONL, CSV or Parquet; optionally gzipped) with the package's
    own reader (:func:`votes.reads.sources.battles_from_file`): every row validated, a self-battle refused.

    Only ``model_a``, ``model_b`` and ``winner`` are used.
    """
    from votes.reads.sources import (
        battles_from_file,  # scikit-learn and friends: only for the scripts that read files
    )

    battles = battles_from_file(Path(path))
    return Battles(
        models=battles.models, model_a=battles.model_a, model_b=battles.model_b, outcome=battles.outcome
    )


def remove_sqlite_store(path: Path) -> None:
    """Delete a SQLite store with its log and shared-memory files, so a new store made at ``path`` starts
    empty (a log left behind would belong to no database, or to the wrong one)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def peak_rss_mb(*, children: bool = False) -> float:
    """High-water resident set size of this process (or of its waited-for children), in MB."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    """Resident set size right now, in MB (from /proc; 0 where that is missing)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class Timer:
    """Wall and CPU seconds of a block."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    @contextmanager
    def __call__(self) -> Iterator[Timer]:
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            yield self
        finally:
            self.wall += time.perf_counter() - w0
            self.cpu += time.process_time() - c0


@dataclass(frozen=True)
class ProcessInfo:
    """One live process as /proc shows it."""

    ppid: int
    pgid: int
    state: str
    cpu_s: float  # user + system CPU seconds so far
    cmd: str


def is_vote_writer(cmd: str) -> bool:
    """A vote writer process: started by `arena serve` (arena.cli.writer_process) or as `arena
    vote-writer`."""
    return "arena.cli.writer_process" in cmd or "vote-writer" in cmd


def process_table() -> dict[int, ProcessInfo]:
    """Every process readable in /proc (Linux), by pid; processes that vanish meanwhile are left out."""
    ticks = os.sysconf("SC_CLK_TCK")
    table: dict[int, ProcessInfo] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        table[int(entry.name)] = ProcessInfo(
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            state=fields[0],
            cpu_s=(int(fields[11]) + int(fields[12])) / ticks,
            cmd=cmd,
        )
    return table


def processes_in_group(pgid: int) -> dict[int, ProcessInfo]:
    """The live (not zombie) processes of a process group, by pid."""
    return {pid: p for pid, p in process_table().items() if p.pgid == pgid and p.state != "Z"}


def machine_info() -> dict[str, Any]:
    """Enough about the machine to read a figure: cores, load, Python."""
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    return {
        "cpus": os.cpu_count(),
        "load_avg_1m": round(load[0], 2),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def print_table(header: Sequence[str], rows: Sequence[Sequence[object]], *, file: Any = None) -> None:
    """A plain aligned text table (Markdown-compatible), so the output pastes into docs as is."""
    out = file if file is not None else sys.stdout
    cells = [[str(h) for h in header]] + [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print("\n".join(lines), file=out)


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)


def emit_json_line(figures: dict[str, Any]) -> None:
    """The one machine-readable line every benchmark ends with."""
    print(json.dumps(figures, sort_keys=False, default=_json_default), flush=True)


def _json_default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


@contextmanager
def scratch_postgres(url: str, prefix: str = "arena_bench") -> Iterator[str]:
    """The URL of a new, empty database on the server of ``url`` (never the database ``url`` names,
    which may hold others' data), dropped on exit; the caller migrates it (with the tree it measures)."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    name = f"{prefix}_{os.getpid()}_{time.monotonic_ns()}"
    admin = create_engine(url)
    try:
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        try:
            yield make_url(url).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()
