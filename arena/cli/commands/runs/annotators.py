"""`arena annotators` at work: every annotator reviewed against the current fit (with --apply, the outliers
flagged and the live ratings rebuilt), printed as a table or JSON.

The command's options and help are :mod:`arena.cli.commands.admin`'s; its function imports this module when
it runs, so the review's fitting stack is imported here, at the top, and `arena leaks` starts without it.
"""

from __future__ import annotations

import dataclasses
import json
import math

import typer

from arena.cli.commands.board_output import print_whole, whole_row, whole_table
from arena.cli.options import settings_for
from arena.cli.store import open_store
from arena.settings import live_config
from leaderboard.quality.annotators import FlagRule
from votes.review.voters import review_annotators
from votes.voting.repeat_votes import overall_self_agreement

__all__ = ["run_annotators"]


def _clean(value: object) -> object:
    return None if isinstance(value, float) and math.isnan(value) else value


def run_annotators(
    *,
    database_url: str | None,
    apply: bool,
    alpha: float,
    min_votes: int,
    min_median_seconds: float,
    show_all: bool,
    as_json: bool,
) -> None:
    """What `arena annotators` does with its options (:func:`arena.cli.commands.admin.annotators`)."""
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
    title = f"Annotators ({len(shown)} of {len(rows)} shown)"
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
    table = whole_table(title, (*columns, "reason"))
    for r in shown:
        whole_row(
            table,
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
    print_whole(table)
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
