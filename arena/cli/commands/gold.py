"""`arena gold add|derive|list`: gold battles (a right vote known), served among live battles.

``add`` reads a maintainer's JSONL file (all lines checked first; any bad line and nothing is written),
``derive`` makes golds from the catalog's own answers, ``list`` shows them with how often they were
voted right. Serving, recording and the accuracy review live in :mod:`arena.voting.checks`,
:mod:`votes.voting.gold_votes` and :mod:`votes.review.gold_review`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Annotated

import typer
from sqlmodel import Session

from arena.cli.commands.board_output import print_whole, whole_row, whole_table
from arena.cli.options import DatabaseUrlOption, examples, settings_for
from arena.cli.store import open_store
from votes.review.gold_review import gold_item_rows
from votes.voting.gold_items import GoldFileError, add_gold_file, derive_golds

__all__ = ["gold_app", "register"]

gold_app = typer.Typer(
    help="Gold battles (the right vote known): add from a file, derive from the catalog, list.",
    epilog=examples("arena gold derive --count 200", "arena gold list"),
    no_args_is_help=True,
)


@gold_app.command("add", epilog=examples("arena gold add golds.jsonl"))
def gold_add(
    path: Annotated[
        Path, typer.Argument(help="JSONL: one gold per line (kind, prompt, right/wrong or text).")
    ],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Add the golds of a JSONL file; on any bad line (`file: line N: reason`) nothing is written.

    Each line is an object: ``{"kind": "objective" | "degraded", "prompt", "right", "wrong"}`` with
    optional ``model_right``/``model_wrong`` (catalog names the reveal shows) and ``detail``, or
    ``{"kind": "identical", "prompt", "text"}`` with optional ``model``. Adding a file again adds nothing.
    """
    if not path.is_file():
        typer.echo(f"error: {path}: no such file", err=True)
        raise typer.Exit(1)
    engine = open_store(settings_for(database_url))
    try:
        with Session(engine) as session:
            try:
                added = add_gold_file(session, path)
            except GoldFileError as exc:
                for problem in exc.problems:
                    typer.echo(f"error: {problem}", err=True)
                typer.echo("nothing was written.", err=True)
                raise typer.Exit(1) from None
            session.commit()
    finally:
        engine.dispose()
    typer.echo(f"{added} gold(s) added.")


@gold_app.command("derive", epilog=examples("arena gold derive --count 200 --seed 1"))
def gold_derive(
    count: Annotated[int, typer.Option(min=1, max=100_000, help="How many golds to derive at most.")] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the choice of answers and corruptions.")] = 0,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Derive golds from the catalog: answers cut short, sentences shuffled, another prompt's answer, and
    the same answer twice (right vote: tie)."""
    engine = open_store(settings_for(database_url))
    try:
        with Session(engine) as session:
            # Which answers to corrupt and how: a reproducible draw, not a secret (serving draws elsewhere).
            added = derive_golds(session, count=count, rng=random.Random(seed))  # nosec B311
            session.commit()
    finally:
        engine.dispose()
    typer.echo(f"{added} gold(s) derived.")


@gold_app.command("list", epilog=examples("arena gold list", "arena gold list --json"))
def gold_list(
    database_url: DatabaseUrlOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per gold.")] = False,
) -> None:
    """Every gold with its kind, source, votes, share voted right and whether it is retired."""
    engine = open_store(settings_for(database_url))
    try:
        with Session(engine) as session:
            rows = gold_item_rows(session)
    finally:
        engine.dispose()
    if as_json:
        for r in rows:
            typer.echo(json.dumps(r.as_dict()))
        return
    columns = ("id", "kind", "detail", "source", "right", "votes", "voted right", "retired")
    table = whole_table(f"Gold battles: {len(rows)}", columns)
    for r in rows:
        share = f"{r.n_right / r.n_votes:.2f}" if r.n_votes else "-"
        whole_row(
            table,
            str(r.gold_id),
            r.kind,
            r.detail or "",
            r.source,
            r.right,
            str(r.n_votes),
            share,
            r.retired_reason or ("yes" if r.retired else ""),
        )
    print_whole(table)


def register(app: typer.Typer) -> None:
    app.add_typer(gold_app, name="gold")
