"""`arena agreement`: how annotators (humans and LLM judges alike) agree, with 95% intervals, on the store
or on a battles file, and how judges lean.

Here are its options and help; what it does is :mod:`arena.cli.commands.runs.agreement`'s, imported when the
command runs, so `arena agreement --help` loads no statistics library."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from arena.cli.options import DatabaseUrlOption, examples

__all__ = ["agreement_command", "register"]


def agreement_command(
    from_file: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="A battles file (any shape `arena import` reads) instead of the database; a row without "
            "a judge is one anonymous vote.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The whole report as one JSON document.")] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Agreement between annotators (humans and LLM judges alike), on the store or a battles file,
    each figure with a 95% bootstrap interval over items.

    Conventions: an item is one prompt (and turn) with one unordered model pair; a vote for the right
    side in the swapped order counts for the same model; `tie` and `tie (bothbad)` are one class; a
    judge's two orders of one battle are two votes. Figures, for all votes and per category and
    language: agreement exact (left, tie, right), without ties (pairs with a tie dropped), ties as half;
    Fleiss' kappa; Krippendorff's alpha nominal and interval (left < tie < right); Gwet's AC1; each
    annotator against the majority of the others (leave-one-out); prefer-first and prefer-longer shares
    of decisive votes as baselines. Between annotator groups (humans pooled, each judge alone; verdict =
    sign of the mean over both orders): agreement and Cohen's kappa with and without ties; per judge:
    position consistency, first-position win rate, the `bt-position` term and self-preference. On the
    store, also the overall self-agreement on repeat battles (an annotator's own earlier battle shown
    again, sides swapped; agreeing when both votes name the same model or both a tie), with a 95% Wilson
    interval (`self_agreement` in the JSON; null figures without repeats)."""
    from arena.cli.commands.runs.agreement import run_agreement  # the fitting stack: not for --help

    run_agreement(
        from_file=from_file,
        as_json=as_json,
        database_url=database_url,
    )


def register(app: typer.Typer) -> None:
    app.command(
        "agreement", epilog=examples("arena agreement", "arena agreement --from battles.jsonl.gz --json")
    )(agreement_command)
