"""`arena evaluate`: which rating system forecasts held-out votes best? Batch models and online raters
side by side, the verdict with a paired bootstrap interval, and a calibration plot."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.console import Console
from sqlmodel import Session

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
    battle_filter,
    database_filter,
    pick_components,
    read_battle_file,
)
from arena.cli.commands.evaluate_report import (
    annotator_positions_text,
    render_table,
    row_dicts,
    verdict_text,
    write_out,
)
from arena.cli.options import open_store, settings_for

if TYPE_CHECKING:
    from leaderboard.battles import Battles
    from leaderboard.evaluation.held_out import MethodScore
    from votes.reads.filters import VoteFilter

__all__ = ["evaluate", "register"]


def _compare(
    train: Battles, test: Battles, *, half_life: float | None, prior_sd: float
) -> tuple[list[MethodScore], int]:
    """The comparison rows; votes without style covariates (NaN rows) are left out of the style rows
    only. Also returns how many votes were left out."""
    import numpy as np

    from leaderboard.evaluation.held_out import default_methods, evaluate_methods

    if train.features is None or test.features is None:
        return evaluate_methods(train, test, half_life=half_life, prior_sd=prior_sd, all_methods=True), 0
    ok_train = np.isfinite(train.features).all(axis=1)
    ok_test = np.isfinite(test.features).all(axis=1)
    if ok_train.all() and ok_test.all():
        return evaluate_methods(train, test, half_life=half_life, prior_sd=prior_sd, all_methods=True), 0
    plain = evaluate_methods(
        replace(train, features=None),
        replace(test, features=None),
        half_life=half_life,
        prior_sd=prior_sd,
        all_methods=True,
    )
    styled = [m for m in default_methods(half_life=half_life, prior_sd=prior_sd, style=True) if m.style]
    rows = evaluate_methods(
        train.take(np.flatnonzero(ok_train)),
        test.take(np.flatnonzero(ok_test)),
        methods=styled,
        half_life=half_life,
        prior_sd=prior_sd,
    )
    left_out = int((~ok_train).sum() + (~ok_test).sum())
    return plain + rows, left_out


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
    from votes.files.records import InputError
    from votes.reads.sources import battles_from_file, battles_from_store

    if split not in ("auto", "random", "time"):
        raise typer.BadParameter("--split must be 'auto', 'random' or 'time'")
    if cluster not in ("annotator", "prompt", "none"):
        raise typer.BadParameter("expected annotator, prompt or none", param_hint="--cluster")
    if method not in (None, "composite"):
        raise typer.BadParameter(f"unknown method {method!r}; available: composite", param_hint="--method")
    file_filters = (language, since, until, anony_only, models, exclude_models, judge, baseline, shape, style)
    if method == "composite" and from_file is not None and any(file_filters):
        raise typer.BadParameter(
            "--method composite reads a battles file whole (with its judge column): no filters, shape or "
            "style options",
            param_hint="--method",
        )
    labels: tuple[str, ...] | None = None

    def stored_filter() -> VoteFilter:
        """The filter options as a database filter (the composite's reader and the store's read it)."""
        return database_filter(
            language=language,
            since=since,
            until=until,
            annotators=annotators,
            judge=judge,
            anony_only=anony_only,
            models=models,
            exclude_models=exclude_models,
        )

    try:
        if method == "composite":
            battles, labels, source = _sourced_votes(
                from_file,
                database_url,
                stored_filter(),
            )
        elif from_file is not None and not style:
            selection = battle_filter(
                language=language,
                since=since,
                until=until,
                anony_only=anony_only,
                models=models,
                exclude_models=exclude_models,
                judge=judge,
            )
            read = read_battle_file(
                from_file,
                filters=selection,
                shape=shape,
                skip_invalid=skip_invalid,
                report=report_file,
                baseline=baseline,
                quiet=as_json,
            )
            battles = read.battles
            source = str(from_file)
        elif from_file is not None:
            battles = battles_from_file(from_file, catalog=catalog, style=style)
            source = str(from_file)
        else:
            vote_filter = stored_filter()
            engine = open_store(settings_for(database_url))
            try:
                with Session(engine) as session:
                    # with who voted: the rater-ability row and the per-annotator position terms
                    battles = battles_from_store(session, style=style, filters=vote_filter, who=True)
            finally:
                engine.dispose()
            source = "database"
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except ValueError as exc:  # no answer texts for the style rows
        raise typer.BadParameter(str(exc)) from None
    if len(battles) == 0:
        typer.echo(f"error: {source}: no votes to evaluate", err=True)
        raise typer.Exit(2)
    parts = pick_components(battles, largest=largest_component, each=each_component, source=source)
    results: list[list[dict[str, object]]] = []
    for k, part in enumerate(parts, start=1):
        name = source if len(parts) == 1 else f"{source} (component {k}: {', '.join(part.models[:6])})"
        folder = None if out is None else (out if len(parts) == 1 else out / f"component-{k}")
        results.append(
            _evaluate_part(
                part,
                source=name,
                split=split,
                test_fraction=test_fraction,
                seed=seed,
                half_life=half_life,
                prior=prior,
                rounds=rounds,
                out=folder,
                as_json=as_json,
                cluster=cluster,
                labels=labels,
            )
        )
    if as_json:
        if len(parts) == 1:
            typer.echo(json.dumps(results[0], indent=2))
        else:
            typer.echo(
                json.dumps(
                    [
                        {"component": k, "models": list(p.models), "rows": rows}
                        for k, (p, rows) in enumerate(zip(parts, results, strict=True), start=1)
                    ],
                    indent=2,
                )
            )


def _evaluate_part(
    battles: Battles,
    *,
    source: str,
    split: str,
    test_fraction: float,
    seed: int,
    half_life: float | None,
    prior: float,
    rounds: int,
    out: Path | None,
    as_json: bool,
    cluster: str = "none",
    labels: tuple[str, ...] | None = None,
) -> list[dict[str, object]]:
    """Evaluate one connected set of votes: print its table (unless ``as_json``), write ``out``, and
    return its rows as dictionaries."""
    from leaderboard.evaluation.held_out import drop_unseen, split_battles
    from leaderboard.evaluation.systems import online_scores, pick_winner

    if len(battles) < 10:
        raise typer.BadParameter(f"{source}: only {len(battles)} votes: too few to evaluate")
    how: Literal["random", "time"] = "time" if split == "time" else "random"
    if split == "auto" and battles.time is not None:
        how = "time"
    train, test = split_battles(battles, how=how, test_fraction=test_fraction, random_state=seed)
    rows, left_out = _compare(train, test, half_life=half_life, prior_sd=prior)
    rows += online_scores(train, test, rolling=how == "time")
    if labels is not None:
        rows.append(_composite_row(train, test, labels, source))
    groups = None
    if cluster != "none":
        scored = drop_unseen(train, test)  # the test votes the rows score, in their order
        groups = scored.annotator if cluster == "annotator" else scored.prompt
        if groups is None:
            raise typer.BadParameter(f"{source}: the votes carry no {cluster} ids", param_hint="--cluster")
    try:
        verdict = pick_winner(rows, n_rounds=rounds, random_state=seed, groups=groups)
    except ValueError as exc:  # style rows scored on fewer votes than the clusters name
        raise typer.BadParameter(str(exc), param_hint="--cluster") from None
    dicts = row_dicts(rows, verdict, left_out)
    by_annotator = _annotator_positions(battles)
    if by_annotator is not None:
        for d in dicts:
            if d["method"] == "davidson-position":
                d["position_by_annotator"] = by_annotator
    title = f"{source}: {len(train)} training / {len(test)} test votes, {how} split, seed {seed}"
    written = [] if out is None else write_out(out, dicts, rows, title)
    if as_json:
        return dicts
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 190))
    console.print(render_table(rows, title=title))
    console.print(verdict_text(verdict))
    if written:
        console.print("Wrote " + ", ".join(str(p) for p in written))
    if left_out:
        console.print(f"{left_out} votes without answer texts are left out of the style rows.")
    for r in rows:
        pos = r.parameters_fitted.get("position_advantage_elo")
        if r.method == "davidson-position" and pos is not None:
            significant = pos["ci_low"] > 0 or pos["ci_high"] < 0
            word = "significant" if significant else "not significant"
            console.print(
                f"Left-side advantage (davidson-position): {pos['value']:.1f} Elo "
                f"[{pos['ci_low']:.1f}, {pos['ci_high']:.1f}], {word} at 95%."
            )
    if by_annotator is not None:
        console.print(annotator_positions_text(by_annotator))
    return dicts


def _annotator_positions(battles: Battles) -> dict[str, object] | None:
    """Each annotator's left-side advantage on all the votes (:func:`leaderboard.quality.judge_position`),
    when the votes name at least two annotators with enough votes; None otherwise."""
    from leaderboard.evaluation.held_out import has_raters
    from leaderboard.quality.judge_position import judge_positions

    if not has_raters(battles):
        return None
    try:
        return judge_positions(battles, battles.annotator_names or None).describe()
    except ValueError:  # fewer than two annotators with a fitted position term
        return None


def _sourced_votes(
    from_file: Path | None, database_url: str | None, vote_filter: VoteFilter
) -> tuple[Battles, tuple[str, ...], str]:
    """The votes with who cast them (the composite's input) and the annotators' labels; refuses votes
    that name no LLM judge, since the plain readers' votes carry no sources to tell judges apart."""
    from votes.reads.annotated import agreement_input_from_file, agreement_input_from_store, is_judge

    if from_file is not None:
        read = agreement_input_from_file(from_file)
        source = str(from_file)
    else:
        engine = open_store(settings_for(database_url))
        try:
            with engine.connect() as conn:
                read = agreement_input_from_store(conn, vote_filter)
        finally:
            engine.dispose()
        source = "database"
    present = (
        set() if read.battles.annotator is None else {read.labels[i] for i in set(read.battles.annotator)}
    )
    if not any(is_judge(label) for label in present):
        typer.echo(
            f"error: {source}: --method composite needs each vote's source, and no vote names an LLM judge "
            "(annotator judge:<model> or llm-<model>; a file's judge column, the database's annotators)",
            err=True,
        )
        raise typer.Exit(2)
    return read.battles, read.labels, source


def _composite_row(train: Battles, test: Battles, labels: tuple[str, ...], source: str) -> MethodScore:
    """The composite's row, fitted on the training votes; a fit that cannot be made is a usage error."""
    from leaderboard.composite.board import composite_score
    from votes.reads.annotated import is_judge

    try:
        return composite_score(train, test, labels, judges=[label for label in labels if is_judge(label)])
    except ValueError as exc:  # no human votes in training, models never compared
        raise typer.BadParameter(f"{source}: composite: {exc}", param_hint="--method") from None


def register(app: typer.Typer) -> None:
    app.command("evaluate")(evaluate)
