"""Model names are normalised at every door: files of battles and catalogs, `arena models add`, the admin
upload. A name that only looks like an existing one (trailing space, invisible or bidi characters, a bell)
is refused or folded into it, a formula start is refused, and a case variant is a warning naming both."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from arena.cli.main import app
from votes.db import is_sqlite, make_engine
from votes.names import case_collisions, model_name
from votes.tables import model_t

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output  # stdout and stderr as the user sees them


@pytest.fixture
def url(db_url: str) -> str:
    if not is_sqlite(db_url):
        code, out = run("db", "upgrade", "--database-url", db_url)
        assert code == 0, out
    return db_url


def stored_models(url: str) -> list[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return sorted(str(n) for n in conn.execute(select(model_t.c.name)).scalars())
    finally:
        engine.dispose()


def battles_file(path: Path, pairs: list[tuple[str, str]]) -> Path:
    rows = [
        {"question_id": f"q{i}", "model_a": a, "model_b": b, "winner": "model_a", "tstamp": float(i)}
        for i, (a, b) in enumerate(pairs)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


DECOMPOSED = unicodedata.normalize("NFD", "café-7b")


def test_model_name_normalises_and_refuses() -> None:
    assert model_name(" alpha  ") == "alpha"
    assert model_name(DECOMPOSED) == "café-7b" != DECOMPOSED
    for bad, what in [
        ("alpha\u202e", "U+202E"),
        ("al\u200bpha", "U+200B"),
        ("alpha\x07", "U+0007"),
        ("alpha\n", "U+000A"),
        ("alpha\ud800", "U+D800"),
        ("\ufeffalpha", "U+FEFF"),
    ]:
        with pytest.raises(ValueError, match=re.escape(what)):
            model_name(bad)
    for start in "=+-@":
        with pytest.raises(ValueError, match="spreadsheet"):
            model_name(f"{start}HYPERLINK(1)")
    with pytest.raises(ValueError, match="empty"):
        model_name("   ")
    assert case_collisions(["Alpha", "gamma"], ["alpha", "beta"]) == [("Alpha", "alpha")]


def test_import_folds_spaces_and_nfc_into_existing_models(url: str, tmp_path: Path) -> None:
    first = battles_file(tmp_path / "a.jsonl", [("alpha", "café-7b")])
    code, out = run("import", str(first), "--database-url", url)
    assert code == 0, out
    assert "new: 2 models" in out
    again = battles_file(tmp_path / "b.jsonl", [("alpha ", DECOMPOSED), (" alpha", "café-7b ")])
    code, out = run("import", str(again), "--database-url", url)
    assert code == 0, out
    assert "new: 0 models" in out
    assert stored_models(url) == ["alpha", "café-7b"]


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("alpha\u202e", "U+202E"),
        ("alp\u200bha", "U+200B"),
        ("alpha\x07", "U+0007"),
        ('=HYPERLINK("http://x")', "spreadsheet"),
        ("@SUM(1)", "spreadsheet"),
    ],
)
def test_import_refuses_lookalike_names_naming_the_line(
    url: str, tmp_path: Path, name: str, reason: str
) -> None:
    path = battles_file(tmp_path / "bad.jsonl", [("alpha", "beta"), ("gamma", name)])
    code, out = run("import", str(path), "--database-url", url)
    assert code == 1, out
    assert "bad.jsonl: line 2:" in out and reason in out, out
    assert "Traceback" not in out
    assert stored_models(url) == []


def test_import_refuses_a_lone_surrogate_in_a_catalog(url: str, tmp_path: Path) -> None:
    path = tmp_path / "catalog.jsonl"
    row = {"prompt_id": "p1", "prompt": "hi", "model": "alpha\ud800", "output": "hello"}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")  # json escapes the surrogate as \\ud800
    code, out = run("import", str(path), "--database-url", url)
    assert code == 1, out
    assert "catalog.jsonl: line 1:" in out and "U+D800" in out, out
    assert stored_models(url) == []


def test_case_variant_is_a_warning_naming_both(url: str, tmp_path: Path) -> None:
    code, out = run(
        "import", str(battles_file(tmp_path / "a.jsonl", [("alpha", "beta")])), "--database-url", url
    )
    assert code == 0, out
    code, out = run(
        "import", str(battles_file(tmp_path / "b.jsonl", [("Alpha", "beta")])), "--database-url", url
    )
    assert code == 0, out
    assert "new: 1 models" in out
    assert "warning" in out and "'Alpha'" in out and "'alpha'" in out, out


def test_models_add_normalises_and_refuses(url: str) -> None:
    code, out = run(
        "models", "add", "alpha\u202e", "--base-url", "http://127.0.0.1:1/v1", "--database-url", url
    )
    assert code != 0 and "U+202E" in out, out
    code, out = run("models", "add", " alpha ", "--base-url", "http://127.0.0.1:1/v1", "--database-url", url)
    assert code == 0, out
    code, out = run("models", "add", "ALPHA", "--base-url", "http://127.0.0.1:1/v1", "--database-url", url)
    assert code == 0, out
    assert "'ALPHA'" in out and "'alpha'" in out, out
    assert stored_models(url) == ["ALPHA", "alpha"]


def test_models_set_and_load_take_names_through_the_same_door(url: str, tmp_path: Path) -> None:
    """`arena models set` and metadata-only tables of `arena models load` create models too: the same rule,
    and an alias is a name that must also be long enough to be looked for."""
    code, out = run("models", "set", "beta\u200b", "--organisation", "Acme", "--database-url", url)
    assert code == 2 and "U+200B" in out and out.count("\n") == 1, out
    code, out = run("models", "set", " beta ", "--role", "judge", "--database-url", url)
    assert code == 0 and out.startswith("beta (new model): role=judge"), out
    code, out = run("models", "set", "beta", "--alias", "=cmd", "--database-url", url)
    assert code == 2 and "spreadsheet" in out, out
    code, out = run("models", "set", "beta", "--alias", "Bb", "--database-url", url)
    assert code == 2 and "at least 3 characters" in out, out
    path = tmp_path / "models.toml"
    path.write_text('[models."gamma\\u200E"]\norganisation = "Acme"\n', encoding="utf-8")  # TOML escape
    code, out = run("models", "load", str(path), "--database-url", url)
    assert code == 2 and "U+200E" in out, out
    path.write_text('[models." gamma "]\norganisation = "Acme"\naliases = ["Gamma Bot"]\n', encoding="utf-8")
    code, out = run("models", "load", str(path), "--database-url", url)
    assert code == 0, out
    assert stored_models(url) == ["beta", "gamma"]
