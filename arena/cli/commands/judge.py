"""`arena judge`: pairwise LLM-as-judge over the catalog's answers, both orders, verdicts stored as votes."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from sqlmodel import Session

from arena.cli.commands.costs import print_run_costs
from arena.cli.options import DatabaseUrlOption, echo_failures, open_store, settings_for
from votes.catalog.endpoints import UnknownEndpoint, get_endpoint, set_endpoint_params

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
    from arena.llm.client import EndpointClient, EndpointError
    from arena.llm.judging import (
        BUILTIN_TEMPLATES,
        JudgeReport,
        judge_label,
        load_template,
        plan_judging,
        run_judging,
    )
    from arena.llm.registry import config_for
    from leaderboard.composite.agreement import position_report, vote_scores
    from votes.reads.annotated import annotated_battles

    if template in BUILTIN_TEMPLATES:
        chosen = BUILTIN_TEMPLATES[template]
    elif Path(template).is_file() and verdicts in BUILTIN_TEMPLATES:
        chosen = load_template(Path(template), verdicts=verdicts)
    else:
        raise typer.BadParameter(f"no built-in template or file {template!r}", param_hint="--template")
    engine = open_store(settings_for(database_url))
    try:
        with Session(engine) as session:
            try:
                record = get_endpoint(session=session, name=judge)
            except UnknownEndpoint:
                typer.echo(f"error: no endpoint named {judge!r} (see `arena models list`)", err=True)
                raise typer.Exit(2) from None
        with engine.connect() as conn:
            tasks = plan_judging(
                conn, judge=judge, template=chosen, models=models.split(",") if models else None,
                baseline=baseline, sample=sample, reference=reference, seed=seed,
            )  # fmt: skip
        typer.echo(
            f"{len(tasks)} ordered pair(s) to judge with {judge} ({chosen.name}, {chosen.sha256[:12]})"
        )

        async def go() -> JudgeReport:
            async with EndpointClient(config_for(record)) as client:
                with Progress(
                    TextColumn("judging"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    console=Console(stderr=True), disable=quiet,
                ) as progress:  # fmt: skip
                    bar = progress.add_task("pairs", total=len(tasks))
                    return await run_judging(
                        engine, tasks, client, chosen, strong_weight=strong_weight,
                        parse_retries=parse_retries, concurrency=concurrency,
                        on_done=lambda: progress.advance(bar),
                    )  # fmt: skip

        try:
            report = asyncio.run(go())
        except EndpointError as exc:  # the first request: nothing else would fare better
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        probe = report.probe
        if probe is not None and probe.mode != record.params.get("json_schema_mode", "json_schema"):
            with Session(engine) as session:
                set_endpoint_params(session=session, name=judge, params={"json_schema_mode": probe.mode})
            refusals = "; ".join(f"{mode} ({why})" for mode, why in probe.refused)
            typer.echo(
                f"{judge}: the server refused {refusals}; judged with {probe.mode}, "
                f"now stored on the endpoint (json_schema_mode={probe.mode})"
            )
        with engine.connect() as conn:
            battles, labels = annotated_battles(conn)
        typer.echo(
            f"run {report.run_id}: {report.n_parsed} verdicts ({report.n_votes} votes), "
            f"{report.n_unparseable} unparseable, {len(report.failures)} failed ({report.seconds:.2f} s)"
        )
        print_run_costs(engine, kind="judging", names=[judge], run_id=report.run_id)
    finally:
        engine.dispose()
    label = judge_label(judge)
    if label in labels and len(battles):
        position = position_report(battles, vote_scores(battles), labels.index(label))
        elo = "-" if math.isnan(position.position_elo) else f"{position.position_elo:+.1f}"
        typer.echo(
            f"{label}: position consistency {position.consistency:.3f} over {position.n_swapped} swapped "
            f"pairs; first answer wins {position.first_win_rate:.3f} of decisive votes; "
            f"position term (bt-position) {elo} Elo"
        )
    if report.failures:
        echo_failures(report.failures, total=report.n_planned)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("judge")(judge_command)
