"""Command-line output people can read and pipe: whole numbers and ids, --json, unique id prefixes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from arena.cli.main import build_app
from arena.publish.recompute import SliceSpec
from arena.publish.snapshots import publish_slices
from leaderboard.bt.request import FitRequest
from tests.factories import write_jsonl
from tests.real_data import VICUNA_JUDGES
from votes.db import make_engine
from votes.imports.demo import load_demo
from votes.migrate import upgrade_database

ROUNDS = 10


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[str, Engine, list[str]]]:
    url = f"sqlite:///{tmp_path}/arena.db"
    upgrade_database(url)
    engine = make_engine(url)
    load_demo(engine, n_votes=400, seed=4)
    rows = publish_slices(
        engine,
        snapshot_dir=tmp_path / "snapshots",
        request=FitRequest(n_rounds=ROUNDS, random_state=1),
        slices=[SliceSpec(), SliceSpec(language="en")],
        plots=False,
    )
    try:
        yield url, engine, [r.id for r in rows]
    finally:
        engine.dispose()


def test_recompute_json_is_parseable_with_whole_counts(tmp_path: Path) -> None:
    args = ["recompute", "--from", str(VICUNA_JUDGES), "--bootstrap"]
    result = CliRunner().invoke(
        build_app(), [*args, str(ROUNDS), "--no-plots", "--json", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    meta = payload["metadata"]
    assert isinstance(meta["n_votes"], int) and meta["n_votes"] > 0
    assert all(isinstance(row["battles"], int) for row in payload["models"])
    assert payload["models"][0]["rank"] == 1 and payload["path"] == str(tmp_path)


def _long_named_battles(path: Path) -> Path:
    """Battles between four models with long names (as on public boards), every pair both ways."""
    names = [f"organisation-{k}/a-rather-long-model-name-of-48-characters"[:48] for k in range(4)]
    rows = []
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if i != j:
                rows += [{"model_a": a, "model_b": b, "winner": "model_a" if i < j else "model_b"}] * 3
                rows.append({"model_a": a, "model_b": b, "winner": "model_b" if i < j else "model_a"})
    return write_jsonl(path, rows)


def test_tables_never_cut_numbers_or_ids(tmp_path: Path) -> None:
    battles = _long_named_battles(tmp_path / "battles.jsonl")
    out = tmp_path / "board"
    args = ["recompute", "--from", str(battles), "--bootstrap", str(ROUNDS), "--no-plots", "--out", str(out)]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    table = json.loads((out / "leaderboard.json").read_text())["models"]
    for row in table:
        assert f"{row['rating']:.1f}" in result.output
        assert f"{row['ci_low']:.1f}-{row['ci_high']:.1f}" in result.output
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["id"] in result.output and meta["votes_sha256"] in result.output
    assert f"{meta['n_votes']:,} votes" in result.output


def test_snapshots_show_and_diff_take_unique_prefixes(store: tuple[str, Engine, list[str]]) -> None:
    url, _, ids = store
    runner = CliRunner()
    overall, english = ids
    shown = runner.invoke(build_app(), ["snapshots", "show", overall[:-4], "--database-url", url, "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["id"] == overall
    common = 0
    while overall[common] == english[common]:
        common += 1
    ambiguous = runner.invoke(build_app(), ["snapshots", "show", overall[:common], "--database-url", url])
    assert ambiguous.exit_code == 2 and "several snapshot ids" in ambiguous.output
    missing = runner.invoke(build_app(), ["snapshots", "show", "nope", "--database-url", url])
    assert missing.exit_code == 2 and "no snapshot" in missing.output
    diff = runner.invoke(
        build_app(),
        ["snapshots", "diff", overall[: common + 1], english[: common + 1], "--database-url", url, "--json"],
    )
    assert diff.exit_code == 0, diff.output
    assert (json.loads(diff.stdout)["a"], json.loads(diff.stdout)["b"]) == (overall, english)
    listed = runner.invoke(build_app(), ["snapshots", "list", "--database-url", url], env={"COLUMNS": "70"})
    assert listed.exit_code == 0 and "…" not in listed.output
    assert all(i in listed.output for i in ids)


def test_models_list_never_cuts_a_base_url_or_eats_brackets(tmp_path: Path) -> None:
    """`arena models list` into a pipe: each endpoint on one line, the base URL with its port, a parameter
    in brackets as written (rich cut the URL before the port at 80 columns)."""
    url = f"sqlite:///{tmp_path}/arena.db"
    base = "http://inference-gateway.research.internal.example.org:8443/v1"
    runner = CliRunner()
    added = runner.invoke(
        build_app(),
        ["models", "add", "llama-8b", "--base-url", base, "--param", "system_prompt=[INST] be brief"]
        + ["--database-url", url],
    )
    assert added.exit_code == 0, added.output
    listed = runner.invoke(build_app(), ["models", "list", "--database-url", url], env={"COLUMNS": "60"})
    assert listed.exit_code == 0, listed.output
    assert "…" not in listed.output
    row = next(line for line in listed.output.splitlines() if "llama-8b" in line)
    assert base in row and "[INST] be brief" in row, listed.output
