"""Importer fuzzing (short form of scripts/fuzz_import.py): bad files get InputError and change nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from sqlalchemy.engine import Engine

from tests.script_modules import load_script

fuzz = load_script("fuzz_import")


@seed(20240611)
@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(file=fuzz.files())
def test_malformed_files_are_refused_cleanly(engine: Engine, tmp_path: Path, file: tuple[str, bytes]) -> None:
    if not (tmp_path / "seed-battles.jsonl").exists():
        fuzz.seed_database(engine, tmp_path)
    fuzz.check_file(engine, tmp_path, file[0], file[1], fuzz.Outcome())


def test_one_bad_row_rejects_the_whole_file(engine: Engine, tmp_path: Path) -> None:
    fuzz.seed_database(engine, tmp_path)
    before = fuzz.database_digest(engine)
    good = '{"model_a": "gpt4", "model_b": "bard", "winner": "model_b"}\n'
    bad = '{"model_a": "gpt4", "model_b": "gpt4", "winner": "model_b"}\n'
    path = tmp_path / "mixed.jsonl"
    path.write_text(good * 50 + bad + good * 50, encoding="utf-8")
    with pytest.raises(fuzz.InputError, match=r"line 51: model 'gpt4' cannot battle itself"):
        fuzz.import_file(engine, path)
    assert fuzz.database_digest(engine) == before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x1f\x8b\x08garbage", "gzip"),
        (b"\xff\xfe\x00bad", "UTF-8"),
        (b'{"model_a": "gpt4", "model_b": "bard", "winner": "model_a"\n', "invalid JSON"),
        (b'{"model_a": "gpt4", "model_b": "bard", "winner": "left"}\n', "unknown winner"),
        (b'{"model_a": "gpt4", "model_b": "bard", "winner": "tie", "tstamp": NaN}\n', "finite"),
    ],
)
def test_known_bad_files(engine: Engine, tmp_path: Path, content: bytes, message: str) -> None:
    fuzz.seed_database(engine, tmp_path)
    before = fuzz.database_digest(engine)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(fuzz.InputError, match=message):
        fuzz.import_file(engine, path)
    assert fuzz.database_digest(engine) == before
