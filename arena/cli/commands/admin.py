"""`arena annotators` and `arena leaks`: who votes oddly, and which answers sign themselves.

Both read the store. The annotators' review fits (the fitting stack): it is
:mod:`arena.cli.commands.runs.annotators`'s, imported when `arena annotators` runs, so `arena leaks` starts
without it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated

import typer

from arena.cli.commands.board_output import print_whole, whole_row, whole_table
from arena.cli.options import DatabaseUrlOption, examples, settings_for
from arena.cli.store import open_store
from votes.review.leak_review import find_leaks

__all__ = ["annotators", "leaks", "register"]


def annotators(
    database_url: DatabaseUrlOption = None,
    apply: Annotated[
        bool, typer.Option(help="Flag the suspicious annotators (their votes stop counting).")
    ] = False,
    alpha: Annotated[float, typer.Option(help="False discovery rate per test (Benjamini-Hochberg).")] = 0.01,
    min_votes: Annotated[int, typer.Option(help="Annotators with fewer votes are never flagged.")] = 20,
    min_median_seconds: Annotated[float, typer.Option(help="Flag a median time per vote below this.")] = 2.0,
    show_all: Annotated[
        bool, typer.Option("--all", help="List every annotator, not only suspicious/flagged.")
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='One JSON object per annotator, then one with the overall self-agreement ("overall").',
        ),
    ] = False,
) -> None:
    """Per-annotator statistics against the current fit; list (with --apply, flag) the outliers.

    Flagged votes are shadow-excluded: stored and listed here, not counted in live ratings or published
    boards. ``weight`` is the annotator's posterior probability of being honest (the robust fit's weight).
    Gold accuracy joins in (golds voted right, with a 95% Wilson interval); a gold flag is the entry's one
    reason. With --apply, golds that good annotators keep missing are retired too. Self-agreement on
    repeat battles (an own earlier battle shown again, sides swapped) joins in the same way: repeats
    voted alike, with a 95% Wilson interval; with 10 repeats or more and an upper bound below 60% it is a
    reason. The overall self-agreement closes the table.
    """
    from arena.cli.commands.runs.annotators import run_annotators  # the fitting stack: not for leaks

    run_annotators(
        database_url=database_url,
        apply=apply,
        alpha=alpha,
        min_votes=min_votes,
        min_median_seconds=min_median_seconds,
        show_all=show_all,
        as_json=as_json,
    )


def leaks(
    database_url: DatabaseUrlOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per leaking output.")] = False,
) -> None:
    """Outputs that name their own model or maker: kept out of battles, listed here for review."""
    engine = open_store(settings_for(database_url))
    try:
        with engine.connect() as conn:
            rows = find_leaks(conn)
    finally:
        engine.dispose()
    if as_json:
        for r in rows:
            typer.echo(json.dumps(dataclasses.asdict(r)))
        return
    columns = ("output", "prompt", "model", "names", "self", "votes", "excerpt")
    table = whole_table(f"Identity leaks: {len(rows)} output(s)", columns)
    for r in rows:
        whole_row(
            table,
            str(r.output_id),
            r.prompt or "",
            r.model,
            ", ".join(r.aliases),
            "yes" if r.self_reference else "",
            str(r.n_votes),
            r.excerpt,
        )
    print_whole(table)


def register(app: typer.Typer) -> None:
    app.command(
        "annotators", epilog=examples("arena annotators --all", "arena annotators --apply --alpha 0.01")
    )(annotators)
    app.command("leaks", epilog=examples("arena leaks", "arena leaks --json"))(leaks)
