"""Battles read from a file for a fit: a clear message instead of a traceback, the refused-rows report, and
the parts of the comparison graph.

What `arena recompute --from` and `arena evaluate --from` read through; no database library is imported here.
"""

from __future__ import annotations

from pathlib import Path

import typer

from arena.cli.commands.battle_files import write_report
from arena.cli.options import file_read_errors
from leaderboard.battles import Battles, split_components
from votes.files.columns import BattleRead, read_battles
from votes.files.selection import BattleFilter

__all__ = ["pick_components", "read_battle_file", "refuse_or_name_parts"]


def read_battle_file(
    path: Path,
    *,
    filters: BattleFilter,
    shape: str | None = None,
    skip_invalid: bool = False,
    report: Path | None = None,
    baseline: str | None = None,
    quiet: bool = False,
    can_skip: bool = True,
) -> BattleRead:
    """Read and select a battles file; a bad file is a one-line error naming file, row and reason
    (exit 2), and a bad row also ``--skip-invalid`` unless the command cannot skip rows here
    (``can_skip``). With ``skip_invalid`` the refused rows go to a CSV report and a summary is printed (on
    stderr; ``quiet`` prints only errors, for output that must stay machine-readable)."""
    with file_read_errors(path, can_skip=can_skip):
        read = read_battles(
            path,
            filters=filters,
            source_format=shape,
            skip_invalid=skip_invalid,
            baseline=baseline,
        )
    if not quiet:
        typer.echo(f"{path}: {read.source_format}: {read.note}", err=True)
    if skip_invalid:
        target = write_report(path, read.refused, report)
        typer.echo(f"{path}: {len(read.refused)} of {read.n_rows} rows refused, listed in {target}", err=True)
    if len(read.battles) == 0:
        typer.echo(f"error: {path}: no battles left after the filters", err=True)
        raise typer.Exit(2)
    return read


def pick_components(battles: Battles, *, largest: bool, each: bool, source: Path | str) -> list[Battles]:
    """The parts of the comparison graph to fit: all of it when connected; else the largest part or
    each part, as asked, or an error (exit 1) naming the parts. Prints what was chosen."""
    parts = split_components(battles)
    if len(parts) == 1:
        return parts
    sizes = ", ".join(f"{len(p.models)} models/{len(p)} battles" for p in parts)
    refuse_or_name_parts(source, len(parts), sizes, largest=largest, each=each)
    if largest:
        typer.echo(f"fitting the largest part: {', '.join(parts[0].models[:8])}", err=True)
        return parts[:1]
    return parts


def refuse_or_name_parts(source: Path | str, n_parts: int, sizes: str, *, largest: bool, each: bool) -> None:
    """A comparison graph of ``source`` in ``n_parts`` parts (``sizes`` describes them): an error (exit 1)
    unless ``largest`` or ``each`` asks for one or all of them; else it says so, on stderr. For a file's
    battles and the stored votes alike."""
    if not (largest or each):
        typer.echo(
            f"error: {source}: the comparison graph has {n_parts} parts never compared with each other "
            f"({sizes}); use --largest-component or --each-component",
            err=True,
        )
        raise typer.Exit(1)  # the data, not the command line, is at fault
    typer.echo(f"{source}: the comparison graph has {n_parts} parts ({sizes})", err=True)
