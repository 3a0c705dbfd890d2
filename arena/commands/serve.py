"""`arena serve`: run the voting site with uvicorn (optionally with demo data and several workers)."""

from __future__ import annotations

import inspect
import os
from typing import Annotated, Any

import typer
import uvicorn
from sqlmodel import Session, select

from arena.settings import Settings
from votes.db import make_engine
from votes.models import Model

__all__ = ["prepare_database", "register", "serve"]


def prepare_database(
    database_url: str, *, demo: bool, demo_votes: int, seed: int, snapshot_dir: str | None = None
) -> str:
    """Bring the schema up to date; with ``demo``, load demo data into an empty database. Says what it did.

    With ``snapshot_dir`` the demo also gets a first published snapshot, so that `/leaderboard` shows the
    published board (intervals, rank ranges, plots) and not only the live Elo.
    """
    from votes.migrate import upgrade_database

    upgrade_database(database_url)
    if not demo:
        return "schema ready"
    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            if session.exec(select(Model.id).limit(1)).first() is not None:
                return "database not empty: demo data not loaded"
        from votes.demo import load_demo

        load_demo(engine, n_votes=demo_votes, seed=seed)
        said = f"demo data loaded ({demo_votes} votes, seed {seed})"
        if snapshot_dir is not None and demo_votes > 0:
            from arena.publishing import FitOptions, publish_snapshot

            row = publish_snapshot(engine, snapshot_dir=snapshot_dir, options=FitOptions(random_state=seed))
            said += f"; published snapshot {row.id} in {snapshot_dir}"
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
        int, typer.Option(min=1, help="Worker processes (use PostgreSQL for more than 1).")
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
) -> None:
    """Run the voting site."""
    if database_url:
        os.environ["ARENA_DATABASE_URL"] = database_url
    # Workers must share one secret, or a token signed by one is refused by another.
    os.environ.setdefault("ARENA_SECRET_KEY", Settings().secret_key)
    settings = Settings()
    if workers > 1 and settings.database_url.startswith("sqlite") and not settings.redis_url:
        typer.echo("note: several workers on SQLite share the database lock; rate limits are per worker.")
    said = prepare_database(
        settings.database_url, demo=demo, demo_votes=demo_votes, seed=seed, snapshot_dir=settings.snapshot_dir
    )
    typer.echo(said)
    options: dict[str, Any] = {}
    if "timeout_worker_healthcheck" in inspect.signature(uvicorn.Config).parameters:  # uvicorn >= 0.30
        options["timeout_worker_healthcheck"] = worker_startup_timeout
    uvicorn.run(
        "arena.app:create_app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        proxy_headers=False,
        **options,
    )


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
