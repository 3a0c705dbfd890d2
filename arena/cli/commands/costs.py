"""`arena costs`: tokens spent on answers (per model) and on LLM-judge verdicts (per judge), per run and
in total, summed from the stored rows (see :mod:`votes.catalog.costs`).

Every command here reads the store (and the runs of `arena generate` and `arena judge` print their tokens
through :func:`print_run_costs`), so the store's modules are imported at the top."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, cast

import typer
from rich.console import Console
from rich.table import Table

from arena.cli.options import DatabaseUrlOption, examples, settings_for
from arena.cli.store import open_store
from votes.catalog.costs import TokenUse, UseKind, token_use, total_use

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["costs_command", "print_run_costs", "register"]


def _row(use: TokenUse) -> dict[str, object]:
    return {
        "kind": use.kind,
        "name": use.name,
        "run_id": use.run_id,
        "n": use.n,
        "prompt_tokens": use.prompt_tokens,
        "completion_tokens": use.completion_tokens,
        "total_tokens": use.total_tokens,
        "n_unreported": use.n_unreported,
        "first": use.first.isoformat() if use.first else None,
        "last": use.last.isoformat() if use.last else None,
    }


def costs_command(
    by_run: Annotated[bool, typer.Option("--by-run", help="One line per run, not per model/judge.")] = False,
    kind: Annotated[
        str | None, typer.Option(help="answers (generate) or judging (judge); default both.")
    ] = None,
    names: Annotated[
        str | None, typer.Option("--names", help="Comma-separated models or judges (default all).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Rows and totals as JSON.")] = False,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Prompt and completion tokens of the stored answers per model and of the stored judgments per
    judge (per run with --by-run), with totals. Tokens of failed requests are not stored, so not here."""
    if kind not in (None, "answers", "judging"):
        raise typer.BadParameter("answers or judging", param_hint="--kind")
    engine = open_store(settings_for(database_url))
    try:
        with engine.connect() as conn:
            uses = token_use(
                conn,
                by_run=by_run,
                kind=cast("UseKind | None", kind),
                names=names.split(",") if names else None,
            )
    finally:
        engine.dispose()
    totals = {
        k: dict(zip(("n", "prompt_tokens", "completion_tokens"), total_use(uses, kind=k), strict=True))
        for k in ("answers", "judging")
    }
    if as_json:
        typer.echo(json.dumps({"rows": [_row(u) for u in uses], "totals": totals}, sort_keys=True))
        return
    table = Table(title="Tokens of stored answers (per model) and judgments (per judge)")
    for column in ("kind", "name", *(["run"] if by_run else []), "n", "prompt", "completion", "total",
                   "no usage", "first", "last"):  # fmt: skip
        table.add_column(column, no_wrap=column not in ("name",), overflow="fold")
    for u in uses:
        table.add_row(
            u.kind, u.name, *([u.run_id or ""] if by_run else []), f"{u.n:,}", f"{u.prompt_tokens:,}",
            f"{u.completion_tokens:,}", f"{u.total_tokens:,}", str(u.n_unreported),
            str(u.first)[:19] if u.first else "", str(u.last)[:19] if u.last else "",
        )  # fmt: skip
    Console(width=200).print(table)
    for k, t in totals.items():
        typer.echo(
            f"total {k}: {t['n']:,} rows, {t['prompt_tokens']:,} prompt + "
            f"{t['completion_tokens']:,} completion tokens"
        )


def print_run_costs(engine: Engine, *, kind: UseKind, names: Sequence[str], run_id: str) -> None:
    """After a run: its tokens per model (or judge) and, for the same names, all stored runs' totals."""
    with engine.connect() as conn:
        runs = token_use(conn, by_run=True, kind=kind, names=names)
        overall = token_use(conn, kind=kind, names=names)
    this = [u for u in runs if u.run_id == run_id]
    for label, chosen in (("this run", this), ("all runs", overall)):
        for u in chosen:
            typer.echo(
                f"  tokens {label}: {u.name}: {u.n} {kind}, {u.prompt_tokens} prompt + "
                f"{u.completion_tokens} completion"
            )
        typer.echo(
            f"  tokens {label}, total: {sum(u.prompt_tokens for u in chosen)} prompt + "
            f"{sum(u.completion_tokens for u in chosen)} completion"
        )


def register(app: typer.Typer) -> None:
    app.command("costs", epilog=examples("arena costs --by-run", "arena costs --kind judging --json"))(
        costs_command
    )
