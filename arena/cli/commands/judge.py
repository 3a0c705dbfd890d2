"""`arena judge`: pairwise LLM-as-judge over the catalog's answers, both orders, verdicts stored as votes.

Here are its options and help; what it does is :mod:`arena.cli.commands.runs.judge`'s, imported when the
command runs, so `arena judge --help` loads neither the LLM client nor the fitting stack.
"""

from __future__ import annotations

from typing import Annotated

import typer

from arena.cli.options import DatabaseUrlOption, examples

__all__ = ["judge_command", "register"]


def judge_command(
    judge: Annotated[str, typer.Option("--judge", help="Registered endpoint that judges.")],
    baseline: Annotated[
        str | None, typer.Option(help="Judge each model against this one (arena-hard); default all pairs.")
    ] = None,
    models: Annotated[
        str | None, typer.Option(help="Comma-separated models to compare (default all).")
    ] = None,
    sample: Annotated[int | None, typer.Option(min=1, help="Judge this many pairs (seeded sample).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the sample.")] = 0,
    template: Annotated[
        str, typer.Option(help="arena-hard (five levels), mt-bench (three-way), or a Jinja file.")
    ] = "arena-hard",
    verdicts: Annotated[
        str, typer.Option(help="For a Jinja file: the verdict style, arena-hard or mt-bench.")
    ] = "arena-hard",
    reference: Annotated[
        str | None, typer.Option(help="A model whose answers are shown to the judge as references.")
    ] = None,
    strong_weight: Annotated[int, typer.Option(min=1, help="Votes per strong verdict (A>>B, B>>A).")] = 1,
    parse_retries: Annotated[int, typer.Option(min=0, help="Asks again on an unparseable verdict.")] = 2,
    concurrency: Annotated[int, typer.Option(min=1, help="Requests in flight.")] = 8,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Judge answer pairs in both orders; each verdict is a vote of `judge:<JUDGE>`, kept out of the live
    standings and of boards unless asked for (`arena recompute --annotators judge:<JUDGE>`)."""
    from arena.cli.commands.runs.judge import run_judge  # openai and the fitting stack: not for --help

    run_judge(
        judge=judge,
        baseline=baseline,
        models=models,
        sample=sample,
        seed=seed,
        template=template,
        verdicts=verdicts,
        reference=reference,
        strong_weight=strong_weight,
        parse_retries=parse_retries,
        concurrency=concurrency,
        quiet=quiet,
        database_url=database_url,
    )


def register(app: typer.Typer) -> None:
    app.command(
        "judge",
        epilog=examples(
            "arena judge --judge gpt-4o --baseline gpt-4o-mini",
            "arena judge --judge gpt-4o --models llama-8b,qwen-7b --sample 200",
        ),
    )(judge_command)
