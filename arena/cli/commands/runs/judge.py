"""`arena judge` at work: the judge's pairs planned, judged in both orders through its endpoint, the verdicts
stored as votes, and how the judge leans on position.

The command's options and help are :mod:`arena.cli.commands.judge`'s; its function imports this module when
it runs, so the LLM client (openai) and the agreement statistics are imported here, at the top.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from sqlmodel import Session

from arena.cli.commands.costs import print_run_costs
from arena.cli.options import echo_failures, settings_for
from arena.cli.store import open_store
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
from votes.catalog.endpoints import UnknownEndpoint, get_endpoint, set_endpoint_params
from votes.catalog.roles import ModelState, model_states
from votes.names import model_name
from votes.reads.annotated import annotated_battles

__all__ = ["run_judge"]


def _check_roles(
    states: Mapping[str, ModelState], judge: str, models: str | None, baseline: str | None
) -> None:
    """Refuse a judge that is a contestant only, or a retired one, and a compared model that only judges.

    Judging used to take any registered endpoint, so a judge was registered as a contestant and competed
    too; the store's upgrade made every model that had judged a judge (or both), and a model registered
    since says its role (``arena models add J --role judge``), so refusing costs no existing judge anything
    and keeps a contestant from judging its rivals unnoticed.
    """
    state = states.get(judge)
    if state is not None and not state.role.judges:
        raise ValueError(
            f"{judge} is a contestant, not a judge: `arena models set {judge} --role judge` (or --role both, "
            "to keep it in battles) lets it judge"
        )
    if state is not None and not state.active:
        raise ValueError(f"{judge} is retired (`arena models set {judge} --active` to judge with it again)")
    for name in [*(models.split(",") if models else []), *([baseline] if baseline else [])]:
        other = states.get(name)
        if other is not None and not other.role.competes:
            raise ValueError(f"{name} is a judge only: its answers are not compared (--models, --baseline)")


def run_judge(
    *,
    judge: str,
    baseline: str | None,
    models: str | None,
    sample: int | None,
    seed: int,
    template: str,
    verdicts: str,
    reference: str | None,
    strong_weight: int,
    parse_retries: int,
    concurrency: int,
    quiet: bool,
    database_url: str | None,
) -> None:
    """What `arena judge` does with its options (:func:`arena.cli.commands.judge.judge_command`)."""
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
                record = get_endpoint(session=session, name=model_name(judge))
                _check_roles(model_states(session), record.name, models, baseline)
            except UnknownEndpoint:
                typer.echo(f"error: no endpoint named {judge!r} (see `arena models list`)", err=True)
                raise typer.Exit(2) from None
            except ValueError as exc:
                typer.echo(f"error: {exc}", err=True)
                raise typer.Exit(2) from None
        judge = record.name
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
