"""Publishing from the database, and recomputing offline from an export, give the same snapshot files.

Also: the command line's recompute is byte-stable, published folders are read-only, and
`arena snapshots list|show|diff` read what was published (on SQLite and PostgreSQL).
"""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session
from typer.testing import CliRunner

from arena.cli.main import build_app
from arena.publish.recompute import SliceSpec
from arena.publish.snapshots import publish_slices, publish_snapshot
from leaderboard.bt.request import FitRequest
from leaderboard.snapshot.figures import plot_files
from leaderboard.snapshot.files import DATA_FILES, METADATA_FILE
from leaderboard.snapshot.folder import read_snapshot
from tests.real_data import VICUNA_JUDGES
from votes.db import make_engine
from votes.imports.demo import load_demo
from votes.migrate import upgrade_database
from votes.reads.exports import export_votes
from votes.reads.snapshots import list_snapshots

N_VOTES = 600
ROUNDS = 40
SEED = 5


@pytest.fixture
def demo_engine(db_url: str) -> Iterator[Engine]:
    """A store migrated with Alembic (so the snapshot triggers come from the migration) with demo votes."""
    upgrade_database(db_url)
    engine = make_engine(db_url)
    load_demo(engine, n_votes=N_VOTES, seed=1)
    try:
        yield engine
    finally:
        engine.dispose()


