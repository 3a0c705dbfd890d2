"""`arena backup` and `arena restore`: the operator's copy of the store, checked against its manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from arena.cli.options import DatabaseUrlOption, examples, settings_for
from votes.reads.backup import BackupError, Manifest, backup_database, restore_backup, verify_backup

__all__ = ["backup", "register", "restore"]


def _describe(manifest: Manifest) -> str:
    votes = manifest.row_counts.get("vote", 0)
    return (
        f"{manifest.backend} backup of {votes} votes, schema {manifest.schema_revision}, "
        f"Arena {manifest.arena_version}, votes sha256 {manifest.votes_sha256[:16]}"
    )


def backup(
    folder: Annotated[
        Path, typer.Argument(help="New (or empty) folder for the backup; with --verify, a backup.")
    ],
    database_url: DatabaseUrlOption = None,
    verify: Annotated[
        bool, typer.Option("--verify", help="Check the backup in FOLDER against its manifest instead.")
    ] = False,
) -> None:
    """Back up the store while it serves (SQLite online backup or pg_dump), with a manifest; or verify one."""
    try:
        if verify:
            manifest = verify_backup(folder)
            typer.echo(f"ok: {_describe(manifest)}")
            return
        manifest = backup_database(settings_for(database_url).database_url, folder)
    except BackupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"wrote {folder}: {_describe(manifest)}")


def restore(
    folder: Annotated[Path, typer.Argument(help="A folder written by `arena backup`.")],
    database_url: DatabaseUrlOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace the content of a database that is not empty.")
    ] = False,
) -> None:
    """Restore a backup into the database named by --database-url and check it against the manifest."""
    try:
        manifest = restore_backup(folder, settings_for(database_url).database_url, force=force)
    except BackupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"restored and checked: {_describe(manifest)}")


def register(app: typer.Typer) -> None:
    app.command(
        "backup",
        epilog=examples(
            "arena backup /backups/arena-20260101T0300Z",
            "arena backup --verify /backups/arena-20260101T0300Z",
        ),
    )(backup)
    app.command(
        "restore",
        epilog=examples("arena restore /backups/arena-20260101T0300Z --database-url sqlite:///new.db"),
    )(restore)
