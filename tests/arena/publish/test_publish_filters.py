"""`arena publish` and `arena recompute` on the database with the filters a battles file has, on both
backends: the anonymous largest arena as the public method fits it, one snapshot per part of the graph,
and every filter selecting the votes the same filter selects in the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from arena.cli.main import build_app
from tests.arena.cli.commands.test_cli_battle_files import (
    PUBLIC_TOL_ELO,
    _fastchat_rows,
    _public_mle_elo,
    _ratings,
)
from votes.db import make_engine
from votes.imports.files import import_file
from votes.migrate import upgrade_database

FIT = ["--bootstrap", "0", "--interval", "none"]


def _stored(db_url: str, tmp_path: Path) -> tuple[list[dict[str, Any]], Path]:
    """The FastChat-style file (named votes, a self-battle, two arenas) imported, its self-battle refused."""
    rows = _fastchat_rows()
    path = tmp_path / "clean_battle.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    upgrade_database(db_url)
    engine = make_engine(db_url)
    try:
        report = import_file(engine, path, skip_invalid=True)
    finally:
        engine.dispose()
    assert [r.where for r in report.refused] == ["item 6"]
    return rows, path


def _published(output: str, snapshots: Path) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(snapshots.glob("*/metadata.json"))]
    assert found, output
    return found


def test_publish_anonymous_largest_arena_matches_the_public_method(db_url: str, tmp_path: Path) -> None:
    rows, _ = _stored(db_url, tmp_path)
    runner = CliRunner()
    base = ["publish", "--database-url", db_url, *FIT]
    split = runner.invoke(build_app(), [*base, "--snapshot-dir", str(tmp_path / "none"), "--anony-only"])
    assert split.exit_code == 1
    assert "2 parts never compared" in split.output and "--largest-component" in split.output
    snapshots = tmp_path / "snapshots"
    result = runner.invoke(
        build_app(), [*base, "--snapshot-dir", str(snapshots), "--anony-only", "--largest-component"]
    )
    assert result.exit_code == 0, result.output
    (meta,) = _published(result.output, snapshots)
    assert meta["filters"]["anony_only"] is True and meta["filters"]["component"] == 1
    (folder,) = (p.parent for p in snapshots.glob("*/metadata.json"))
    ours = _ratings(folder)
    frame = pd.DataFrame(rows)
    anonymous = frame[(frame.anony == True) & frame.model_a.str.startswith("a")]  # noqa: E712
    public = _public_mle_elo(anonymous)
    assert set(ours) == set(public) == {"a1", "a2", "a3", "a4"}
    for model, rating in public.items():
        assert abs(ours[model] - rating) < PUBLIC_TOL_ELO, model
    assert meta["n_votes"] == len(anonymous)


def test_publish_each_component_names_every_part(db_url: str, tmp_path: Path) -> None:
    _stored(db_url, tmp_path)
    snapshots = tmp_path / "snapshots"
    result = CliRunner().invoke(
        build_app(),
        ["publish", "--database-url", db_url, *FIT, "--snapshot-dir", str(snapshots), "--each-component"],
    )
    assert result.exit_code == 0, result.output
    assert "component 1: a1, a2, a3, a4" in result.output and "component 2: z1, z2" in result.output
    metas = _published(result.output, snapshots)
    by_part = {m["filters"]["component"]: m for m in metas}
    assert set(by_part) == {1, 2}
    assert by_part[1]["n_votes"] == 900 and by_part[2]["n_votes"] == 120


@pytest.mark.parametrize(
    "flags",
    [
        ["--models", "a1,a2,a3"],
        ["--exclude-models", "a4", "--anony-only"],
        ["--judge", "user3"],
        ["--since", "2023-11-14T22:16:00", "--until", "2023-11-14T22:25:00"],
    ],
)
def test_every_filter_selects_the_votes_the_file_filter_selects(
    db_url: str, tmp_path: Path, flags: list[str]
) -> None:
    _, path = _stored(db_url, tmp_path)
    runner = CliRunner()
    common = [*FIT, *flags, "--largest-component", "--no-plots", "--json"]
    from_file = runner.invoke(
        build_app(),
        ["recompute", "--from", str(path), "--skip-invalid", *common, "--out", str(tmp_path / "f")],
    )
    assert from_file.exit_code == 0, from_file.output
    from_db = runner.invoke(
        build_app(), ["recompute", "--database-url", db_url, *common, "--out", str(tmp_path / "d")]
    )
    assert from_db.exit_code == 0, from_db.output
    file_meta = json.loads((tmp_path / "f" / "metadata.json").read_text(encoding="utf-8"))
    db_meta = json.loads((tmp_path / "d" / "metadata.json").read_text(encoding="utf-8"))
    assert 0 < db_meta["n_votes"] == file_meta["n_votes"] < 1020
    assert _ratings(tmp_path / "d") == pytest.approx(_ratings(tmp_path / "f"), abs=1e-6)
    snapshots = tmp_path / "snapshots"
    published = runner.invoke(
        build_app(),
        [
            "publish",
            "--database-url",
            db_url,
            *FIT,
            *flags,
            "--largest-component",
            "--snapshot-dir",
            str(snapshots),
        ],
    )
    assert published.exit_code == 0, published.output
    (meta,) = _published(published.output, snapshots)
    assert meta["n_votes"] == file_meta["n_votes"]
    recorded = meta["filters"]
    for flag, key in (("--models", "models"), ("--exclude-models", "exclude_models")):
        if flag in flags:
            assert recorded[key] == flags[flags.index(flag) + 1].split(",")
    if "--judge" in flags:
        assert recorded["annotators"] == ["user3"]
    if "--since" in flags:
        assert recorded["since"].startswith("2023-11-14T22:16:00")


def test_evaluate_each_component_from_a_file_and_filters_on_the_database(db_url: str, tmp_path: Path) -> None:
    rows, path = _stored(db_url, tmp_path)
    runner = CliRunner()
    common = ["--rounds", "50", "--json", "--split", "random"]
    each = runner.invoke(
        build_app(), ["evaluate", "--from", str(path), "--skip-invalid", "--each-component", *common]
    )
    assert each.exit_code == 0, each.output
    parts = json.loads(each.stdout[each.stdout.index("[") :])
    assert [set(p["models"]) for p in parts] == [{"a1", "a2", "a3", "a4"}, {"z1", "z2"}]
    assert [p["component"] for p in parts] == [1, 2]
    assert all(
        r["n_train"] + r["n_test"] <= n for p, n in zip(parts, (900, 120), strict=True) for r in p["rows"]
    )
    stored = runner.invoke(
        build_app(),
        ["evaluate", "--database-url", db_url, "--anony-only", "--largest-component", *common],
    )
    assert stored.exit_code == 0, stored.output
    table = json.loads(stored.stdout[stored.stdout.index("[") :])
    frame = pd.DataFrame(rows)
    anonymous = frame[(frame.anony == True) & frame.model_a.str.startswith("a")]  # noqa: E712
    assert {r["n_train"] for r in table} == {len(anonymous) - round(0.2 * len(anonymous))}
