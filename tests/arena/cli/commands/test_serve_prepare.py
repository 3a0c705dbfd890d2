"""`arena serve --demo` on an empty database: schema, demo data and a first published board."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session, select

from arena.cli.commands.serve import prepare_database
from votes.db import make_engine
from votes.models import Model, Snapshot


def test_demo_gets_data_and_a_published_board_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/arena.db"
    said = prepare_database(url, demo=True, demo_votes=300, seed=2, snapshot_dir=str(tmp_path / "snaps"))
    assert "demo data loaded" in said and "published snapshot" in said
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            assert len(session.exec(select(Model)).all()) >= 6
            snapshots = session.exec(select(Snapshot)).all()
            assert len(snapshots) == 1
            assert snapshots[0].n_votes == 300
            assert (Path(snapshots[0].path) / "leaderboard.csv").is_file()
        # A second start leaves a non-empty database alone: no new data, no new snapshot.
        again = prepare_database(url, demo=True, demo_votes=300, seed=2, snapshot_dir=str(tmp_path / "snaps"))
        assert "not loaded" in again
        with Session(engine) as session:
            assert len(session.exec(select(Snapshot)).all()) == 1
    finally:
        engine.dispose()


def test_without_demo_only_the_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/arena.db"
    assert prepare_database(url, demo=False, demo_votes=0, seed=0) == "schema ready"
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            assert session.exec(select(Model)).all() == []
    finally:
        engine.dispose()
