"""The board on the console: the progress bar of a fit and the summary table; and the tables of the other
commands, whose values are never cut.

Shared by `arena recompute`, `arena publish` and `arena snapshots` (:mod:`arena.cli.commands.snapshots`),
so a board looks the same wherever it is printed; what a fit adds to it (its fitted parameters, the style
board, the agreement section, ``--json``) is :mod:`arena.cli.commands.runs.board_report`'s. Only rich is
imported here: `arena snapshots list` prints through it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from leaderboard.result import Leaderboard

__all__ = [
    "SUMMARY_ROWS",
    "count_text",
    "err",
    "out",
    "print_whole",
    "progress_bar",
    "summary_table",
    "whole_row",
    "whole_table",
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


def summary_table(
    board: Leaderboard, *, title: str, rows: int = SUMMARY_ROWS, provisional: Collection[str] = ()
) -> Table:
    """The top of the board, one screen high; the models in ``provisional`` (a published board's: too few
    votes, or an interval still wide) marked as the board pages mark them."""
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
            f"{board.models[i]} (provisional)" if board.models[i] in provisional else board.models[i],
            f"{board.rating[i]:.1f}",
            f"{board.ci_low[i]:.1f}-{board.ci_high[i]:.1f}",
            f"{board.rank_low[i]}-{board.rank_high[i]}",
            count_text(board.battles[i]),
            f"{board.win_rate[i]:.1%}",
        )
    if len(order) > rows:
        table.add_row("", f"... {len(order) - rows} more in leaderboard.csv", "", "", "", "", "")
    return table


def count_text(value: float) -> str:
    """A count as an integer when it is whole (summed time weights keep their decimals)."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.2f}"


#: The width a table is printed at into a pipe or a file: wide enough for any row on one line.
PIPED_WIDTH = 10_000


def whole_table(title: str, columns: Sequence[str]) -> Table:
    """A table whose values are never cut: one too wide for the terminal continues on the next line of its
    cell (a base URL keeps its port), where rich's default ends it with an ellipsis."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def whole_row(table: Table, *cells: str) -> None:
    """A row of values as they are: a name or a parameter in brackets is text, never rich markup."""
    table.add_row(*(Text(cell) for cell in cells))


def print_whole(table: Table) -> None:
    """Print a :func:`whole_table` on standard output: at the terminal's width on a terminal, and into a
    pipe or a file with every row on one line, so that grep finds any value whole."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=PIPED_WIDTH)
    console.print(table)