def test_export_then_recompute_equals_publish(demo_engine: Engine, db_url: str, tmp_path: Path) -> None:
    row = publish_snapshot(
        demo_engine,
        snapshot_dir=tmp_path / "published",
        request=FitRequest(n_rounds=ROUNDS, random_state=SEED),
    )
    export = tmp_path / "votes.jsonl"
    assert export_votes(demo_engine, export) == N_VOTES
    out = tmp_path / "offline"
    result = CliRunner().invoke(
        build_app(),
        [
            "recompute",
            "--from",
            str(export),
            "--bootstrap",
            str(ROUNDS),
            "--seed",
            str(SEED),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    published = Path(row.path)
    for name in (*DATA_FILES, *plot_files()):
        assert (published / name).read_bytes() == (out / name).read_bytes(), name
    offline_meta = json.loads((out / METADATA_FILE).read_text())
    assert offline_meta["n_votes"] == row.n_votes == N_VOTES
    assert {k: row.files[k] for k in DATA_FILES} == {k: offline_meta["files"][k] for k in DATA_FILES}
    # The recorded votes sha256 is sha256sum of the ledger, itself a battles file recompute reads to the
    # same board and the same digest.
    ledger = tmp_path / "ledger.csv"
    exported = CliRunner().invoke(
        build_app(), ["export", "ledger", "--out", str(ledger), "--database-url", db_url]
    )
    assert exported.exit_code == 0, exported.output
    assert hashlib.sha256(ledger.read_bytes()).hexdigest() == row.votes_sha256
    assert row.votes_sha256 in exported.output
    published_meta = json.loads((Path(row.path) / METADATA_FILE).read_text())
    assert published_meta["votes_hash"] == "ledger" and offline_meta["votes_hash"] == "file"
    again = tmp_path / "from-ledger"
    result = CliRunner().invoke(
        build_app(),
        [
            "recompute",
            "--from",
            str(ledger),
            "--bootstrap",
            str(ROUNDS),
            "--seed",
            str(SEED),
            "--out",
            str(again),
        ],
    )
    assert result.exit_code == 0, result.output
    for name in DATA_FILES:
        assert (published / name).read_bytes() == (again / name).read_bytes(), name
    assert json.loads((again / METADATA_FILE).read_text())["votes_sha256"] == row.votes_sha256


def test_published_folder_is_read_only_and_listed(demo_engine: Engine, tmp_path: Path) -> None:
    rows = publish_slices(
        demo_engine,
        snapshot_dir=tmp_path,
        request=FitRequest(n_rounds=10, random_state=SEED),
        slices=[SliceSpec(), SliceSpec(language="en")],
        plots=False,
    )
    assert [r.slice for r in rows] == ["all", "language=en"]
    assert rows[1].n_votes < rows[0].n_votes
    for row in rows:
        folder = Path(row.path)
        assert not folder.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
        for path in folder.iterdir():
            assert not path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), path
        read_snapshot(folder)  # every file matches its sha256
    with Session(demo_engine) as session:
        assert {s.id for s in list_snapshots(session=session)} == {r.id for r in rows}


def test_snapshots_commands(demo_engine: Engine, tmp_path: Path) -> None:
    first = publish_snapshot(
        demo_engine, snapshot_dir=tmp_path, request=FitRequest(n_rounds=10, random_state=1)
    )
    second = publish_snapshot(
        demo_engine,
        snapshot_dir=tmp_path,
        request=FitRequest(n_rounds=10, random_state=1, level=0.9),
        plots=False,
    )
    url = demo_engine.url.render_as_string(hide_password=False)
    runner = CliRunner()
    listed = runner.invoke(build_app(), ["snapshots", "list", "--json", "--database-url", url])
    assert listed.exit_code == 0, listed.output
    assert [m["id"] for m in json.loads(listed.output)] == [second.id, first.id]
    shown = runner.invoke(build_app(), ["snapshots", "show", first.id, "--database-url", url])
    assert shown.exit_code == 0, shown.output
    assert first.files["leaderboard.csv"] in shown.output
    diff = runner.invoke(
        build_app(), ["snapshots", "diff", first.id, second.id, "--json", "--database-url", url]
    )
    assert diff.exit_code == 0, diff.output
    payload = json.loads(diff.output)
    assert payload["votes_changed"] is False and payload["method_changed"] is True
    assert payload["added"] == [] and payload["dropped"] == []
    missing = runner.invoke(build_app(), ["snapshots", "show", "nope", "--database-url", url])
    assert missing.exit_code != 0


def test_recompute_twice_is_byte_identical(tmp_path: Path) -> None:
    source = VICUNA_JUDGES
    runner = CliRunner()
    for name in ("one", "two"):
        result = runner.invoke(
            build_app(),
            [
                "recompute",
                "--from",
                str(source),
                "--bootstrap",
                "100",
                "--seed",
                "1",
                "--out",
                str(tmp_path / name),
            ],
        )
        assert result.exit_code == 0, result.output
        assert "gpt4" in result.output
    for name in DATA_FILES:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    bad = runner.invoke(
        build_app(), ["recompute", "--from", str(source), "--anchor", "gpt4", "--out", str(tmp_path)]
    )
    assert bad.exit_code != 0


def test_migrated_store_refuses_changes(demo_engine: Engine, tmp_path: Path) -> None:
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    publish_snapshot(demo_engine, snapshot_dir=tmp_path, request=FitRequest(n_rounds=0), plots=False)
    for statement in ("UPDATE snapshot SET n_votes = 1", "DELETE FROM snapshot"):
        with pytest.raises(DBAPIError, match="immutable"), demo_engine.begin() as conn:
            conn.execute(text(statement))


def test_extended_method_writes_parameters_fitted(tmp_path: Path) -> None:
    source = VICUNA_JUDGES
    args = ["recompute", "--from", str(source), "--method", "bt-position", "--bootstrap", "20"]
    result = CliRunner().invoke(build_app(), [*args, "--seed", "2", "--no-plots", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / METADATA_FILE).read_text())
    assert meta["method"] == "bt-position"
    advantage = meta["parameters_fitted"]["position_advantage_elo"]
    # LLM judges favour the answer shown first: the left-side advantage is clearly positive.
    assert 0 < advantage["ci_low"] <= advantage["value"] <= advantage["ci_high"]


def test_bt_with_options_stays_bt(tmp_path: Path) -> None:
    """bt takes the model options itself: no silent switch to another method name."""
    source = VICUNA_JUDGES
    args = ["recompute", "--from", str(source), "--method", "bt", "--prior", "100", "--bootstrap", "10"]
    result = CliRunner().invoke(build_app(), [*args, "--seed", "2", "--no-plots", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / METADATA_FILE).read_text())
    assert meta["method"] == "bt"
    assert meta["parameters"]["prior"] == 100.0 and meta["parameters"]["optimiser_iterations"] > 0


def test_publish_leaves_out_flagged_annotators_by_default(demo_engine: Engine, tmp_path: Path) -> None:
    """Issue 8: a flagged annotator's votes stay out of a published fit unless asked for."""
    from sqlalchemy import func
    from sqlmodel import select

    from votes.models import Annotator, Battle, Vote
    from votes.voting.annotators import flag_annotator

    with Session(demo_engine) as session:
        target = session.exec(select(Annotator).order_by(Annotator.id)).first()  # type: ignore[arg-type]
        assert target is not None and target.id is not None
        flagged_votes = session.exec(
            select(func.count()).select_from(Vote).join(Battle).where(Battle.annotator_id == target.id)
        ).one()
        assert flagged_votes > 0
        assert flag_annotator(session=session, annotator_id=target.id, reason="test")
        session.commit()
    default = publish_snapshot(
        demo_engine, snapshot_dir=tmp_path / "a", request=FitRequest(n_rounds=0, interval="none"), plots=False
    )
    everyone = publish_snapshot(
        demo_engine,
        snapshot_dir=tmp_path / "b",
        request=FitRequest(n_rounds=0, interval="none"),
        exclude_flagged=False,
        plots=False,
    )
    assert default.n_votes == N_VOTES - flagged_votes
    assert everyone.n_votes == N_VOTES
    assert default.votes_sha256 != everyone.votes_sha256
