"""A fresh clone anywhere runs every test: no test or script reads a folder outside the repository.

The real files tests need live in ``tests/data/`` (named by ``tests/real_data.py``, with their source and
licence in its README); a test that read the development machines' ``../shared`` folder could only skip
elsewhere.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.real_data import DATA, VICUNA_CATALOG, VICUNA_JUDGES

ROOT = Path(__file__).resolve().parents[1]
#: Paths that point outside the checkout: the machines' shared folder, by any spelling.
OUTSIDE = re.compile(r"""\.\./shared|/work/shared|["']shared["']\s*/\s*["']data["']""")


def test_no_test_or_script_reads_outside_the_repository() -> None:
    readers = [*ROOT.glob("tests/**/*.py"), *ROOT.glob("scripts/**/*.py")]
    found = {
        str(path.relative_to(ROOT)): n
        for path in readers
        if path != Path(__file__).resolve()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    }
    assert not found, f"read from tests/data (tests/real_data.py) instead: {found}"


def test_the_real_data_is_in_the_repository_with_its_licence() -> None:
    assert VICUNA_CATALOG.is_file() and VICUNA_JUDGES.is_file()
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    assert "MIT licence" in readme and "bcdnlp/PRD" in readme
