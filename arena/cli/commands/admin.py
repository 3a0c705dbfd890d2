"""`arena annotators` and `arena leaks`: who votes oddly, and which answers sign themselves."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from arena.cli.options import DatabaseUrlOption, open_store, settings_for
from arena.settings import live_config

__all__ = ["annotators", "leaks", "register"]


def _clean(value: object) -> object:
    return None if isinstance(value, float) and math.isnan(value) else value


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
    from leaderboard.quality.annotators import FlagRule
    from votes.review.voters import review_annotators
    from votes.voting.repeat_votes import overall_self_agreement

    settings = settings_for(database_url)
    engine = open_store(settings)
    try:
        rule = FlagRule(alpha=alpha, min_votes=min_votes, min_median_seconds=min_median_seconds)
        rows = review_annotators(
            engine,
            rule=rule,
            apply=apply,
            elo_config=live_config(settings),
        )
        with engine.connect() as conn:
            overall = overall_self_agreement(conn)
    finally:
        engine.dispose()
    shown = rows if show_all else [r for r in rows if r.suspicious or r.flagged]
    if as_json:
        for r in shown:
            typer.echo(json.dumps({k: _clean(v) for k, v in dataclasses.asdict(r).items()}))
        typer.echo(json.dumps({"overall": {"self_agreement": overall.as_dict()}}))
        return
    table = Table(title=f"Annotators ({len(shown)} of {len(rows)} shown)")
    columns = (
        "id",
        "kind",
        "votes/seen",
        "group",
        "left",
        "median s",
        "agree q",
        "model",
        "discrim.",
        "on screen",
        "weight",
        "gold (95%)",
        "self (95%)",
        "flagged",
    )
    for column in (*columns, "reason"):
        table.add_column(column)
    for r in shown:
        table.add_row(
            str(r.annotator_id),
            r.kind,
            f"{r.n_votes}/{r.n_seen}",
            str(r.address_group),
            f"{r.left_share:.2f}",
            f"{r.median_seconds:.1f}",
            f"{r.agreement_q:.1e}",
            f"{r.favourite or '-'} ({'+' if r.favours > 0 else '-'}, q={r.favouritism_q:.1e})",
            "-" if math.isnan(r.discrimination) else f"{r.discrimination:.2f}",
            f"{r.on_screen} {r.on_screen_share:.0%}/{r.on_screen_expected:.0%} (q={r.on_screen_q:.1e})"
            if r.on_screen
            else "-",
            f"{r.honest_weight:.2f}",
            f"{r.gold_right}/{r.n_gold} ({r.gold_low:.0%}-{r.gold_high:.0%})" if r.n_gold else "-",
            f"{r.repeat_agreed}/{r.n_repeat} ({r.self_agreement_low:.0%}-{r.self_agreement_high:.0%})"
            if r.n_repeat
            else "-",
            "yes" if r.flagged else "no",
            r.flag_reason or r.reason or "",
        )
    Console().print(table)
    if overall.n_repeat:
        typer.echo(
            f"Self-agreement on repeat battles: {overall.n_agreed} of {overall.n_repeat} "
            f"({overall.share:.1%}, 95% {overall.low:.1%}-{overall.high:.1%})."
        )
    else:
        typer.echo("Self-agreement on repeat battles: no repeat votes yet.")
    n_new = sum(1 for r in rows if r.suspicious and r.flag_reason and r.flag_reason.startswith("auto: "))
    if apply:
        typer.echo(f"{n_new} annotator(s) flagged by this review; live ratings rebuilt.")
    elif any(r.suspicious and not r.flagged for r in rows):
        typer.echo("Run again with --apply to flag the suspicious annotators.")


def leaks(
    database_url: DatabaseUrlOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per leaking output.")] = False,
) -> None:
    """Outputs that name their own model or maker: kept out of battles, listed here for review."""
    from votes.review.leak_review import find_leaks

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
    table = Table(title=f"Identity leaks: {len(rows)} output(s)")
    for column in ("output", "prompt", "model", "names", "self", "votes", "excerpt"):
        table.add_column(column)
    for r in rows:
        table.add_row(
            str(r.output_id),
            r.prompt or "",
            r.model,
            ", ".join(r.aliases),
            "yes" if r.self_reference else "",
            str(r.n_votes),
            r.excerpt,
        )
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.command("annotators")(annotators)
    app.command("leaks")(leaks)
