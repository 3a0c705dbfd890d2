"""`arena evaluate` at work: which rating system forecasts held-out votes best? Batch models and online
raters scored side by side, the verdict with a paired bootstrap interval, and a calibration plot.

The command's options and help are :mod:`arena.cli.commands.evaluate`'s; its function imports this module
when it runs, so the fitting stack and the votes' readers (:mod:`votes.reads.sources`, which every
evaluation imports) are imported here, at the top. The composite's fit and the votes with who cast them
are imported only by ``--method composite``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Literal

import numpy as np
import typer
from rich.console import Console
from sqlmodel import Session

from arena.cli.commands.battle_files import VoteSelection
from arena.cli.commands.runs.evaluate_report import (
    annotator_positions_text,
    left_out_text,
    render_table,
    row_dicts,
    verdict_text,
    write_out,
)
from arena.cli.commands.runs.from_file import pick_components, read_battle_file
from arena.cli.options import settings_for
from arena.cli.store import open_store
from leaderboard.battles import Battles
from leaderboard.evaluation.held_out import (
    MethodScore,
    default_methods,
    drop_unseen,
    evaluate_methods,
    has_raters,
    split_battles,
)
from leaderboard.evaluation.systems import left_out_rows, online_scores, pick_winner
from leaderboard.quality.judge_position import judge_positions
from votes.files.records import InputError
from votes.reads.filters import VoteFilter
from votes.reads.sources import battles_from_file, battles_from_store

__all__ = ["run_evaluate"]


def _compare(
    train: Battles, test: Battles, *, half_life: float | None, prior_sd: float
) -> tuple[list[MethodScore], int]:
    """The comparison rows; votes without style covariates (NaN rows) are left out of the style rows
    only. Also returns how many votes were left out."""
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


def run_evaluate(
    *,
    from_file: Path | None,
    database_url: str | None,
    split: str,
    test_fraction: float,
    seed: int,
    half_life: float | None,
    prior: float,
    style: bool,
    catalog: Path | None,
    out: Path | None,
    rounds: int,
    as_json: bool,
    shape: str | None,
    skip_invalid: bool,
    report_file: Path | None,
    selection: VoteSelection,
    baseline: str | None,
    largest_component: bool,
    each_component: bool,
    cluster: str,
    method: str | None,
) -> None:
    """What `arena evaluate` does with its options (:func:`arena.cli.commands.evaluate.evaluate`)."""
    if split not in ("auto", "random", "time"):
        raise typer.BadParameter("--split must be 'auto', 'random' or 'time'")
    if cluster not in ("annotator", "prompt", "none"):
        raise typer.BadParameter("expected annotator, prompt or none", param_hint="--cluster")
    if method not in (None, "composite"):
        raise typer.BadParameter(f"unknown method {method!r}; available: composite", param_hint="--method")
    s = selection
    file_filters = (s.language, s.since, s.until, s.anony_only, s.models, s.exclude_models, s.judge)
    if method == "composite" and from_file is not None and any((*file_filters, baseline, shape, style)):
        raise typer.BadParameter(
            "--method composite reads a battles file whole (with its judge column): no filters, shape or "
            "style options",
            param_hint="--method",
        )
    labels: tuple[str, ...] | None = None

    try:
        if method == "composite":
            battles, labels, source = _sourced_votes(from_file, database_url, selection.store_filter())
        elif from_file is not None and not style:
            read = read_battle_file(
                from_file,
                filters=selection.file_filter(),
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
            vote_filter = selection.store_filter()
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
    if len(battles) < 10:
        raise typer.BadParameter(f"{source}: only {len(battles)} votes: too few to evaluate")
    how: Literal["random", "time"] = "time" if split == "time" else "random"
    if split == "auto" and battles.time is not None:
        how = "time"
    train, test = split_battles(battles, how=how, test_fraction=test_fraction, random_state=seed)
    rows, left_out = _compare(train, test, half_life=half_life, prior_sd=prior)
    rows += online_scores(train, test, rolling=how == "time")
    unidentified = left_out_text(left_out_rows(train, half_life=half_life, prior_sd=prior))
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
        for line in unidentified:  # the JSON on standard output stays the rows alone
            typer.echo(line, err=True)
        return dicts
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 190))
    console.print(render_table(rows, title=title))
    for line in unidentified:
        console.print(line, soft_wrap=True)
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
    from votes.reads.annotated import (  # the votes with who cast them: only --method composite
        agreement_input_from_file,
        agreement_input_from_store,
        is_judge,
    )

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
    from leaderboard.composite.board import composite_score  # the composite's fit: only --method composite
    from votes.reads.annotated import is_judge  # only --method composite

    try:
        return composite_score(train, test, labels, judges=[label for label in labels if is_judge(label)])
    except ValueError as exc:  # no human votes in training, models never compared
        raise typer.BadParameter(f"{source}: composite: {exc}", param_hint="--method") from None
