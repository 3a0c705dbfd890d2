"""`arena serve`: run the voting site with uvicorn (optionally with demo data and several workers)."""

from __future__ import annotations

import contextlib
import inspect
import logging
import logging.config
import os
import re
import shutil
import socket
import subprocess  # nosec B404 # starts this program's own vote writer
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
import uvicorn
from sqlmodel import Session, select

from arena.cli.options import examples
from arena.logs import log_config
from arena.settings import Settings, live_config
from arena.web.connections import guarded_protocol
from votes.db import make_engine
from votes.models import Model

__all__ = [
    "metrics_folder",
    "prepare_database",
    "reap_dead_processes",
    "register",
    "serve",
    "vote_writer",
    "vote_writer_process",
]


def prepare_database(
    database_url: str, *, demo: bool, demo_votes: int, seed: int, snapshot_dir: str | None = None
) -> str:
    """Bring the schema up to date; with ``demo``, load demo data into an empty database. Says what it did.

    With ``snapshot_dir`` the demo also gets its first published boards, as `arena publish` makes them
    (the overall board and one per category and language), so that `/leaderboard` shows the published
    boards (intervals, rank ranges, plots) and not only the live Elo.
    """
    from votes.migrate import upgrade_database  # Alembic: `arena vote-writer` starts without it

    upgrade_database(database_url)
    if not demo:
        return "schema ready"
    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            if session.exec(select(Model.id).limit(1)).first() is not None:
                return "database not empty: demo data not loaded"
        from votes.imports.demo import load_demo  # the import machinery: only with --demo

        load_demo(engine, n_votes=demo_votes, seed=seed)
        said = f"demo data loaded ({demo_votes} votes, seed {seed})"
        if snapshot_dir is not None and demo_votes > 0:
            from arena.publish.snapshots import publish_slices  # the fitting stack, only to publish
            from leaderboard.bt.request import FitRequest  # the fitting stack, only to publish

            rows = publish_slices(engine, snapshot_dir=snapshot_dir, request=FitRequest(random_state=seed))
            said += f"; published snapshot {rows[0].id} and {len(rows) - 1} more boards in {snapshot_dir}"
        return said
    finally:
        engine.dispose()


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    database_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL (default: ARENA_DATABASE_URL or sqlite:///arena.db).")
    ] = None,
    demo: Annotated[
        bool, typer.Option(help="Load demo models, prompts and votes into an empty database.")
    ] = False,
    demo_votes: Annotated[int, typer.Option(help="Votes to simulate for --demo.")] = 2000,
    seed: Annotated[int, typer.Option(help="Seed for --demo data.")] = 0,
    workers: Annotated[
        int, typer.Option(min=1, help="Web worker processes (SQLite or PostgreSQL; see --writer-process).")
    ] = 1,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    worker_startup_timeout: Annotated[
        int,
        typer.Option(
            min=1,
            help="Seconds a worker may take to import the app and start before uvicorn restarts it "
            "(uvicorn's own default, 5 s, kills workers that are merely slow on a busy machine).",
        ),
    ] = 120,
    writer_process: Annotated[
        bool | None,
        typer.Option(
            "--writer-process/--no-writer-process",
            help="Write votes in a process of their own, shared by all workers (one transaction and one "
            "fsync for the votes of every worker). Default: on with more than one worker.",
        ),
    ] = None,
) -> None:
    """Run the voting site."""
    if database_url:
        os.environ["ARENA_DATABASE_URL"] = database_url
    # Workers must share one secret, or a token signed by one is refused by another.
    os.environ.setdefault("ARENA_SECRET_KEY", Settings().secret_key)
    settings = Settings()
    if workers > 1 and not settings.redis_url:
        typer.echo("note: without ARENA_REDIS_URL, rate limits are counted per worker.")
    options: dict[str, Any] = {}
    if "timeout_worker_healthcheck" in inspect.signature(uvicorn.Config).parameters:  # uvicorn >= 0.30
        options["timeout_worker_healthcheck"] = worker_startup_timeout
    use_writer = writer_process if writer_process is not None else workers > 1
    with contextlib.ExitStack() as stack:
        if workers > 1 or use_writer:
            # A writer process is a second process even beside one worker: its samples reach /metrics
            # only through the shared folder. Named before anything imports prometheus-client here (a
            # demo's publish does; the single worker runs here), so this process writes there as well.
            stack.enter_context(metrics_folder())
        said = prepare_database(
            settings.database_url,
            demo=demo,
            demo_votes=demo_votes,
            seed=seed,
            snapshot_dir=settings.snapshot_dir,
        )
        typer.echo(said)
        if use_writer:  # after the schema is ready
            socket_path = stack.enter_context(vote_writer_process())
            os.environ["ARENA_VOTE_WRITER_SOCKET"] = socket_path
            typer.echo(f"vote writer process ready on {socket_path}")
        uvicorn.run(
            "arena.app:create_app_from_env",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level=log_level,
            proxy_headers=False,
            # httptools (or h11) with a header-read timeout, connection caps and a header size limit applied
            # while headers arrive (431 for what gets through comes from arena.web.limits).
            http=guarded_protocol(),
            h11_max_incomplete_event_size=settings.max_header_bytes,
            timeout_keep_alive=5,
            log_config=log_config(json_lines=settings.log_format == "json", level=log_level),
            **options,
        )


