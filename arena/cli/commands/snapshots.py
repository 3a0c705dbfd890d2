"""`arena snapshots list|show|diff`: reading the published leaderboard snapshots (nothing is written).

Each command opens the store, reads rows and files through :mod:`votes.reads.snapshots` and
:mod:`leaderboard.snapshot.folder`, and prints a table (or JSON with ``--json``). The store's modules are
imported at the top; the snapshot folders' reader (pandas) only by ``show`` and ``diff``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.table import Table
from sqlmodel import Session

from arena.cli.commands.board_output import out, summary_table
from arena.cli.options import DatabaseUrlOption, examples, settings_for
from arena.cli.store import open_store
from votes.reads.snapshots import AmbiguousSnapshotError, find_snapshot, list_snapshots, snapshot_manifest

__all__ = ["register", "snapshots_app"]

snapshots_app = typer.Typer(
    help="Published snapshots: list, show, diff (read only).",
    epilog=examples("arena snapshots list", "arena snapshots diff 3f2a9c 8b41d0"),
    no_args_is_help=True,
)


@contextmanager
def _session(database_url: str | None) -> Iterator[Session]:
    engine = open_store(settings_for(database_url))
    try:
        with Session(engine) as session:
            yield session
    finally:
        engine.dispose()


def _find(session: Session, given: str) -> Any:
    """The snapshot with this id or unique id prefix; a usage error otherwise."""
    try:
        row = find_snapshot(session=session, prefix=given)
    except AmbiguousSnapshotError as exc:
        raise typer.BadParameter(str(exc)) from None
    if row is None:
        raise typer.BadParameter(f"no snapshot {given!r}")
    return row


@snapshots_app.command(
    "list", epilog=examples("arena snapshots list", "arena snapshots list --slice language=de --json")
)
def snapshots_list(
    database_url: DatabaseUrlOption = None,
    slice_: Annotated[str | None, typer.Option("--slice", help="all, category=..., language=...")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Manifests as JSON.")] = False,
) -> None:
    """Published snapshots, newest first, with their manifests."""
    with _session(database_url) as session:
        rows = list_snapshots(session=session, slice=slice_)
        manifests = [snapshot_manifest(row) for row in rows]
    if as_json:
        out.print_json(json.dumps(manifests))
        return
    table = Table(title=f"{len(rows)} published snapshots", title_justify="left")
    # ids and numbers are never cut; the slice (a free-form name) wraps instead
    for column in ("id", "created", "slice", "method", "votes"):
        wraps = column == "slice"
        table.add_column(
            column, no_wrap=not wraps, overflow="fold", justify="right" if column == "votes" else "left"
        )
    for m in manifests:
        table.add_row(m["id"], m["created_at"][:19], m["slice"], m["method"], f"{int(m['n_votes']):,}")
    out.print(table)
    for m in manifests:  # digests in full, one per line, for copying and checking
        out.print(f"{m['id']}  votes sha256 {m['votes_sha256']}", soft_wrap=True)


@snapshots_app.command("show", epilog=examples("arena snapshots show 3f2a9c"))
def snapshots_show(
    snapshot_id: Annotated[str, typer.Argument(help="Snapshot id, or the start of one that is unique.")],
    database_url: DatabaseUrlOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Metadata as JSON.")] = False,
) -> None:
    """One snapshot: its metadata, file sha256s (checked against the files) and the board."""
    from leaderboard.snapshot.folder import read_snapshot  # pandas: `snapshots list` reads no folder

    with _session(database_url) as session:
        row = _find(session, snapshot_id)
        manifest = snapshot_manifest(row)
    data = read_snapshot(row.path)
    if as_json:
        out.print_json(json.dumps({**manifest, "metadata": data.metadata}))
        return
    out.print(summary_table(data.leaderboard, title=f"{row.id}: {row.method}, {row.slice}"))
    for name, digest in manifest["files"].items():
        out.print(f"  {digest}  {name}", soft_wrap=True)


@snapshots_app.command("diff", epilog=examples("arena snapshots diff 3f2a9c 8b41d0 --json"))
def snapshots_diff(
    a: Annotated[str, typer.Argument(help="Older snapshot id (or a unique start of one).")],
    b: Annotated[str, typer.Argument(help="Newer snapshot id (or a unique start of one).")],
    database_url: DatabaseUrlOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Rating and rank changes from A to B, new and dropped models, and whether votes or method changed."""
    from leaderboard.snapshot.folder import diff_snapshots, read_snapshot  # pandas: not for `list`

    with _session(database_url) as session:
        rows = [_find(session, x) for x in (a, b)]
    left, right = (read_snapshot(row.path) for row in rows)
    diff = diff_snapshots(left, right)
    if as_json:
        payload = {
            "a": diff.a_id,
            "b": diff.b_id,
            "added": diff.added,
            "dropped": diff.dropped,
            "votes_changed": diff.votes_changed,
            "method_changed": diff.method_changed,
            "changes": {k: list(v) for k, v in diff.changes.items()},
            "models": json.loads(diff.table.to_json(orient="records")),
        }
        out.print_json(json.dumps(payload, default=str))
        return
    out.print(f"{diff.a_id} -> {diff.b_id}")
    out.print(
        f"votes changed: {'yes' if diff.votes_changed else 'no'}; "
        f"method changed: {'yes' if diff.method_changed else 'no'}"
    )
    for key, (old, new) in diff.changes.items():
        out.print(f"  {key}: {old} -> {new}")
    table = Table()
    for column in ("model", "rating A", "rating B", "change", "rank A", "rank B", "moved"):
        is_name = column == "model"  # names wrap; numbers are never cut
        table.add_column(column, justify="left" if is_name else "right", no_wrap=not is_name, overflow="fold")
    for rec in diff.table.itertuples(index=False):
        table.add_row(
            str(rec.model),
            _fmt(rec.rating_a, "{:.1f}"),
            _fmt(rec.rating_b, "{:.1f}"),
            _fmt(rec.rating_change, "{:+.1f}"),
            _fmt(rec.rank_a, "{:.0f}"),
            _fmt(rec.rank_b, "{:.0f}"),
            _fmt(rec.rank_change, "{:+.0f}"),
        )
    out.print(table)
    if diff.added:
        out.print("new: " + ", ".join(diff.added))
    if diff.dropped:
        out.print("dropped: " + ", ".join(diff.dropped))


def _fmt(value: Any, spec: str) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "—"
    return "—" if math.isnan(number) else spec.format(number)


def register(app: typer.Typer) -> None:
    app.add_typer(snapshots_app, name="snapshots")
