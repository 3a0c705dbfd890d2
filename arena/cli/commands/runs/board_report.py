"""A fitted board on the console: the summary with its fitted parameters, the style-controlled board, the
agreement section, and what ``--json`` prints.

`arena recompute` and `arena publish` print through these functions once they have fitted, so the style
board's table (pandas) and the snapshot's rows are read with the libraries the fit has loaded already.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from rich.markup import escape  # labels come from imported files: no markup of theirs

from arena.cli.commands.board_output import SUMMARY_ROWS, count_text, out, summary_table
from leaderboard.snapshot.files import leaderboard_table
from leaderboard.style.board import STYLE_CSV_FILE

if TYPE_CHECKING:
    from leaderboard.result import Leaderboard
    from leaderboard.snapshot.folder import SnapshotManifest

__all__ = ["board_json", "interval_text", "print_agreement", "print_result", "print_style"]


def board_json(board: Leaderboard, manifest_path: Path, metadata: dict[str, Any]) -> str:
    """What --json prints for a fitted board: the snapshot's metadata, folder and rows, best first."""
    rows = json.loads(leaderboard_table(board).to_json(orient="records"))
    return json.dumps({"path": str(manifest_path), "metadata": metadata, "models": rows}, default=str)


def print_result(board: Leaderboard, manifest: SnapshotManifest, *, seconds: float, source: str) -> None:
    meta = manifest.metadata
    title = (
        f"{meta['method']} on {count_text(meta['n_votes'])} votes from {source} "
        f"({len(board.models)} models, {meta['slice']}, seed {meta['seed']}, {seconds:.1f} s)"
    )
    out.print(summary_table(board, title=title))
    intervals = interval_text(meta)
    if intervals:
        out.print(intervals, soft_wrap=True)
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


def interval_text(meta: dict[str, Any]) -> str | None:
    """One line on what the intervals are (level, method, unit, marginal), which says too whether
    ``--cluster auto`` treated the votes as independent; None for metadata without ``intervals``."""
    described = meta.get("intervals")
    if not isinstance(described, dict):
        return None
    rounds = f", {described['rounds']} rounds" if described.get("rounds") else ""
    return (
        f"intervals: {described['level']:.0%} {described['method']}{rounds}, over "
        f"{escape(str(described['unit']))}; marginal, each model's alone"
    )


def print_agreement(meta: dict[str, Any]) -> None:
    """One line on the agreement section, and a warning when the board counts LLM judges' votes."""
    section = meta.get("agreement")
    if not section:
        return
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
