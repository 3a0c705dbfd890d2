"""A lean load generator for the voting API: the full battle -> vote flow over loopback, bounded.

Usage::

    python scripts/loadgen.py --port 8000 --clients 16 --seconds 20 [--processes 2] [--max-votes 100000]

Each client keeps one HTTP/1.1 keep-alive connection (the standard library's ``http.client``, no async
framework: a heavyweight client costs more CPU than the server it measures) and loops:
``GET /api/battles/next`` (a session cookie comes with the first answer) then ``POST /api/votes`` with the
token, a random winner and the CSRF header. When the server has no battle left for a session (404) the
client starts a new session. Clients are threads spread over ``--processes`` processes.

It only talks to 127.0.0.1 and stops at ``--seconds`` or ``--max-votes``, whichever comes first. It reports
votes per second, latency percentiles of the vote POST and of the battle GET, errors by status, and its own
CPU seconds (user + system, all its processes), so its share of the machine is known.
The last line is a JSON object.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import multiprocessing
import random
import resource
import sys
import threading
import time
from collections import Counter
from typing import Any

from leaderboard.data import OUTCOME_STRINGS

HOST = "127.0.0.1"
WINNERS = tuple(OUTCOME_STRINGS.values())
WINNER_WEIGHTS = (0.42, 0.42, 0.12, 0.04)


class Client:
    """One annotator session on one keep-alive connection."""

    def __init__(self, port: int, rng: random.Random) -> None:
        self.port = port
        self.rng = rng
        self.conn = http.client.HTTPConnection(HOST, port, timeout=30)
        self.cookie: str | None = None

    def request(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        if self.cookie:
            headers["Cookie"] = self.cookie
        try:
            self.conn.request(method, path, body=body, headers=headers)
            resp = self.conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = http.client.HTTPConnection(HOST, self.port, timeout=30)
            return 0, b""
        for value in resp.headers.get_all("Set-Cookie") or ():
            pair = value.split(";", 1)[0]
            jar = dict(p.split("=", 1) for p in (self.cookie or "").split("; ") if "=" in p)
            name, _, val = pair.partition("=")
            jar[name] = val
            self.cookie = "; ".join(f"{k}={v}" for k, v in jar.items())
        return resp.status, data


def _client_loop(
    port: int,
    seed: int,
    begin: float,
    measure_from: float,
    deadline: float,
    budget: list[int],
    lock: threading.Lock,
    out: dict[str, Any],
) -> None:
    time.sleep(max(0.0, begin - time.perf_counter()))  # annotators arrive one after another
    client = Client(port, random.Random(seed))
    vote_ms: list[float] = []
    battle_ms: list[float] = []
    statuses: Counter[str] = Counter()
    while time.perf_counter() < deadline:
        with lock:
            if budget[0] <= 0:
                break
            budget[0] -= 1
        t0 = time.perf_counter()
        if t0 < measure_from:  # still ramping up: the work is done, the figures are not kept
            with lock:
                budget[0] += 1
        status, data = client.request("GET", "/api/battles/next", None, {"Accept": "application/json"})
        t1 = time.perf_counter()
        if status == 404:
            client.cookie = None  # every pair judged by this session: become a new annotator
            statuses["battle_404"] += 1
            continue
        if status != 200:
            statuses[f"battle_{status}"] += 1
            continue
        battle_ms.append((t1 - t0) * 1000)
        battle = json.loads(data)
        winner = client.rng.choices(WINNERS, WINNER_WEIGHTS)[0]
        body = json.dumps({"token": battle["token"], "winner": winner}).encode()
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "X-CSRF-Token": battle["csrf_token"],
        }
        t2 = time.perf_counter()
        status, data = client.request("POST", "/api/votes", body, headers)
        t3 = time.perf_counter()
        if t0 < measure_from:
            statuses["ramp_vote_200" if status == 200 else f"ramp_vote_{status}"] += 1
            continue
        if status == 200:
            vote_ms.append((t3 - t2) * 1000)
            statuses["vote_200"] += 1
        else:
            statuses[f"vote_{status}"] += 1
    client.conn.close()
    with lock:
        out["vote_ms"].extend(vote_ms)
        out["battle_ms"].extend(battle_ms)
        out["statuses"].update(statuses)


def _process(
    port: int, clients: int, seconds: float, max_votes: int, seed: int, ramp: float
) -> dict[str, Any]:
    """Run ``clients`` threads, started over ``ramp`` seconds, until the deadline or the vote budget."""
    out: dict[str, Any] = {"vote_ms": [], "battle_ms": [], "statuses": Counter()}
    lock = threading.Lock()
    budget = [max_votes]
    start = time.perf_counter()
    measure_from = start + ramp
    deadline = measure_from + seconds
    threads = [
        threading.Thread(
            target=_client_loop,
            args=(
                port,
                seed * 1000 + i,
                start + ramp * i / clients,
                measure_from,
                deadline,
                budget,
                lock,
                out,
            ),
            daemon=True,
        )
        for i in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(ramp + seconds + 60)
    out["elapsed"] = time.perf_counter() - measure_from
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_s"] = usage.ru_utime + usage.ru_stime
    out["statuses"] = dict(out["statuses"])
    return out


def _process_entry(args: tuple[int, int, float, int, int, float], queue: Any) -> None:
    queue.put(_process(*args))


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[k]


def run(
    port: int,
    clients: int,
    seconds: float,
    *,
    processes: int = 1,
    max_votes: int = 1_000_000,
    seed: int = 0,
    ramp: float = 0.0,
) -> dict[str, Any]:
    """Drive the server and return the figures (see the module docstring)."""
    processes = max(1, min(processes, clients))
    share = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
    votes_each = [max_votes // processes + (1 if i < max_votes % processes else 0) for i in range(processes)]
    wall0 = time.perf_counter()
    if processes == 1:
        parts = [_process(port, clients, seconds, max_votes, seed, ramp)]
        cpu = parts[0]["cpu_s"]
    else:
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        procs = [
            ctx.Process(
                target=_process_entry,
                args=((port, share[i], seconds, votes_each[i], seed + i, ramp), queue),
            )
            for i in range(processes)
        ]
        for p in procs:
            p.start()
        parts = [queue.get(timeout=ramp + seconds + 120) for _ in procs]
        for p in procs:
            p.join(30)
        cpu = sum(part["cpu_s"] for part in parts)
    wall = time.perf_counter() - wall0
    vote_ms = [v for part in parts for v in part["vote_ms"]]
    battle_ms = [v for part in parts for v in part["battle_ms"]]
    statuses: Counter[str] = Counter()
    for part in parts:
        statuses.update(part["statuses"])
    errors = sum(n for k, n in statuses.items() if k not in ("vote_200", "battle_404", "ramp_vote_200"))
    elapsed = max(part["elapsed"] for part in parts)
    return {
        "clients": clients,
        "processes": processes,
        "seconds": elapsed,
        "votes": len(vote_ms),
        "ramp_votes": statuses.get("ramp_vote_200", 0),  # acknowledged while ramping up, not measured
        "votes_per_s": len(vote_ms) / elapsed if elapsed > 0 else 0.0,
        "p50_ms": percentile(vote_ms, 50),
        "p95_ms": percentile(vote_ms, 95),
        "p99_ms": percentile(vote_ms, 99),
        "max_ms": max(vote_ms) if vote_ms else None,
        "battle_p50_ms": percentile(battle_ms, 50),
        "battle_p99_ms": percentile(battle_ms, 99),
        "errors": errors,
        "statuses": dict(statuses),
        "loadgen_cpu_s": cpu,
        "loadgen_cpu_share": cpu / wall if wall > 0 else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True, help="server port on 127.0.0.1")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--max-votes", type=int, default=1_000_000, help="stop after this many vote attempts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--ramp",
        type=float,
        default=0.0,
        help="seconds over which the clients start one after another (not measured; --seconds follow)",
    )
    args = parser.parse_args(argv)
    if not 0 < args.seconds <= 3600:
        parser.error("--seconds must be in (0, 3600]")
    figures = run(
        args.port,
        args.clients,
        args.seconds,
        processes=args.processes,
        max_votes=args.max_votes,
        seed=args.seed,
        ramp=args.ramp,
    )
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
