"""Several answers per (prompt, model): the migration that allows them keeps every reference, catalog
files carry them (numbered in file order, idempotent on re-import, round-tripped by export), and the
store refuses a repeated sample number."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import SQLModel

from votes.db import make_engine
from votes.files.catalog_records import MAX_SAMPLES
from votes.files.records import InputError
from votes.imports.files import import_file
from votes.migrate import head_revision, upgrade_database
from votes.reads.exports import export_catalog

NOW = datetime(2026, 11, 1, tzinfo=UTC)
INSERT_OUTPUT = "INSERT INTO output (prompt_id, model_id, sample, text, created_at)"


def test_upgrade_keeps_outputs_and_battles_and_allows_a_second_sample(db_url: str) -> None:
    upgrade_database(db_url, revision="0010_vote_integrity")
    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO model (id, name, active, created_at)"
                    " VALUES (1, 'a', true, :t), (2, 'b', true, :t)"
                ),
                {"t": NOW},
            )
            conn.execute(text("INSERT INTO prompt (id, text, created_at) VALUES (1, 'q', :t)"), {"t": NOW})
            conn.execute(
                text(
                    "INSERT INTO output (id, prompt_id, model_id, text, created_at)"
                    " VALUES (10, 1, 1, 'x', :t), (11, 1, 2, 'y', :t)"
                ),
                {"t": NOW},
            )
            conn.execute(
                text(
                    "INSERT INTO battle (id, prompt_id, output_a_id, output_b_id, model_a_id, model_b_id,"
                    " issued_at, source) VALUES (1, 1, 10, 11, 1, 2, :t, 'site')"
                ),
                {"t": NOW},
            )
        assert upgrade_database(db_url) == head_revision()
        with engine.begin() as conn:
            assert conn.execute(text("SELECT id, sample FROM output ORDER BY id")).all() == [(10, 0), (11, 0)]
            assert conn.execute(text("SELECT output_a_id, output_b_id FROM battle")).one() == (10, 11)
            conn.execute(
                text(f"{INSERT_OUTPUT} VALUES (1, 1, 1, 'x2', :t)"),
                {"t": NOW},
            )
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(
                text(f"{INSERT_OUTPUT} VALUES (1, 1, 1, 'x3', :t)"),
                {"t": NOW},
            )
        # References are enforced again after the migration (SQLite ran it with enforcement off).
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO battle (prompt_id, output_a_id, output_b_id, model_a_id, model_b_id,"
                    " issued_at, source) VALUES (1, 999, 11, 1, 2, :t, 'site')"
                ),
                {"t": NOW},
            )
    finally:
        engine.dispose()


def _catalog(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for prompt_id, model, output in rows:
            out.write(
                json.dumps(
                    {"prompt_id": prompt_id, "prompt": f"Q {prompt_id}", "model": model, "output": output}
                )
            )
            out.write("\n")
    return path


@pytest.fixture
def store(db_url: str) -> Engine:
    engine = make_engine(db_url)
    SQLModel.metadata.create_all(engine)
    return engine


def _samples(engine: Engine) -> list[tuple[str, str, int, str]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT p.external_id, m.name, o.sample, o.text FROM output o"
                " JOIN prompt p ON p.id = o.prompt_id JOIN model m ON m.id = o.model_id"
                " ORDER BY p.external_id, m.name, o.sample"
            )
        ).all()
    return [tuple(r) for r in rows]


def test_catalog_with_several_outputs_per_model_imports_them_as_samples(
    store: Engine, tmp_path: Path
) -> None:
    rows = [("p1", "a", "first"), ("p1", "b", "other"), ("p1", "a", "second"), ("p1", "a", "first")]
    path = _catalog(tmp_path / "c.jsonl", rows)
    assert import_file(store, path).n_added == 3
    want = [("p1", "a", 0, "first"), ("p1", "a", 1, "second"), ("p1", "b", 0, "other")]
    assert _samples(store) == want
    assert import_file(store, path).n_added == 0  # idempotent
    # Export lists samples in order, so the file imports back to the same numbering.
    out = tmp_path / "out.jsonl"
    export_catalog(store, out)
    fresh = make_engine(f"sqlite:///{tmp_path}/fresh.db")
    try:
        SQLModel.metadata.create_all(fresh)
        import_file(fresh, out)
        assert _samples(fresh) == want
    finally:
        fresh.dispose()
    # A third, new sample is added by a file that lists the first two before it.
    import_file(store, _catalog(tmp_path / "more.jsonl", [*rows[:3], ("p1", "a", "third")]))
    assert ("p1", "a", 2, "third") in _samples(store)
    store.dispose()


def test_catalog_sample_conflicts_and_too_many_samples_name_file_and_line(
    store: Engine, tmp_path: Path
) -> None:
    import_file(store, _catalog(tmp_path / "c.jsonl", [("p1", "a", "first"), ("p1", "a", "second")]))
    with pytest.raises(InputError, match=r"line 2.*different answer \(sample 1\)"):
        import_file(store, _catalog(tmp_path / "d.jsonl", [("p1", "a", "first"), ("p1", "a", "changed")]))
    many = [("p2", "a", f"answer {k}") for k in range(MAX_SAMPLES + 1)]
    with pytest.raises(
        InputError, match=rf"line {MAX_SAMPLES + 1}.*more than {MAX_SAMPLES} different outputs"
    ):
        import_file(store, _catalog(tmp_path / "many.jsonl", many))
    assert [r for r in _samples(store) if r[0] == "p2"] == []
    store.dispose()
