"""A snapshot folder's way in: written under a staging name, and the clean-up of what crashed publishes left.

A snapshot is written under :data:`STAGING_PREFIX` and a random name, frozen, and renamed to its id only
once complete (:func:`arena.publish.snapshots.publish_snapshot`); its row is recorded after. A publish that
dies on the way leaves a staging folder, or an id-named folder without a row: :func:`reconcile_snapshot_dir`
removes them (after a grace, as they may belong to a publish running now), :func:`remove_tree` any folder
that never became a snapshot, frozen or not.
"""

from __future__ import annotations

import logging
import re
import shutil
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sqlmodel import Session, select

from votes.db import read_only
from votes.models import Snapshot

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = [
    "SNAPSHOT_ID",
    "STAGING_GRACE_SECONDS",
    "STAGING_PREFIX",
    "UNRECORDED_GRACE_SECONDS",
    "reconcile_snapshot_dir",
    "remove_tree",
]

log = logging.getLogger(__name__)

#: Folder name prefix of a snapshot being written (renamed to its id once complete and frozen).
STAGING_PREFIX = ".staging-"
#: A staging folder this recent may be a publish running now: left alone by the clean-up.
STAGING_GRACE_SECONDS = 6 * 3600.0
#: What a snapshot id looks like (:func:`leaderboard.snapshot.folder.make_snapshot_id`).
SNAPSHOT_ID = re.compile(r"\d{8}T\d{6}Z-[a-z0-9-]+-[0-9a-f]{10}")
#: An id-named folder without a row this recent may be a publish between its rename and its insert.
UNRECORDED_GRACE_SECONDS = 600.0


def reconcile_snapshot_dir(engine: Engine, root: Path) -> list[Path]:
    """Remove what earlier publishes left behind when they crashed, each with a log line.

    Two kinds of leftover: a staging folder (a publish that died before its rename) and a folder named
    like a snapshot id with no row (one that died between the rename and the insert). A folder with a
    row is published and left alone; so is anything else in the folder. A leftover younger than its
    grace (:data:`STAGING_GRACE_SECONDS`, :data:`UNRECORDED_GRACE_SECONDS`) may belong to a publish
    running now and is kept.
    """
    with Session(read_only(engine)) as session:
        known = {str(r) for r in session.exec(select(Snapshot.id)).all()}
    now = time.time()
    removed: list[Path] = []
    for child in sorted(root.iterdir()):
        if not child.is_dir() or child.is_symlink():
            continue
        age = now - child.stat().st_mtime
        if child.name.startswith(STAGING_PREFIX) and age >= STAGING_GRACE_SECONDS:
            what = "an unfinished publish"
        elif (
            SNAPSHOT_ID.fullmatch(child.name) and child.name not in known and age >= UNRECORDED_GRACE_SECONDS
        ):
            what = "a publish that stopped before recording its row"
        else:
            continue
        remove_tree(child)
        log.warning("removed %s left by %s", child, what)
        removed.append(child)
    return removed


def remove_tree(path: Path) -> None:
    """Remove a (possibly frozen) folder that never became a published snapshot."""
    if not path.exists():
        return
    path.chmod(stat.S_IRWXU)
    for child in path.iterdir():
        if not child.is_symlink():
            child.chmod(stat.S_IRWXU if child.is_dir() else stat.S_IRUSR | stat.S_IWUSR)
    shutil.rmtree(path)
