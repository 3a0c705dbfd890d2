"""Crash test: a real uvicorn server under concurrent voters is killed with SIGKILL, restarted, and checked.

1. A fresh database (SQLite file or a scratch PostgreSQL database) gets a synthetic catalog.
2. ``uvicorn arena.app:create_app_from_env`` starts; ``--clients`` threads each hold their own annotator
   session and loop over the full flow: ``GET /api/battles/next`` then ``POST /api/votes`` with an
   ``Idempotency-Key``. A vote counts as acknowledged when its 200 reply reached the client.
3. After ``--before-kill`` seconds the server gets SIGKILL in mid-flight. It is restarted; the clients
   retry the votes whose replies they never saw (same token, same key) and go on for ``--after-kill``
   seconds; then the server is stopped normally.
4. Checks: every acknowledged vote is in the database with its winner, no battle or retried vote was
   written twice, the database's own integrity checks pass, and the live ratings equal a replay of the
   counted votes in commit order.

    .venv/bin/python scripts/crash_test.py --backend sqlite
    .venv/bin/python scripts/crash_test.py --backend postgresql --clients 16 --before-kill 10
    .venv/bin/python scripts/crash_test.py --backend postgresql --workers 2  # all of arena serve killed
    .venv/bin/python scripts/crash_test.py --backend sqlite --workers 2 --kill writer

With ``--workers 2`` the server is ``arena serve --workers 2`` (two workers and their vote writer process)
and SIGKILL goes to its whole process group; with ``--kill writer`` only the vote writer process is killed
and the workers go on (writing the votes themselves), so there is nothing to restart.

Prints the counts and ends with one JSON line (backend, sent, acknowledged, found, lost, duplicated,
replay_equal, ...). Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _bench_common import free_port, is_vote_writer, processes_in_group  # noqa: E402
from sqlalchemy import func, select, text  # noqa: E402
from sqlalchemy.engine import Engine  # noqa: E402
from sqlmodel import Session, SQLModel  # noqa: E402

from leaderboard.data import OUTCOME_STRINGS  # noqa: E402
from leaderboard.online.elo import EloConfig  # noqa: E402
from votes.db import make_engine  # noqa: E402
from votes.models import GoldVote, Model, Output, Prompt, RepeatVote  # noqa: E402
from votes.tables import battle_t, vote_t  # noqa: E402
from votes.voting.ratings import replay_live_ratings  # noqa: E402
from votes.voting.views import live_standings  # noqa: E402

PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
WINNERS = tuple(OUTCOME_STRINGS.values())
ELO_K = 4.0


@contextmanager
def scratch_database(backend: str, folder: Path, pg_admin_url: str) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{folder}/crash.db"
        return
    admin = make_engine(pg_admin_url)
    name = f"arena_crash_{uuid.uuid4().hex[:12]}"
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))  # nosec B608 - a generated name
    try:
        yield admin.url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))  # nosec B608
        admin.dispose()


def seed_catalog(engine: Engine, *, n_models: int, n_prompts: int) -> None:
    SQLModel.metadata.create_all(engine)
    with Session(engine) as session:
        models = [Model(name=f"model-{i:02d}") for i in range(n_models)]
        prompts = [Prompt(text=f"Question {i}?", external_id=f"q{i}") for i in range(n_prompts)]
        session.add_all([*models, *prompts])
        session.flush()
        for p in prompts:
            for m in models:
                session.add(Output(prompt_id=p.id, model_id=m.id, text=f"Answer number {m.id} to {p.text}"))  # type: ignore[arg-type]
        session.commit()


class Server:
    """The site on a fixed port; ``kill`` is SIGKILL, ``stop`` is SIGTERM (graceful).

    One worker: uvicorn alone. More: ``arena serve --workers N`` with its vote writer process, in a process
    group of its own, so that ``kill`` takes down all of it at once (as a crash of the machine would);
    ``kill_writer`` kills only the vote writer process and leaves the workers running.
    """

    def __init__(self, database_url: str, port: int, log: Path, *, workers: int = 1) -> None:
        self.port = port
        self.log = log
        self.workers = workers
        self.env = {
            **os.environ,
            "ARENA_DATABASE_URL": database_url,
            "ARENA_SECRET_KEY": "crash-test-secret",  # tokens and sessions survive the restart
            "ARENA_RATE_LIMIT_PER_MINUTE": "1000000",
            "ARENA_RATE_LIMIT_PER_ADDRESS_PER_MINUTE": "1000000",
            # All load clients share one address: the per-address vote and session limits are raised too.
            "ARENA_VOTES_PER_ADDRESS_PER_MINUTE": "1000000",
            "ARENA_VOTES_PER_ADDRESS_PER_DAY": "1000000",
            "ARENA_NEW_SESSIONS_PER_ADDRESS_PER_HOUR": "1000000",
            "ARENA_ELO_K": str(ELO_K),
            "PYTHONPATH": str(ROOT),
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> None:
        if self.workers == 1:
            command = [
                sys.executable, "-m", "uvicorn", "arena.app:create_app_from_env", "--factory",
                "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning",
            ]  # fmt: skip
        else:
            command = [
                sys.executable, "-m", "arena.cli.main", "serve", "--workers", str(self.workers),
                "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning",
            ]  # fmt: skip
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                command,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                start_new_session=self.workers > 1,
            )  # nosec B603
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}; see {self.log}")
            try:
                if httpx.get(f"{self.url}/api/leaderboard", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("server did not come up")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        assert self.process is not None
        if self.workers > 1:
            os.killpg(self.process.pid, signal.SIGKILL)
        else:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        if self.workers > 1:  # the group's other members, reparented; wait until they are gone
            deadline = time.monotonic() + 10
            while processes_in_group(self.process.pid) and time.monotonic() < deadline:
                time.sleep(0.05)

    def kill_writer(self) -> None:
        """SIGKILL the vote writer process only; the workers go on with their own writers."""
        assert self.process is not None
        writers = [pid for pid, p in processes_in_group(self.process.pid).items() if is_vote_writer(p.cmd)]
        if not writers:
            raise RuntimeError("no vote writer process to kill (it needs --workers > 1)")
        for pid in writers:
            os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: int = 0
    retried: int = 0
    errors: int = 0
    # vote_id -> (battle_id, winner) for every 200 reply a client saw
    acknowledged: dict[int, tuple[int, str]] = field(default_factory=dict)
    replays: int = 0
    last_error: str = ""


class Voter:
    """One annotator: battle, vote, repeat; keeps the vote whose reply it never saw, to retry it."""

    def __init__(self, index: int, server: Server, tally: Tally, stop: threading.Event) -> None:
        self.index = index
        self.server = server
        self.tally = tally
        self.stop_event = stop
        self.client = httpx.Client(timeout=10.0)
        self.pending: tuple[dict[str, str], dict[str, str]] | None = (
            None  # (body, headers) of an unanswered vote
        )
        self.n = 0
        self.exhausted = False

    def run(self) -> None:
        while not self.stop_event.is_set() and not self.exhausted:
            try:
                self.step()
            except httpx.HTTPError as exc:
                with self.tally.lock:
                    self.tally.last_error = repr(exc)[:300]
                time.sleep(0.05)  # the server is down; the pending vote is retried once it is back

    def step(self) -> None:
        base = self.server.url
        if self.pending is None:
            r = self.client.get(f"{base}/api/battles/next")
            if r.status_code == 404:
                self.exhausted = True
                return
            r.raise_for_status()
            battle = r.json()
            self.n += 1
            winner = WINNERS[(self.index * 7 + self.n) % len(WINNERS)]
            body = {"token": battle["token"], "winner": winner}
            headers = {"X-CSRF-Token": battle["csrf_token"], "Idempotency-Key": f"v{self.index}-{self.n}"}
            self.pending = (body, headers)
            with self.tally.lock:
                self.tally.sent += 1
        else:
            with self.tally.lock:
                self.tally.retried += 1
        body, headers = self.pending
        r = self.client.post(f"{base}/api/votes", json=body, headers=headers)
        if r.status_code == 200:
            reply = r.json()
            with self.tally.lock:
                self.tally.acknowledged[int(reply["vote_id"])] = (int(reply["battle_id"]), reply["winner"])
                self.tally.replays += bool(reply["replayed"])
        else:
            with self.tally.lock:
                self.tally.errors += 1
        self.pending = None


def run_clients(voters: list[Voter], seconds: float, on_time: Any) -> None:
    stop = threading.Event()
    for v in voters:
        v.stop_event = stop
    threads = [threading.Thread(target=v.run, daemon=True) for v in voters]
    for t in threads:
        t.start()
    time.sleep(seconds)
    on_time()
    stop.set()
    for t in threads:
        t.join(timeout=30)


def integrity(engine: Engine, backend: str) -> tuple[bool, str]:
    with engine.connect() as conn:
        if backend == "sqlite":
            check = conn.execute(text("PRAGMA integrity_check")).scalars().all()
            fks = conn.execute(text("PRAGMA foreign_key_check")).all()
            ok = check == ["ok"] and not fks
            return ok, f"integrity_check={check[:3]}, foreign_key_check={len(fks)} row(s)"
        invalid = conn.execute(text("SELECT count(*) FROM pg_constraint WHERE NOT convalidated")).scalar_one()
        orphans = conn.execute(
            select(func.count())
            .select_from(vote_t.outerjoin(battle_t, battle_t.c.id == vote_t.c.battle_id))
            .where(battle_t.c.id.is_(None))
        ).scalar_one()
        return invalid == 0 and orphans == 0, f"unvalidated constraints={invalid}, orphan votes={orphans}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--pg-admin-url", default=PG_ADMIN_URL)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--before-kill", type=float, default=6.0, help="seconds of load before SIGKILL")
    parser.add_argument("--after-kill", type=float, default=3.0, help="seconds of load after the restart")
    parser.add_argument(
        "--workers", type=int, default=1, help="web workers; more than 1 adds the vote writer process"
    )
    parser.add_argument(
        "--kill",
        choices=["server", "writer"],
        default="server",
        help="what gets SIGKILL: the whole server, or (with --workers > 1) only its vote writer process",
    )
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=60)
    args = parser.parse_args(argv)
    if args.kill == "writer" and args.workers < 2:
        parser.error("--kill writer needs --workers 2 or more (one worker writes its own votes)")

    with (
        tempfile.TemporaryDirectory() as tmp,
        scratch_database(args.backend, Path(tmp), args.pg_admin_url) as url,
    ):
        engine = make_engine(url)
        try:
            seed_catalog(engine, n_models=args.models, n_prompts=args.prompts)
            server = Server(url, free_port(), Path(tmp) / "server.log", workers=args.workers)
            tally = Tally()
            stop = threading.Event()
            voters = [Voter(i, server, tally, stop) for i in range(args.clients)]
            server.start()
            try:
                run_clients(
                    voters, args.before_kill, server.kill_writer if args.kill == "writer" else server.kill
                )
                acknowledged_before_kill = len(tally.acknowledged)
                in_flight = sum(v.pending is not None for v in voters)
                if args.kill == "server":
                    server.start()
                run_clients(voters, args.after_kill, lambda: None)
            finally:
                server.stop()
                for v in voters:
                    v.client.close()
            report = check(engine, args.backend, tally)
        finally:
            engine.dispose()
    report = {"backend": args.backend, "workers": args.workers, "killed": args.kill, **report}
    print(
        f"{args.backend}, {args.workers} worker(s), SIGKILL to the {args.kill}: "
        f"{args.clients} clients; {tally.sent} votes sent, "
        f"{report['acknowledged']} acknowledged "
        f"({acknowledged_before_kill} before the SIGKILL, {in_flight} in flight at the kill, "
        f"{tally.errors} refused, "
        f"{tally.retried} retried after it, {tally.replays} answered as replays)"
    )
    print(
        f"  in the database: {report['found']} of the acknowledged found, {report['lost']} lost, "
        f"{report['duplicated']} duplicated; {report['votes_in_db']} votes in all"
    )
    print(f"  integrity: {report['integrity']}; live ratings == replay: {report['replay_equal']}")
    if tally.last_error:
        print(f"  last client error: {tally.last_error}")
    print(json.dumps(report))
    ok = (
        report["lost"] == 0
        and report["duplicated"] == 0
        and report["replay_equal"]
        and report["integrity_ok"]
    )
    return 0 if ok else 1


def check(engine: Engine, backend: str, tally: Tally) -> dict[str, Any]:
    with Session(engine) as session:
        rows = session.execute(
            select(vote_t.c.id, vote_t.c.battle_id, vote_t.c.winner, vote_t.c.idempotency_key)
        ).all()
        # Votes on golds and repeat battles are kept apart from `vote` (never counted), under the vote id
        # their answer showed: an acknowledged one is found there, with its battle and winner.
        apart = [
            session.execute(
                select(table.shown_vote_id, table.battle_id, table.winner, table.idempotency_key)  # type: ignore[call-overload]
            ).all()
            for table in (GoldVote, RepeatVote)
        ]
        every = [*rows, *(r for kind in apart for r in kind)]
        by_id = {r[0]: (r[1], r[2]) for r in every}
        found = sum(1 for vid, expect in tally.acknowledged.items() if by_id.get(vid) == expect)
        battles = [r[1] for r in every]
        keys = [r[3] for r in every if r[3] is not None]
        tokens = (
            session.execute(select(battle_t.c.token_id).where(battle_t.c.token_id.is_not(None)))
            .scalars()
            .all()
        )
        duplicated = (
            (len(battles) - len(set(battles)))
            + (len(keys) - len(set(keys)))
            + (len(tokens) - len(set(tokens)))
        )
        live = {s.model: (s.rating, s.games) for s in live_standings(session=session) if s.games}
        replay = replay_live_ratings(session=session, config=EloConfig(k=ELO_K))
    replay_equal = live.keys() == replay.keys() and all(
        live[m][1] == replay[m][1] and math.isclose(live[m][0], replay[m][0], abs_tol=1e-9) for m in live
    )
    ok, detail = integrity(engine, backend)
    return {
        "sent": tally.sent,
        "acknowledged": len(tally.acknowledged),
        "found": found,
        "lost": len(tally.acknowledged) - found,
        "duplicated": duplicated,
        "replay_equal": bool(replay_equal),
        "integrity_ok": ok,
        "integrity": detail,
        "votes_in_db": len(rows),
        "votes_apart_in_db": len(every) - len(rows),
        "client_errors": tally.errors,
    }


if __name__ == "__main__":
    raise SystemExit(main())
