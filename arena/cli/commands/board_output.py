"""The board on the console: the progress bar of a fit, the summary table, and what recompute prints.

Shared by `arena recompute` (:mod:`arena.cli.commands.recompute`), `arena publish` and `arena snapshots`
(:mod:`arena.cli.commands.snapshots`), so a board looks the same wherever it is printed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from leaderboard.result import Leaderboard
    from leaderboard.snapshot.folder import SnapshotManifest

__all__ = [
    "SUMMARY_ROWS",
    "board_json",
    "err",
    "out",
    "print_result",
    "print_agreement",
    "print_style",
    "progress_bar",
    "summary_table",
]

SUMMARY_ROWS = 20
err = Console(stderr=True)
# A pipe or a log file gets a 110-column table rather than rich's 80-column default.
out = Console(width=None if Console().is_terminal else 110)


@contextmanager
def progress_bar(enabled: bool = True) -> Iterator[Progress]:
    """A rich progress bar on stderr (hidden when stderr is not a terminal and not forced)."""
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=not enabled,
    )
    with bar:
        try:
            yield bar
        except BaseException:
            bar.live.transient = True  # an error's one line is not followed by a bar cut short
            raise


def summary_table(board: Leaderboard, *, title: str, rows: int = SUMMARY_ROWS) -> Table:
    """The top of the board, one screen high."""
    table = Table(title=title, title_justify="left")
    for name, justify in (
        ("rank", "right"),
        ("model", "left"),
        ("rating", "right"),
        ("interval", "right"),
        ("rank range", "right"),
        ("battles", "right"),
        ("win rate", "right"),
    ):
        # numbers and ranges are never cut; a long model name wraps instead
        wraps = name == "model"
        table.add_column(name, justify=justify, no_wrap=not wraps, overflow="fold")  # type: ignore[arg-type]
    order = board.order()
    for i in order[:rows]:
        table.add_row(
            str(board.rank[i]),
            board.models[i],
            f"{board.rating[i]:.1f}",
            f"{board.ci_low[i]:.1f}-{board.ci_high[i]:.1f}",
            f"{board.rank_low[i]}-{board.rank_high[i]}",
            _count(board.battles[i]),
            f"{board.win_rate[i]:.1%}",
        )
    if len(order) > rows:
        table.add_row("", f"... {len(order) - rows} more in leaderboard.csv", "", "", "", "", "")
    return table


def _count(value: float) -> str:
    """A count as an integer when it is whole (summed time weights keep their decimals)."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.2f}"


def board_json(board: Leaderboard, manifest_path: Path, metadata: dict[str, Any]) -> str:
    """What --json prints for a fitted board: the snapshot's metadata, folder and rows, best first."""
    import json

    from leaderboard.snapshot.files import leaderboard_table

    rows = json.loads(leaderboard_table(board).to_json(orient="records"))
    return json.dumps({"path": str(manifest_path), "metadata": metadata, "models": rows}, default=str)


def print_result(board: Leaderboard, manifest: SnapshotManifest, *, seconds: float, source: str) -> None:
    meta = manifest.metadata
    title = (
        f"{meta['method']} on {_count(meta['n_votes'])} votes from {source} "
        f"({len(board.models)} models, {meta['slice']}, seed {meta['seed']}, {seconds:.1f} s)"
    )
    out.print(summary_table(board, title=title))
    fitted = meta.get("parameters_fitted") or {}
    for name, value in sorted(fitted.items()):
        low, high = value.get("ci_low"), value.get("ci_high")
        interval = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
        out.print(f"  {name}: {value.get('value'):.3f}{interval}")
    print_style(meta, manifest.path)
    print_agreement(meta)
    out.print(f"snapshot {meta['id']} in {manifest.path}", soft_wrap=True)
    out.print(f"votes sha256           {meta['votes_sha256']}", soft_wrap=True)
    out.print(f"leaderboard.csv sha256 {manifest.files['leaderboard.csv']}", soft_wrap=True)


def print_agreement(meta: dict[str, Any]) -> None:
    """One line on the agreement section, and a warning when the board counts LLM judges' votes."""
    section = meta.get("agreement")
    if not section:
        return
    from rich.markup import escape  # labels come from imported files: no markup of theirs

    judges = escape(", ".join(j["judge"] for j in section["judges"]))
    out.print(f"agreement of humans and judges ({judges}) in agreement.csv / agreement.json")
    if section["judges_in_board"]:
        counted = escape(", ".join(section["judges_in_board"]))
        out.print(f"[yellow]note:[/yellow] this board counts LLM judges' votes: {counted}")


def print_style(meta: dict[str, Any], folder: Path) -> None:
    """The style-controlled board's covariates and the models whose rank it changes."""
    styled = meta.get("style_control")
    if not styled:
        return
    import pandas as pd

    from leaderboard.style.board import STYLE_CSV_FILE

    out.print(f"style control on {styled['n_votes']:,.0f} votes: {', '.join(styled['features'])}")
    for name, value in styled["coefficients_elo"].items():
        out.print(f"  {name}: {value['value']:.3f} Elo [{value['ci_low']:.3f}, {value['ci_high']:.3f}]")
    if styled["separating"]:
        out.print(f"  left out, they separate the votes: {', '.join(styled['separating'])}")
    if styled["n_votes_without_texts"]:
        out.print(f"  {styled['n_votes_without_texts']:,} votes without answer texts left out of this board")
    table = pd.read_csv(folder / STYLE_CSV_FILE, keep_default_na=False, dtype={"model": str})
    moved = table[table["rank_change"] != 0]
    for row in moved.head(SUMMARY_ROWS).to_dict(orient="records"):
        out.print(f"  {row['model']}: rank {row['rank']} under style control ({row['rank_change']:+d})")
