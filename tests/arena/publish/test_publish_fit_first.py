"""Publishing fits the board before the votes are read one by one when nothing read then can change it
(no clusters possible, no time buckets, not by source), so its figures are drawn while the votes are
read: the snapshot is the one the file gives, and counts read before that no longer hold are not used."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

import arena.publish.board_reads
import arena.publish.recompute
import arena.publish.slice_reads
import arena.publish.snapshots
import votes.reads.scans
from arena.cli.main import build_app
from arena.publish.board_reads import stored_components
from arena.publish.snapshots import publish_snapshot
from leaderboard import simulate_battles
from leaderboard.bt.request import FitRequest
from leaderboard.snapshot.figures import plot_files
from leaderboard.snapshot.files import DATA_FILES
from leaderboard.snapshot.folder import read_snapshot
from votes.db import make_engine
from votes.imports.files import import_file
from votes.migrate import upgrade_database
from votes.reads.filters import VoteFilter
from votes.reads.scans import votes_name_annotators

N_VOTES = 1_500
ROUNDS = 30
SEED = 4
WINNER = np.array(["model_a", "model_b", "tie", "tie (bothbad)"])


def _battles_file(tmp_path: Path, *, judges: bool) -> Path:
    """Simulated battles between 6 models as JSON lines, each naming one of 3 judges when ``judges``."""
    sim = simulate_battles(np.linspace(900, 1100, 6), N_VOTES, random_state=3, n_annotators=3)
    assert sim.annotator is not None
    rows = [
        {"model_a": sim.models[a], "model_b": sim.models[b], "winner": str(w)}
        | ({"judge": f"j{j}"} if judges else {})
        for a, b, w, j in zip(sim.model_a, sim.model_b, WINNER[sim.outcome], sim.annotator, strict=True)
    ]
    path = tmp_path / "battles.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _store(db_url: str, battles: Path) -> Engine:
    upgrade_database(db_url)
    engine = make_engine(db_url)
    import_file(engine, battles)
    return engine


@pytest.fixture
def anonymous(db_url: str, tmp_path: Path) -> Iterator[tuple[Engine, Path]]:
    """A store of imported votes that name no annotator, and the file they came from."""
    battles = _battles_file(tmp_path, judges=False)
    engine = _store(db_url, battles)
    try:
        yield engine, battles
    finally:
        engine.dispose()


def _calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The order in which boards are fitted and votes read one by one (``fit``, ``scan``)."""
    calls: list[str] = []

    def spy(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return original(*args, **kwargs)

        return wrapped

    # the board is fitted while the votes are read (publishing) or after (recompute): the one fit_board
    for module in (arena.publish.snapshots, arena.publish.recompute):
        monkeypatch.setattr(module, "fit_board", spy("fit", module.fit_board))
    # the votes read one by one: a board's reads (arena.publish.board_reads), or every board's at once
    # (arena.publish.slice_reads), scan them through load_battles
    scan = spy("scan", votes.reads.scans.load_battles)
    monkeypatch.setattr(arena.publish.board_reads, "load_battles", scan)
    monkeypatch.setattr(arena.publish.slice_reads, "load_battles", scan)
    return calls


def _files(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in (*DATA_FILES, *plot_files())}


def test_board_fitted_before_the_scan_is_the_file_board(
    anonymous: tuple[Engine, Path], db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, battles = anonymous
    with engine.connect() as conn:
        assert not votes_name_annotators(conn)
    calls = _calls(monkeypatch)
    fit = ["--bootstrap", str(ROUNDS), "--seed", str(SEED)]
    published = CliRunner().invoke(
        build_app(),
        ["publish", "--database-url", db_url, "--snapshot-dir", str(tmp_path / "snap"), *fit],
    )
    assert published.exit_code == 0, published.output
    # fitted once, on the database's counts, before the votes were read one by one
    assert calls == ["fit", "scan"]
    (folder,) = (tmp_path / "snap").iterdir()
    offline = tmp_path / "offline"
    recomputed = CliRunner().invoke(
        build_app(), ["recompute", "--from", str(battles), *fit, "--out", str(offline)]
    )
    assert recomputed.exit_code == 0, recomputed.output
    assert _files(folder) == _files(offline)
    meta = read_snapshot(folder).metadata
    assert meta["n_votes"] == N_VOTES
    assert meta["clustering"]["used"] == "none"


def test_votes_naming_annotators_are_read_before_the_fit(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``auto`` may cluster votes that name annotators: the board waits for the votes one by one."""
    engine = _store(db_url, _battles_file(tmp_path, judges=True))
    try:
        with engine.connect() as conn:
            assert votes_name_annotators(conn)
        calls = _calls(monkeypatch)
        publish_snapshot(
            engine, snapshot_dir=tmp_path / "auto", request=FitRequest(n_rounds=ROUNDS), plots=False
        )
        assert calls == ["scan", "fit"]
        calls.clear()
        publish_snapshot(
            engine,
            snapshot_dir=tmp_path / "none",
            request=FitRequest(n_rounds=ROUNDS, cluster="none"),
            plots=False,
        )
        assert calls == ["fit", "scan"]
    finally:
        engine.dispose()


def test_counts_that_no_longer_hold_are_refitted(anonymous: tuple[Engine, Path], tmp_path: Path) -> None:
    """Counts read before (the components check) that the votes read do not give (votes came in since:
    here, the counts of fewer models) are fitted early and then dropped, figures and all."""
    engine, _ = anonymous
    request = FitRequest(n_rounds=ROUNDS, random_state=SEED)
    _, counts = stored_components(engine, VoteFilter(exclude_flagged=True))
    _, fewer = stored_components(engine, VoteFilter(exclude_flagged=True, models=counts.models[:4]))
    assert not fewer.same_as(counts)
    plain = publish_snapshot(engine, snapshot_dir=tmp_path / "plain", request=request)
    reused = publish_snapshot(engine, snapshot_dir=tmp_path / "reused", request=request, counted=counts)
    stale = publish_snapshot(engine, snapshot_dir=tmp_path / "stale", request=request, counted=fewer)
    for row in (reused, stale):
        assert _files(Path(row.path)) == _files(Path(plain.path))
        assert row.n_votes == N_VOTES
    # nothing but the snapshot is left in the folder (no staging folder of the dropped board)
    assert [p.name for p in (tmp_path / "stale").iterdir()] == [Path(stale.path).name]
