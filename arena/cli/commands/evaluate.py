"""`arena evaluate`: which rating system forecasts held-out votes best? Batch models and online raters
side by side, the verdict with a paired bootstrap interval, and a calibration plot.

Here are its options and help; what it does is :mod:`arena.cli.commands.runs.evaluate`'s, imported when the
command runs, so `arena evaluate --help` loads no fitting library."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from arena.cli.commands.battle_files import (
    AnnotatorsOpt,
    AnonyOnlyOpt,
    BaselineOpt,
    EachOpt,
    ExcludeModelsOpt,
    JudgeOpt,
    LanguageOpt,
    LargestOpt,
    ModelsOpt,
    ReportOpt,
    ShapeOpt,
    SinceOpt,
    SkipInvalidOpt,
    UntilOpt,
    VoteSelection,
)
from arena.cli.options import examples

__all__ = ["evaluate", "register"]


def evaluate(
    from_file: Annotated[
        Path | None,
        typer.Option("--from", help="Battles file (Chatbot Arena format); default: the database."),
    ] = None,
    database_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL (default: ARENA_DATABASE_URL).")
    ] = None,
    split: Annotated[
        str,
        typer.Option(
            help="auto (time when the votes have times, else random), random, or time: fit on the older "
            "votes, test on the newer (online raters also forecast each test vote from all before it)."
        ),
    ] = "auto",
    test_fraction: Annotated[float, typer.Option(help="Share of votes held out for testing.")] = 0.2,
    seed: Annotated[int, typer.Option(help="Seed of the random split.")] = 0,
    half_life: Annotated[
        float | None,
        typer.Option(help="Half-life of the time-weighted row (seconds; default half the span)."),
    ] = None,
    prior: Annotated[
        float, typer.Option(help="Prior standard deviation (Elo) of the row with a prior.")
    ] = 200.0,
    style: Annotated[
        bool, typer.Option(help="Add style-control rows (answer texts from the file or the database).")
    ] = False,
    catalog: Annotated[
        Path | None,
        typer.Option(help="Answer catalog for style features when battles carry no conversations."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Folder for evaluate.json and the calibration plot (SVG, PNG).")
    ] = None,
    rounds: Annotated[int, typer.Option(help="Bootstrap rounds of the verdict's interval.")] = 2000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the table as JSON.")] = False,
    shape: ShapeOpt = None,
    skip_invalid: SkipInvalidOpt = False,
    report_file: ReportOpt = None,
    anony_only: AnonyOnlyOpt = False,
    models: ModelsOpt = None,
    exclude_models: ExcludeModelsOpt = None,
    judge: JudgeOpt = None,
    baseline: BaselineOpt = None,
    largest_component: LargestOpt = False,
    each_component: EachOpt = False,
    language: LanguageOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    annotators: AnnotatorsOpt = None,
    cluster: Annotated[
        str,
        typer.Option(
            "--cluster",
            help="The verdict's interval resamples whole clusters of test votes: annotator, prompt or none.",
        ),
    ] = "none",
    method: Annotated[
        str | None,
        typer.Option(
            "--method",
            help="composite: add the source-aware composite (humans and each LLM judge a source of its "
            "own) as one more row; needs who cast each vote.",
        ),
    ] = None,
) -> None:
    """Compare every rating system on held-out votes: the batch models and the online raters.

    --method composite adds the composite row. It needs each vote's source, which the plain battle
    readers drop: the votes are then read with their annotators (a file's `judge` column, the stored
    votes' annotator labels; stored votes without a prompt are left out), and `judge:<model>` or
    `llm-<model>` names a judge, anyone else is the human pool. A file is read whole (no filters), there
    are no vote times (a random split), and votes with no judge at all are refused: say so rather than
    fit a composite of humans alone.

    A file may be in any shape `arena import` reads; the filters select its battles (or the stored
    votes) as for recompute; with --each-component every part of a graph in parts is evaluated alone.

    Test scores: log-loss (three outcomes), Brier, accuracy (weighted means when votes carry weights),
    AUC, calibration and the fitted scale; training: AIC and BIC. Names the best system and its margin
    over the runner-up.
    """
    from arena.cli.commands.runs.evaluate import run_evaluate  # the fitting stack: not for --help

    run_evaluate(
        from_file=from_file,
        database_url=database_url,
        split=split,
        test_fraction=test_fraction,
        seed=seed,
        half_life=half_life,
        prior=prior,
        style=style,
        catalog=catalog,
        out=out,
        rounds=rounds,
        as_json=as_json,
        shape=shape,
        skip_invalid=skip_invalid,
        report_file=report_file,
        selection=VoteSelection(
            language=language,
            since=since,
            until=until,
            annotators=annotators,
            judge=judge,
            anony_only=anony_only,
            models=models,
            exclude_models=exclude_models,
        ),
        baseline=baseline,
        largest_component=largest_component,
        each_component=each_component,
        cluster=cluster,
        method=method,
    )


def register(app: typer.Typer) -> None:
    app.command(
        "evaluate",
        epilog=examples(
            "arena evaluate --from battles.jsonl.gz --out evaluation/",
            "arena evaluate --split time --test-fraction 0.1",
        ),
    )(evaluate)
