"""Exports and snapshot CSVs are safe to open in a spreadsheet and never left half-written.

- A CSV cell a spreadsheet would run (``=HYPERLINK(...)``, ``@SUM``, ``+``, ``-``, a tab or CR first) is
  written with a leading apostrophe and read back exactly; JSON lines keep the text as it is.
- A failed export (here: the file size limit, as on a full disk) leaves the previous good file in place,
  with one line and exit status 1.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from arena.cli.main import app
from leaderboard.snapshot.dataset_card import models_csv
from leaderboard.spreadsheet import FORMULA_STARTS, escape_cell, unescape_cell

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
DANGEROUS = ['=HYPERLINK("http://evil.example","x")', "@SUM(A1)", "+1+1", "-2+3", "\t=1", "\r=1", "'=kept"]


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@given(st.text(max_size=12))
def test_escape_round_trips(cell: str) -> None:
    assert unescape_cell(escape_cell(cell)) == cell


def test_escape_rule() -> None:
    for cell in DANGEROUS:
        assert escape_cell(cell).startswith("'"), cell
    assert escape_cell("-12.5") == "-12.5" and escape_cell("+3e5") == "+3e5"  # numbers stay numbers
    assert escape_cell("alpha") == "alpha"
    assert set(FORMULA_STARTS) == {"=", "+", "-", "@", "\t", "\r"}
    assert (
        models_csv(["alpha"], {"alpha": {"organisation": "=cmd|' /C calc'!A0"}})
        .splitlines()[1]
        .startswith(b"alpha,'=cmd")
    )


def catalog(path: Path) -> Path:
    rows = [
        {"prompt_id": f"p{i}", "prompt": text, "model": "alpha", "output": text}
        for i, text in enumerate(DANGEROUS)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


def test_csv_export_escapes_formulas_and_reads_back_exactly(url: str, tmp_path: Path) -> None:
    code, out = run("import", str(catalog(tmp_path / "catalog.jsonl")), "--database-url", url)
    assert code == 0, out
    first = tmp_path / "first.csv"
    code, out = run("export", "catalog", "--out", str(first), "--format", "csv", "--database-url", url)
    assert code == 0, out
    cells = [
        c for row in csv.reader(io.StringIO(first.read_bytes().decode("utf-8"), newline="")) for c in row
    ]
    for text in DANGEROUS:
        assert escape_cell(text) in cells and text not in cells, text
    assert not any(c.startswith(("=", "+", "-", "@", "\t", "\r")) for c in cells)
    jsonl = tmp_path / "exact.jsonl"
    code, out = run("export", "catalog", "--out", str(jsonl), "--database-url", url)
    assert code == 0, out
    outputs = {json.loads(line)["output"] for line in jsonl.read_text(encoding="utf-8").splitlines()}
    assert outputs == set(DANGEROUS)  # JSON lines stay exact
    other = f"sqlite:///{tmp_path / 'other.db'}"
    code, out = run("import", str(first), "--database-url", other)
    assert code == 0, out
    second = tmp_path / "second.csv"
    code, out = run("export", "catalog", "--out", str(second), "--format", "csv", "--database-url", other)
    assert code == 0, out
    assert second.read_bytes() == first.read_bytes()


EXPORT_UNDER_LIMIT = """
import resource, signal, sys
from arena.cli.main import app
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
app(sys.argv[2:])
"""


def test_failed_export_leaves_the_previous_file(url: str, tmp_path: Path) -> None:
    code, out = run("import", str(catalog(tmp_path / "catalog.jsonl")), "--database-url", url)
    assert code == 0, out
    big = tmp_path / "big.jsonl"
    rows = [
        {"prompt_id": f"b{i}", "prompt": f"q{i}", "model": "beta", "output": "y" * 2000} for i in range(200)
    ]
    target = tmp_path / "export.jsonl"
    code, out = run("export", "catalog", "--out", str(target), "--database-url", url)
    assert code == 0, out
    good = target.read_bytes()
    big.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, out = run("import", str(big), "--database-url", url)
    assert code == 0, out
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = ["export", "catalog", "--out", str(target), "--database-url", url]
    # The store (about 1 MB) is under the limit; the export (over 400 kB) is not.
    done = subprocess.run(
        [sys.executable, "-c", EXPORT_UNDER_LIMIT, str(64 * 1024), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "File too large" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert target.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []
