"""Abuse from one address while another visits: does `GET /` still answer within a second?

Starts `arena serve` (one worker, the demo data, a scratch SQLite file), then from 127.0.0.1, each loop
bounded in count and time:

- ``--sockets`` idle connections, each sending one byte of a request line a second and reopened when
  the server closes it (a slow-loris);
- oversized bodies (``Content-Length`` far above the limit, then bytes trickling in) and oversized
  headers, one after another;

while a visitor at 127.0.0.2 asks for ``GET /`` every ``--probe-every`` seconds. Prints the visitor's
slowest answer, failures, how the abusive connections were answered, and the server's largest resident
memory; exit status 1 when the slowest answer is 1 s or more, a probe failed, or memory passed 500 MB.

    python scripts/load_abuse.py --sockets 2000 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _bench_common import free_port, machine_info, processes_in_group

ROOT = Path(__file__).resolve().parents[1]
ABUSER = "127.0.0.1"
VISITOR = "127.0.0.2"
RSS_LIMIT_MB = 500.0
SLOWEST_LIMIT_S = 1.0


@dataclass
class Tally:
    probes: list[float] = field(default_factory=list)
    probe_failures: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    reopened: int = 0
    peak_rss_mb: float = 0.0


def server_rss_mb(pid: int) -> float:
    """Resident memory of the server and its children (the process group it leads), in MB."""
    total = 0
    for member in list(processes_in_group(pid)) or [pid]:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


async def status_of(reader: asyncio.StreamReader, timeout: float) -> str:
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
    except (TimeoutError, ConnectionError):
        return "no answer"
    parts = line.split()
    return parts[1].decode("ascii", "replace") if len(parts) > 1 else "closed"


async def slow_socket(port: int, stop: float, tally: Tally) -> None:
    request = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10_000
    while time.monotonic() < stop:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(ABUSER, 0))
        except OSError:
            tally.answers["connect refused"] += 1
            await asyncio.sleep(1.0)
            continue
        try:
            for byte in request:
                if time.monotonic() >= stop or reader.at_eof():
                    break
                writer.write(bytes([byte]))
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    data = await asyncio.wait_for(reader.read(200), 1.0)  # a byte a second
                    if data:
                        parts = data.split(b"\r\n", 1)[0].split()
                        tally.answers[parts[1].decode() if len(parts) > 1 else "closed"] += 1
                        break
                    tally.answers["closed"] += 1
                    break
        except ConnectionError:
            tally.answers["reset"] += 1
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        tally.reopened += 1
        await asyncio.sleep(1.0)  # the next byte a second later, on a new connection


async def oversized(port: int, stop: float, count: int, tally: Tally) -> None:
    for i in range(count):
        if time.monotonic() >= stop:
            return
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(ABUSER, 0))
        except OSError:
            tally.answers["connect refused"] += 1
            await asyncio.sleep(0.5)
            continue
        try:
            if i % 2:
                head = b"POST /api/votes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                writer.write(head + b"Content-Length: 200000000\r\n\r\n" + b"{" * 65536)
            else:
                writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"z" * 1_000_000 + b"\r\n\r\n")
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            tally.answers[f"oversized {await status_of(reader, 5.0)}"] += 1
        except ConnectionError:
            tally.answers["oversized reset"] += 1
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def probe(port: int, seconds: float, every: float, out: Any) -> None:
    """The visitor, in a process of its own so the abusers' event loop cannot delay its clock."""
    request = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode()
    stop = time.monotonic() + seconds
    timings: list[float] = []
    failures = 0
    while time.monotonic() < stop:
        started = time.monotonic()
        try:
            with socket.create_connection(
                ("127.0.0.1", port), timeout=5.0, source_address=(VISITOR, 0)
            ) as conn:
                conn.sendall(request)
                reply = b""
                while chunk := conn.recv(65536):
                    reply += chunk
            if not reply.startswith(b"HTTP/1.1 200"):
                failures += 1
        except OSError:
            failures += 1
        timings.append(time.monotonic() - started)
        time.sleep(max(0.0, every - (time.monotonic() - started)))
    out.put((timings, failures))


async def watch_memory(pid: int, stop: float, tally: Tally) -> None:
    while time.monotonic() < stop:
        tally.peak_rss_mb = max(tally.peak_rss_mb, server_rss_mb(pid))
        await asyncio.sleep(0.5)


async def abuse(port: int, args: argparse.Namespace, tally: Tally, pid: int) -> None:
    stop = time.monotonic() + args.seconds
    tasks = [asyncio.create_task(watch_memory(pid, stop, tally))]
    for i in range(args.sockets):
        tasks.append(asyncio.create_task(slow_socket(port, stop, tally)))
        if i % 100 == 99:
            await asyncio.sleep(0.05)  # open them over a moment, as a real attacker's kernel would
    tasks.append(asyncio.create_task(oversized(port, stop, args.oversized, tally)))
    await asyncio.gather(*tasks)


def start_server(
    folder: Path, port: int, env_extra: dict[str, str], timeout: float
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "ARENA_SNAPSHOT_DIR": str(folder / "snapshots"),
        **env_extra,
    }
    command = [
        sys.executable, "-m", "arena.cli.main", "serve", "--demo", "--demo-votes", "200",
        "--database-url", f"sqlite:///{folder / 'arena.db'}", "--host", "127.0.0.1", "--port", str(port),
        "--log-level", "warning",
    ]  # fmt: skip
    with (folder / "server.log").open("ab") as log:
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True
        )  # nosec B603
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}; see {folder / 'server.log'}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return process
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("server did not come up")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sockets", type=int, default=2000, help="idle slow sockets from 127.0.0.1")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the abuse lasts")
    parser.add_argument("--oversized", type=int, default=200, help="oversized bodies and headers, at most")
    parser.add_argument("--probe-every", type=float, default=0.25, help="seconds between visitor probes")
    parser.add_argument("--startup-timeout", type=float, default=180.0)
    parser.add_argument("--header-timeout", type=float, default=None, help="ARENA_HEADER_TIMEOUT_SECONDS")
    args = parser.parse_args(argv)
    env: dict[str, str] = {}
    if args.header_timeout is not None:
        env["ARENA_HEADER_TIMEOUT_SECONDS"] = str(args.header_timeout)
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="arena-abuse-") as tmp:
        port = free_port()
        server = start_server(Path(tmp), port, env, args.startup_timeout)
        results: Any = multiprocessing.get_context("fork").Queue()
        visitor = multiprocessing.get_context("fork").Process(
            target=probe, args=(port, args.seconds, args.probe_every, results)
        )
        try:
            visitor.start()
            asyncio.run(abuse(port, args, tally, server.pid))
            tally.probes, tally.probe_failures = results.get(timeout=60)
            visitor.join(timeout=10)
        finally:
            os.killpg(server.pid, 15)
            server.wait(timeout=30)
            log_text = (Path(tmp) / "server.log").read_text(errors="replace")
    slowest = max(tally.probes, default=float("inf"))
    figures = {
        "sockets": args.sockets,
        "seconds": args.seconds,
        "probes": len(tally.probes),
        "probe_failures": tally.probe_failures,
        "slowest_probe_s": round(slowest, 3),
        "median_probe_s": round(sorted(tally.probes)[len(tally.probes) // 2], 3) if tally.probes else None,
        "peak_server_rss_mb": round(tally.peak_rss_mb, 1),
        "abusive_connections_opened": tally.reopened,
        "answers_to_abuse": dict(tally.answers.most_common()),
        "server_tracebacks": log_text.count("Traceback"),
        "load": os.getloadavg()[0],
        "machine": machine_info(),
    }
    print(json.dumps(figures))  # noqa: T201
    ok = slowest < SLOWEST_LIMIT_S and tally.probe_failures == 0 and tally.peak_rss_mb < RSS_LIMIT_MB
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