@contextlib.contextmanager
def metrics_folder(*, sweep_s: float = 5.0) -> Iterator[str]:
    """A private folder for prometheus-client's multiprocess samples, named in ``PROMETHEUS_MULTIPROC_DIR``
    for the processes started from here (workers and vote writer), and removed afterwards.

    With one worker and no writer process the site runs in this process, whose registry is already live: no
    folder is needed. While the folder exists, every ``sweep_s`` seconds the live gauges of processes that
    have exited (a worker uvicorn restarted, a writer that died) are dropped (:func:`reap_dead_processes`).
    """
    folder = tempfile.mkdtemp(prefix="arena-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
    done = threading.Event()

    def sweep() -> None:
        while not done.wait(sweep_s):
            reap_dead_processes(folder)

    sweeper = threading.Thread(target=sweep, name="arena-metrics-sweeper", daemon=True)
    sweeper.start()
    try:
        yield folder
    finally:
        done.set()
        sweeper.join()
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
        shutil.rmtree(folder, ignore_errors=True)


_SAMPLE_FILE = re.compile(r"^[a-z_]+_(\d+)\.db$")


def reap_dead_processes(folder: str) -> list[int]:
    """Tell prometheus-client that the processes whose sample files lie in ``folder`` but which are gone
    have exited: their live gauges (votes awaiting commit) stop counting. Counters and histograms of a
    dead process stay (a count never goes back). Returns the pids reaped.
    """
    from prometheus_client import multiprocess  # imported once metrics_folder has named its folder

    pids = set()
    for name in os.listdir(folder):
        match = _SAMPLE_FILE.match(name)
        if match and name.startswith("gauge_live"):
            pids.add(int(match.group(1)))
    dead = sorted(pid for pid in pids if not _alive(pid))
    for pid in dead:
        multiprocess.mark_process_dead(pid, folder)  # type: ignore[no-untyped-call]
    return dead


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # somebody else's process under a reused pid: not ours to judge
        return True
    return True


@contextlib.contextmanager
def vote_writer_process(*, startup_timeout_s: float = 120.0) -> Iterator[str]:
    """Start ``arena vote-writer`` on a private socket; yield the socket's path; stop it (gracefully) after.

    The writer ignores Ctrl-C (sent to the whole terminal's process group): the web workers finish their
    requests first, and only then is the writer told to commit what is left and stop. If it dies while the
    site runs, it is started again (the workers write their own votes meanwhile and reconnect).
    """
    folder = tempfile.mkdtemp(prefix="arena-writer-")  # mode 0700: only this user reaches the socket
    path = os.path.join(folder, "votes.sock")
    cmd = [
        sys.executable,
        "-m",
        "arena.cli.writer_process",
        "--socket",
        path,
        "--parent-pid",
        str(os.getpid()),
    ]
    supervisor = _WriterSupervisor(cmd, path, startup_timeout_s=startup_timeout_s)
    try:
        supervisor.start()
        yield path
    finally:
        supervisor.stop()
        shutil.rmtree(folder, ignore_errors=True)


class _WriterSupervisor:
    """Keeps one vote writer process running; gives up after ``max_restarts`` deaths within a minute."""

    def __init__(self, cmd: list[str], path: str, *, startup_timeout_s: float, max_restarts: int = 5) -> None:
        self.cmd = cmd
        self.path = path
        self.startup_timeout_s = startup_timeout_s
        self.max_restarts = max_restarts
        self.process: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._deaths: list[float] = []
        self._watcher: threading.Thread | None = None

    def start(self) -> None:
        if not self._spawn():
            raise typer.Exit(1)
        self._watcher = threading.Thread(target=self._watch, name="arena-writer-supervisor", daemon=True)
        self._watcher.start()

    def _spawn(self) -> bool:
        with self._lock:
            if self._stopping.is_set():
                return False
            process = subprocess.Popen(self.cmd, env=os.environ.copy())  # nosec B603 # our own command
            self.process = process
        deadline = time.monotonic() + self.startup_timeout_s
        while not _accepts(self.path):
            if self._stopping.is_set():
                return False
            if process.poll() is not None:
                typer.echo(f"the vote writer exited with status {process.returncode}; see above", err=True)
                return False
            if time.monotonic() > deadline:
                typer.echo(f"the vote writer did not start within {self.startup_timeout_s:.0f} s", err=True)
                return False
            time.sleep(0.02)
        return True

    def _watch(self) -> None:
        while not self._stopping.wait(0.5):
            process = self.process
            if process is None or process.poll() is None:
                continue
            now = time.monotonic()
            self._deaths = [t for t in self._deaths if now - t < 60.0] + [now]
            if len(self._deaths) > self.max_restarts:
                typer.echo(
                    f"the vote writer died {len(self._deaths)} times within a minute; not starting it again "
                    "(the workers write their own votes)",
                    err=True,
                )
                return
            typer.echo(
                f"the vote writer exited with status {process.returncode}; starting it again", err=True
            )
            self._spawn()

    def stop(self) -> None:
        self._stopping.set()
        if self._watcher is not None:
            self._watcher.join()
        with self._lock:
            process = self.process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _accepts(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(path)
        except OSError:
            return False
        return True


def vote_writer(
    socket_path: Annotated[Path, typer.Option("--socket", help="Unix socket to listen on.")],
    database_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL (default: ARENA_DATABASE_URL or sqlite:///arena.db).")
    ] = None,
    parent_pid: Annotated[
        int | None, typer.Option(hidden=True, help="Stop when this process is gone.")
    ] = None,
    ignore_interrupt: Annotated[
        bool, typer.Option(hidden=True, help="Ignore SIGINT; stop on SIGTERM only.")
    ] = False,
) -> None:
    """Run the shared vote writer: web workers started with ARENA_VOTE_WRITER_SOCKET pointing at SOCKET
    hand it their votes, and it commits the votes of all of them together.

    `arena serve --workers N` starts one by itself; run it yourself when the workers run under another
    process manager. SIGTERM (or Ctrl-C) stops it after the votes it holds are committed and answered.
    """
    from votes.voting.writer.service import run_vote_writer  # the writer's own loop: not for `arena serve`

    if database_url:
        os.environ["ARENA_DATABASE_URL"] = database_url
    settings = Settings()
    if settings.log_format == "json":
        logging.config.dictConfig(log_config(json_lines=True))
    else:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s arena vote-writer: %(message)s")
    run_vote_writer(
        settings.database_url,
        socket_path,
        config=live_config(settings),
        max_wait_ms=settings.group_commit_max_wait_ms,
        max_batch=settings.group_commit_max_batch,
        parent_pid=parent_pid,
        ignore_interrupt=ignore_interrupt,
    )


def register(app: typer.Typer) -> None:
    app.command(
        "serve", epilog=examples("arena serve --demo", "arena serve --host 0.0.0.0 --port 8080 --workers 4")
    )(serve)
    app.command("vote-writer", epilog=examples("arena vote-writer --socket /run/arena/votes.sock"))(
        vote_writer
    )
