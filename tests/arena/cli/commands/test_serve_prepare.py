"""`arena serve --demo` on an empty database: schema, demo data and its first published boards."""

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
            # every board `arena publish` makes: the overall one, and those categories and languages
            # with enough votes among models with enough votes there
            boards = {s.slice: s for s in snapshots}
            assert boards["all"].n_votes == 300
            assert all(s.n_votes < 300 for name, s in boards.items() if name != "all")
            assert "language=en" in boards
            assert (Path(boards["all"].path) / "leaderboard.csv").is_file()
        # A second start leaves a non-empty database alone: no new data, no new snapshot.
        again = prepare_database(url, demo=True, demo_votes=300, seed=2, snapshot_dir=str(tmp_path / "snaps"))
        assert "not loaded" in again
        with Session(engine) as session:
            assert len(session.exec(select(Snapshot)).all()) == len(boards)
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
