"""`arena publish` makes every board by default, from one read of the votes: the overall board and one per
category and language, named for people, each the board a read of its own filter gives, byte for byte.

A model with one tied vote is left off its category's board (with a note), marked provisional on the
overall board, and never given the interval or rank range of the model it tied with; a category with too
few votes is listed, not silently missing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from arena.cli.main import build_app
from arena.publish.recompute import SliceSpec
from arena.publish.snapshots import publish_slices, publish_snapshot
from leaderboard.bt.request import FitRequest
from leaderboard.snapshot.files import DATA_FILES, METADATA_FILE
from leaderboard.snapshot.folder import read_snapshot
from leaderboard.snapshot.titles import left_off_note, slice_title, unpublished_note
from votes.db import make_engine
from votes.files.battle_rows import BattleRecord
from votes.imports.demo import load_demo
from votes.imports.runs import import_battle_records
from votes.migrate import upgrade_database

N_VOTES = 600
REQUEST = FitRequest(n_rounds=30, random_state=3)
#: Reasoning has 4 of the demo's 44 prompts (about 55 of 600 votes): under this, every other board over it.
MIN_VOTES = 80
NEWBIE, TIED_WITH = "newbie-1b", "basalt-34b"


@pytest.fixture
def store(db_url: str) -> Iterator[Engine]:
    """The demo's votes and one more: a new model's only vote, a tie with basalt-34b on a coding prompt."""
    upgrade_database(db_url)
    engine = make_engine(db_url)
    load_demo(engine, n_votes=N_VOTES, seed=1)
    tie = BattleRecord(
        where="a new model's first vote",
        model_a=NEWBIE,
        model_b=TIED_WITH,
        winner="tie",
        question_id="demo-code-1",
        judge="demo-annotator-01",
        anony=True,
        language="en",
        tstamp=1.74e9,
    )
    with engine.begin() as conn:
        import_battle_records(conn, [tie], file="<one tie>")
    try:
        yield engine
    finally:
        engine.dispose()


def _data(path: str) -> dict[str, bytes]:
    return {name: (Path(path) / name).read_bytes() for name in DATA_FILES}


def test_every_board_from_one_read_is_the_board_of_its_own_read(store: Engine, tmp_path: Path) -> None:
    rows = publish_slices(store, snapshot_dir=tmp_path / "all", request=REQUEST, min_votes=MIN_VOTES)
    slices = [r.slice for r in rows]
    assert slices == [
        "all",
        "category=coding",
        "category=knowledge",
        "category=math",
        "category=writing",
        "language=de",
        "language=en",
    ]
    assert [slice_title(s) for s in slices] == [
        "Overall", "Coding", "Knowledge", "Math", "Writing", "German", "English",
    ]  # fmt: skip
    overall = read_snapshot(rows[0].path)
    # the category with too few votes is listed on the overall board, with its votes
    found = {s["slice"]: s for s in overall.metadata["slice_boards"]["slices"]}
    assert found["category=reasoning"]["published"] is False
    assert 0 < found["category=reasoning"]["votes"] < MIN_VOTES
    note = unpublished_note(overall.metadata)
    assert note is not None and "Reasoning (" in note and f"fewer than {MIN_VOTES} votes" in note
    # each board is what a publish of its own filter gives: the same data files and votes hash
    for row in rows[1:]:
        data = read_snapshot(row.path)
        alone = publish_snapshot(
            store,
            snapshot_dir=tmp_path / "alone",
            request=REQUEST,
            category=data.metadata["category"],
            language=data.metadata["language"],
        )
        assert _data(alone.path) == _data(row.path), row.slice
        assert alone.votes_sha256 == row.votes_sha256, row.slice
        again = json.loads((Path(alone.path) / METADATA_FILE).read_text())
        assert again["left_off"] == data.metadata["left_off"]
        assert again["filters"] == data.metadata["filters"]
        assert "figures" not in data.metadata and not any(n.endswith(".png") for n in data.metadata["files"])
    alone_overall = publish_snapshot(store, snapshot_dir=tmp_path / "alone", request=REQUEST)
    assert _data(alone_overall.path) == _data(rows[0].path)
    assert alone_overall.votes_sha256 == rows[0].votes_sha256


def test_a_model_with_one_tie_is_left_off_its_category_and_provisional_overall(
    store: Engine, tmp_path: Path
) -> None:
    rows = publish_slices(
        store,
        snapshot_dir=tmp_path,
        request=REQUEST,
        slices=[SliceSpec(), SliceSpec(category="coding")],
        plots=False,
    )
    coding = read_snapshot(rows[1].path)
    assert NEWBIE not in coding.leaderboard.models
    assert coding.metadata["left_off"] == {"min_model_votes": 20, "models": [{"model": NEWBIE, "votes": 1}]}
    assert coding.metadata["filters"]["exclude_models"] == [NEWBIE]  # its vote is not in the board either
    assert left_off_note(coding.metadata) == (
        f"Left off this board, with fewer than 20 votes on it: {NEWBIE} (1 vote)."
    )
    overall = read_snapshot(rows[0].path)
    table = overall.table.set_index("model")
    new, tied = table.loc[NEWBIE], table.loc[TIED_WITH]
    assert NEWBIE in overall.metadata["precision"]["provisional"]
    assert overall.metadata["parameters"]["few_votes"]["models"] == [NEWBIE]
    # A tie says "as good as": the point estimate is its opponent's. The rest is not: one vote cannot
    # measure a model, and its interval and rank range say so instead of repeating the opponent's.
    assert new["ci_high"] - new["ci_low"] > 10 * (tied["ci_high"] - tied["ci_low"])
    assert (new["ci_low"], new["ci_high"]) != (tied["ci_low"], tied["ci_high"])
    assert (new["rank_low"], new["rank_high"]) == (1, len(table))
    for model in table.index.drop(NEWBIE):  # every other model keeps its own numbers
        assert table.loc[model, "ci_high"] - table.loc[model, "ci_low"] < 200


def test_publishing_every_board_twice_gives_the_same_bytes(store: Engine, tmp_path: Path) -> None:
    first = publish_slices(store, snapshot_dir=tmp_path / "a", request=REQUEST, plots=False)
    second = publish_slices(store, snapshot_dir=tmp_path / "b", request=REQUEST, plots=False)
    assert [r.slice for r in first] == [r.slice for r in second]
    for a, b in zip(first, second, strict=True):
        assert _data(a.path) == _data(b.path), a.slice


def test_the_command_publishes_every_board_unless_told_not_to(
    store: Engine, db_url: str, tmp_path: Path
) -> None:
    app = build_app()
    common = ["--database-url", db_url, "--bootstrap", "10", "--min-votes", str(MIN_VOTES)]
    result = CliRunner().invoke(app, ["publish", *common, "--snapshot-dir", str(tmp_path / "every")])
    assert result.exit_code == 0, result.output
    assert "(Coding)" in result.output and "(German)" in result.output and "(Overall)" in result.output
    assert "category=coding)" not in result.output
    assert f"Left off this board, with fewer than 20 votes on it: {NEWBIE} (1 vote)." in result.output
    assert "No board yet" in result.output and "Reasoning" in result.output
    assert "(provisional)" in result.output  # the one-vote model, on the overall board
    assert len(list((tmp_path / "every").iterdir())) == 7
    alone = CliRunner().invoke(
        app, ["publish", *common, "--no-slices", "--snapshot-dir", str(tmp_path / "one")]
    )
    assert alone.exit_code == 0, alone.output
    assert [p.name.split("-")[1] for p in (tmp_path / "one").iterdir()] == ["all"]
    old = CliRunner().invoke(
        app, ["publish", *common, "--all-slices", "--snapshot-dir", str(tmp_path / "old")]
    )
    assert old.exit_code == 0, old.output
    assert "--all-slices is the default now" in old.output
    assert len(list((tmp_path / "old").iterdir())) == 7
    filtered = CliRunner().invoke(
        app, ["publish", *common, "--category", "coding", "--snapshot-dir", str(tmp_path / "coding")]
    )
    assert filtered.exit_code == 0, filtered.output
    assert [p.name.split("-")[1:3] for p in (tmp_path / "coding").iterdir()] == [["category", "coding"]]
