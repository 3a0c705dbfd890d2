"""Model metadata: set with `arena models set` or from the TOML file `arena models load` reads, validated at
the door, stored on the model (no endpoint needed), and published in each snapshot's ``models.csv``."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from sqlmodel import Session, select
from typer.testing import CliRunner

from arena.cli.main import app
from arena.publish.snapshots import publish_snapshot
from leaderboard.bt.request import FitRequest
from leaderboard.snapshot.dataset_card import MODELS_FILE
from votes.catalog.model_metadata import ModelMetadata
from votes.db import make_engine
from votes.imports.demo import load_demo
from votes.migrate import upgrade_database
from votes.models import Model, ModelEndpoint

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/arena.db"


def _models(url: str) -> dict[str, Model]:
    upgrade_database(url)  # a refused command may not have made the database at all
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            return {m.name: m for m in session.exec(select(Model)).all()}
    finally:
        engine.dispose()


def test_set_stores_validated_metadata_and_an_empty_value_clears(url: str) -> None:
    code, out = run(
        "models", "set", "llama-3-8b", "--organization", "Meta", "--license", "llama3",
        "--link", "https://llama.meta.com/", "--knowledge-cutoff", "2023-03", "--database-url", url,
    )  # fmt: skip
    assert code == 0, out
    assert "new model" in out
    model = _models(url)["llama-3-8b"]
    assert (model.organisation, model.licence, model.link, model.knowledge_cutoff) == (
        "Meta", "llama3", "https://llama.meta.com/", "2023-03",
    )  # fmt: skip
    code, out = run("models", "set", "llama-3-8b", "--link", "", "--database-url", url)
    assert code == 0, out
    model = _models(url)["llama-3-8b"]
    assert model.link is None and model.organisation == "Meta"  # only the field given changes


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--link", "javascript:alert(1)", "http:// or https://"),
        ("--link", "ftp://example.com/model", "http:// or https://"),
        ("--link", "https://", "http:// or https://"),
        ("--knowledge-cutoff", "March 2024", "YYYY-MM"),
        ("--knowledge-cutoff", "2024-13", "not a date"),
        ("--knowledge-cutoff", "2024-02-30", "not a date"),
        ("--organisation", "x" * 201, "longer than 200"),
        ("--licence", "mit\x1b[31m", "control character"),
    ],
)
def test_set_refuses_bad_values_and_writes_nothing(url: str, option: str, value: str, says: str) -> None:
    code, out = run("models", "set", "m", option, value, "--database-url", url)
    assert code == 2 and says in out, out
    assert "m" not in _models(url)


def test_set_needs_something_to_set(url: str) -> None:
    code, out = run("models", "set", "m", "--database-url", url)
    assert code == 2 and "nothing to set" in out


def test_load_reads_metadata_beside_endpoints_and_alone(url: str, tmp_path: Path) -> None:
    toml = tmp_path / "models.toml"
    toml.write_text(
        '[models.served]\nbase_url = "http://127.0.0.1:9/v1"\ntemperature = 0.5\norganisation = "Us"\n'
        'link = "http://example.com/served"\n\n'
        '[models.gpt-4]\norganization = "OpenAI"\nlicense = "proprietary"\nknowledge_cutoff = "2021-09-01"\n'
    )
    code, out = run("models", "load", str(toml), "--database-url", url)
    assert code == 0, out
    models = _models(url)
    assert (models["served"].organisation, models["served"].link) == ("Us", "http://example.com/served")
    assert (models["gpt-4"].licence, models["gpt-4"].knowledge_cutoff) == ("proprietary", "2021-09-01")
    engine = make_engine(url)
    with Session(engine) as session:
        endpoints = session.exec(select(ModelEndpoint)).all()
    engine.dispose()
    # metadata keys never become sampling parameters, and a metadata-only table registers no endpoint
    assert [(e.name, e.params) for e in endpoints] == [("served", {"temperature": 0.5})]


def test_load_refuses_a_bad_value_naming_the_model(url: str, tmp_path: Path) -> None:
    toml = tmp_path / "models.toml"
    toml.write_text('[models.bad]\nlink = "file:///etc/passwd"\n')
    code, out = run("models", "load", str(toml), "--database-url", url)
    assert code == 2 and "'bad'" in out and "http" in out, out
    toml.write_text('[models.twice]\norganisation = "A"\norganization = "B"\n')
    code, out = run("models", "load", str(toml), "--database-url", url)
    assert code == 2 and "given twice" in out, out


def test_metadata_object_strips_and_validates() -> None:
    assert ModelMetadata(link="  https://a.example/x ").link == "https://a.example/x"
    assert ModelMetadata(organisation="").changes() == {"organisation": None}
    with pytest.raises(ValueError, match="must be text"):
        ModelMetadata(knowledge_cutoff=2024)  # type: ignore[arg-type]


def test_publish_writes_the_metadata_into_models_csv(url: str, tmp_path: Path) -> None:
    upgrade_database(url)
    engine = make_engine(url)
    try:
        load_demo(engine, n_votes=200, seed=3)
        name = sorted(_models(url))[0]
        code, out = run(
            "models", "set", name, "--organisation", "Org", "--licence", "apache-2.0",
            "--link", "https://example.com/m", "--knowledge-cutoff", "2024-06", "--database-url", url,
        )  # fmt: skip
        assert code == 0, out
        row = publish_snapshot(engine, snapshot_dir=tmp_path / "snaps", request=FitRequest(n_rounds=5))
    finally:
        engine.dispose()
    with (Path(row.path) / MODELS_FILE).open(newline="", encoding="utf-8") as f:
        rows = {r["model"]: r for r in csv.DictReader(f)}
    assert rows[name] == {
        "model": name,
        "organisation": "Org",
        "licence": "apache-2.0",
        "link": "https://example.com/m",
        "knowledge_cutoff": "2024-06",
    }
    assert len(rows) > 1 and all(r["link"] == "" for m, r in rows.items() if m != name)
