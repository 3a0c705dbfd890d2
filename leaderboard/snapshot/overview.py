"""The category overview: every model's rank in every published board (overall, per category, per
language) side by side, with its rank interval and rating interval, as the public arena's default view.

Pure pandas on the boards' tables (``leaderboard.csv`` of each latest snapshot); the web page and the
CSV download both come from :func:`category_overview`.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from leaderboard.spreadsheet import escape_frame

__all__ = ["OVERVIEW_COLUMNS", "category_overview", "overview_csv"]

#: Columns of the long table: one row per (model, board).
OVERVIEW_COLUMNS: tuple[str, ...] = (
    "model", "board", "snapshot", "rank", "rank_low", "rank_high", "rating", "ci_low", "ci_high", "battles",
)  # fmt: skip


def category_overview(boards: Mapping[str, tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """One row per model and board, models in the order of the overall board (``all``), then by name.

    Parameters
    ----------
    boards : mapping
        Board name (``all``, ``category=coding``, ...) to (snapshot id, its leaderboard table).

    Returns
    -------
    pandas.DataFrame
        With the columns of :data:`OVERVIEW_COLUMNS`; a model absent from a board has no row for it.
    """
    parts = []
    for name, (snapshot, table) in boards.items():
        part = table[
            ["model", "rank", "rank_low", "rank_high", "rating", "ci_low", "ci_high", "battles"]
        ].copy()
        part.insert(1, "board", name)
        part.insert(2, "snapshot", snapshot)
        parts.append(part)
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in OVERVIEW_COLUMNS})
    long = pd.concat(parts, ignore_index=True)
    overall = boards.get("all")
    order = {m: k for k, m in enumerate(overall[1]["model"])} if overall is not None else {}
    long["_order"] = [order.get(m, len(order)) for m in long["model"]]
    board_order = {b: k for k, b in enumerate(sorted(boards, key=lambda b: (b != "all", b)))}
    long["_board"] = [board_order[b] for b in long["board"]]
    long = long.sort_values(["_order", "model", "_board"], kind="stable").drop(columns=["_order", "_board"])
    return long.reset_index(drop=True)[list(OVERVIEW_COLUMNS)]


def overview_csv(overview: pd.DataFrame) -> bytes:
    """The overview as CSV (UTF-8, ``\\n`` line ends), integers as integers."""
    return escape_frame(overview).to_csv(index=False, lineterminator="\n").encode("utf-8")
