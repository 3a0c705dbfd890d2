"""`arena evaluate`: which rating method forecasts held-out votes best? The model-comparison table."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.console import Console
from rich.table import Table
from sqlmodel import Session

from arena.settings import Settings
from votes.db import make_engine

if TYPE_CHECKING:
    from leaderboard.evaluate import Battles, FloatArray, MethodScore
    from votes.records import BattleRecord

__all__ = ["battles_from_file", "evaluate", "register"]

#: A style covariate is used only if the two answers differ in it in at least this many battles.
MIN_STYLE_BATTLES = 30


def _assistant_text(conversation: tuple[dict[str, str], ...] | None) -> str | None:
    if conversation is None:
        return None
    return "\n\n".join(str(m.get("content", "")) for m in conversation if m.get("role") == "assistant")


def battles_from_file(path: Path, *, catalog: Path | None = None, style: bool = False) -> Battles:
    """Read a Chatbot Arena battles file (JSONL/JSON/CSV/Parquet, gz) into per-vote arrays.

    With ``style``, answer texts come from the battles' conversations or, failing that, from a catalog
    file (``prompt_id``/``model``/``output``) matched on ``question_id``.
    """
    from votes.catalog_records import parse_catalog
    from votes.records import parse_battles, read_rows

    fmt, rows = read_rows(path)
    records = parse_battles(path, fmt, rows)
    battles = _battles_from_records(records)
    if not style:
        return battles
    texts: dict[tuple[str, str], str] = {}
    if catalog is not None:
        cat_fmt, cat_rows = read_rows(catalog)
        for entry in parse_catalog(catalog, cat_fmt, cat_rows):
            if entry.model is not None and entry.output is not None:
                texts[(entry.prompt_id, entry.model)] = entry.output
    left: list[str] = []
    right: list[str] = []
    for rec in records:
        a = _assistant_text(rec.conversation_a)
        b = _assistant_text(rec.conversation_b)
        if a is None or b is None:
            qid = rec.question_id or ""
            a, b = texts.get((qid, rec.model_a)), texts.get((qid, rec.model_b))
        if a is None or b is None:
            raise typer.BadParameter(
                f"{rec.where}: no answer texts for style control (give conversations or --catalog)"
            )
        left.append(a)
        right.append(b)
    values, names = _style_columns(left, right)
    return replace(battles, features=values, feature_names=names)


def _style_columns(left: list[str], right: list[str]) -> tuple[FloatArray, tuple[str, ...]]:
    """Style covariates of the answer pairs, keeping only the columns that vary often enough."""
    import numpy as np

    from leaderboard.style import style_differences

    diffs = style_differences(left, right)
    # a covariate that differs in only a handful of battles cannot be estimated (it separates them)
    keep = np.count_nonzero(diffs.values, axis=0) >= MIN_STYLE_BATTLES
    return diffs.values[:, keep], tuple(n for n, k in zip(diffs.names, keep, strict=True) if k)


def _battles_from_records(records: list[BattleRecord]) -> Battles:
    import numpy as np

    from leaderboard.data import parse_outcome
    from leaderboard.evaluate import Battles

    models = tuple(sorted({r.model_a for r in records} | {r.model_b for r in records}))
    index = {m: i for i, m in enumerate(models)}
    stamps = [r.tstamp for r in records]
    time = None if any(t is None for t in stamps) else np.asarray(stamps, dtype=np.float64)
    return Battles(
        models=models,
        left=np.fromiter((index[r.model_a] for r in records), dtype=np.int64, count=len(records)),
        right=np.fromiter((index[r.model_b] for r in records), dtype=np.int64, count=len(records)),
        outcome=np.fromiter((parse_outcome(r.winner) for r in records), dtype=np.int64, count=len(records)),
        time=time,
    )


def _battles_from_database(url: str, *, style: bool = False) -> Battles:
    """The stored votes; with ``style``, covariates from the battles' outputs, NaN rows where a vote has
    no answer texts (those votes are left out of the style rows only)."""
    import numpy as np

    from leaderboard.evaluate import Battles
    from votes.queries import iter_vote_texts, load_battles

    engine = make_engine(url)
    try:
        with Session(engine) as session:
            arrays = load_battles(session)
            texts = list(iter_vote_texts(session)) if style else []
    finally:
        engine.dispose()
    battles = Battles(
        models=arrays.models,
        left=arrays.model_a.astype(np.int64),
        right=arrays.model_b.astype(np.int64),
        outcome=arrays.outcome.astype(np.int64),
        time=arrays.tstamp,
    )
    if not style:
        return battles
    has_text = np.array([a is not None and b is not None for _, a, b in texts], dtype=bool)
    if not has_text.any():
        raise typer.BadParameter("no stored vote has both answer texts: nothing for the style rows")
    left = [a for _, a, b in texts if a is not None and b is not None]
    right = [b for _, a, b in texts if a is not None and b is not None]
    values, names = _style_columns(left, right)
    features = np.full((len(battles), values.shape[1]), np.nan)
    features[has_text] = values
    return replace(battles, features=features, feature_names=names)


def _compare(
    train: Battles, test: Battles, *, half_life: float | None, prior_sd: float
) -> tuple[list[MethodScore], int]:
    """The comparison rows; votes without style covariates (NaN rows) are left out of the style rows
    only. Also returns how many votes were left out."""
    import numpy as np

    from leaderboard.evaluate import default_methods, evaluate_methods

    if train.features is None or test.features is None:
        return evaluate_methods(train, test, half_life=half_life, prior_sd=prior_sd), 0
    ok_train = np.isfinite(train.features).all(axis=1)
    ok_test = np.isfinite(test.features).all(axis=1)
    if ok_train.all() and ok_test.all():
        return evaluate_methods(train, test, half_life=half_life, prior_sd=prior_sd), 0
    plain = evaluate_methods(
        replace(train, features=None), replace(test, features=None), half_life=half_life, prior_sd=prior_sd
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


def _extras_text(row: MethodScore) -> str:
    parts = []
    for name, v in row.parameters_fitted.items():
        short = name.replace("position_advantage_elo", "left").replace("tie_propensity_nu", "nu")
        short = short.replace("style_", "").replace("_elo", "")
        parts.append(f"{short} {v['value']:.3g} [{v['ci_low']:.3g}, {v['ci_high']:.3g}]")
    return "; ".join(parts)


def render_table(rows: list[MethodScore], *, title: str) -> Table:
    """The comparison table; the best value of each score is in bold."""
    table = Table(title=title)
    for column in ("method", "log-loss", "Brier", "accuracy", "AIC", "BIC", "k", "fitted extras [95% CI]"):
        table.add_column(
            column, justify="left" if column in ("method", "fitted extras [95% CI]") else "right"
        )
    best = {
        "log_loss": min(r.log_loss for r in rows),
        "brier": min(r.brier for r in rows),
        "accuracy": max(r.accuracy for r in rows),
        "aic": min(r.aic for r in rows),
        "bic": min(r.bic for r in rows),
    }

    def cell(row: MethodScore, key: str, fmt: str) -> str:
        value = getattr(row, key)
        text = format(value, fmt)
        return f"[bold]{text}[/bold]" if value == best[key] else text

    for r in rows:
        table.add_row(
            r.method,
            cell(r, "log_loss", ".4f"),
            cell(r, "brier", ".4f"),
            cell(r, "accuracy", ".4f"),
            cell(r, "aic", ".1f"),
            cell(r, "bic", ".1f"),
            str(r.n_params),
            _extras_text(r),
        )
    return table


def evaluate(
    from_file: Annotated[
        Path | None,
        typer.Option("--from", help="Battles file (Chatbot Arena format); default: the database."),
    ] = None,
    database_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL (default: ARENA_DATABASE_URL).")
    ] = None,
    split: Annotated[
        str, typer.Option(help="random, or time: fit on the older votes, test on the newer.")
    ] = "random",
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
    as_json: Annotated[bool, typer.Option("--json", help="Print the table as JSON.")] = False,
) -> None:
    """Compare rating methods on held-out votes: log-loss, Brier, accuracy (test), AIC and BIC (train)."""
    from leaderboard.evaluate import split_battles

    if split not in ("random", "time"):
        raise typer.BadParameter("--split must be 'random' or 'time'")
    how: Literal["random", "time"] = "random" if split == "random" else "time"
    if from_file is not None:
        battles = battles_from_file(from_file, catalog=catalog, style=style)
        source = str(from_file)
    else:
        url = database_url or Settings().database_url
        battles = _battles_from_database(url, style=style)
        source = "database"
    if len(battles) < 10:
        raise typer.BadParameter(f"only {len(battles)} votes: too few to evaluate")
    train, test = split_battles(battles, how=how, test_fraction=test_fraction, random_state=seed)
    rows, left_out = _compare(train, test, half_life=half_life, prior_sd=prior)
    if as_json:
        dicts = [r.as_dict() for r in rows]
        for d in dicts:
            if d["method"].endswith("+style"):
                d["votes_without_texts"] = left_out
        typer.echo(json.dumps(dicts, indent=2))
        return
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 150))
    title = f"{source}: {len(train)} training / {len(test)} test votes, {how} split, seed {seed}"
    console.print(render_table(rows, title=title))
    if left_out:
        console.print(f"{left_out} votes without answer texts are left out of the style rows.")
    for r in rows:
        pos = r.parameters_fitted.get("position_advantage_elo")
        if r.method == "davidson-position" and pos is not None:
            significant = pos["ci_low"] > 0 or pos["ci_high"] < 0
            verdict = "significant" if significant else "not significant"
            console.print(
                f"Left-side advantage (davidson-position): {pos['value']:.1f} Elo "
                f"[{pos['ci_low']:.1f}, {pos['ci_high']:.1f}], {verdict} at 95%."
            )


def register(app: typer.Typer) -> None:
    app.command("evaluate")(evaluate)
