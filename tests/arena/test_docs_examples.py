"""The shell examples of README.md and docs/*.md that are marked runnable run, as written, against the demo.

A block runs when the line before its fence is ``<!-- runnable -->`` and the fence is ```sh, ```bash or
```console. The blocks of one document run in order, with ``bash -euo pipefail``, in a folder of their
own that holds ``arena.db``, a copy of the demo database (`arena demo`, made once per session): the
default database of every `arena` command, so an example needs no ``--database-url``. A block that fails
fails the test with the document, the line and the command's output; a marker that marks no shell block
is a failure too, so no example is left out unsaid.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena.cli.main import build_app

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
MARKER = "<!-- runnable -->"
SHELLS = ("sh", "bash", "console")
#: Fewest runnable blocks across the documents (a marker lost in an edit is noticed).
AT_LEAST = 10
#: Longest a block may take, in seconds.
BLOCK_SECONDS = 300
#: What runs before each block: stop at the first failure, and say on which of its lines.
PROLOGUE = "set -euo pipefail\ntrap 'echo \"failed at block line $((LINENO - 2))\" >&2' ERR\n"


@dataclass(frozen=True)
class Block:
    """One runnable block: its document's name, the document line of its first command, and its text."""

    name: str
    line: int
    script: str


def read_blocks(text: str, name: str) -> tuple[list[Block], list[str]]:
    """The runnable blocks of a Markdown document, and the markers that mark none (as problems)."""
    lines = text.splitlines()
    blocks: list[Block] = []
    problems: list[str] = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if not fence.startswith("```") or fence.removeprefix("```") not in SHELLS:
            problems.append(
                f"{name}:{i + 1}: {MARKER} is not followed by a ```sh, ```bash or ```console fence"
            )
            continue
        end = next((k for k in range(i + 2, len(lines)) if lines[k].strip() == "```"), None)
        if end is None:
            problems.append(f"{name}:{i + 2}: the block is never closed")
            continue
        script = "\n".join(re.sub(r"^\$ ", "", text) for text in lines[i + 2 : end]) + "\n"
        if not script.strip():
            problems.append(f"{name}:{i + 2}: the block is empty")
            continue
        blocks.append(Block(name, i + 3, script))
    return blocks, problems


BLOCKS = {
    document: read_blocks(document.read_text(encoding="utf-8"), str(document.relative_to(ROOT)))
    for document in DOCUMENTS
}
RUNNABLE = [document for document, (blocks, _) in BLOCKS.items() if blocks]


def test_markers_mark_shell_blocks_and_enough_of_them() -> None:
    problems = [problem for _, found in BLOCKS.values() for problem in found]
    assert problems == []
    total = sum(len(blocks) for blocks, _ in BLOCKS.values())
    assert total >= AT_LEAST, f"{total} runnable blocks; mark at least {AT_LEAST}"


def test_a_marker_on_anything_but_a_shell_block_is_a_problem() -> None:
    text = f"{MARKER}\n```python\nprint(1)\n```\n\n{MARKER}\n```sh\narena --help\n```\n\n{MARKER}\n```sh\n"
    blocks, problems = read_blocks(text, "doc.md")
    assert blocks == [Block("doc.md", 8, "arena --help\n")]
    assert problems == [
        f"doc.md:1: {MARKER} is not followed by a ```sh, ```bash or ```console fence",
        "doc.md:12: the block is never closed",
    ]


@pytest.fixture(scope="session")
def demo_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo database, made once per session as `arena demo` makes it."""
    path = tmp_path_factory.mktemp("demo") / "arena.db"
    result = CliRunner().invoke(build_app(), ["demo", "--database-url", f"sqlite:///{path}"])
    assert result.exit_code == 0, result.output
    return path


def _environment() -> dict[str, str]:
    """The test's environment without its Arena settings, with this interpreter's `arena` first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "120"
    return env


@pytest.mark.parametrize("document", RUNNABLE, ids=lambda d: str(d.relative_to(ROOT)))
def test_the_runnable_examples_run(document: Path, demo_database: Path, tmp_path: Path) -> None:
    shutil.copy(demo_database, tmp_path / "arena.db")
    for block in BLOCKS[document][0]:
        done = subprocess.run(
            ["bash", "-c", PROLOGUE + block.script],
            cwd=tmp_path,
            env=_environment(),
            capture_output=True,
            text=True,
            timeout=BLOCK_SECONDS,
            check=False,
        )
        if done.returncode != 0:
            failed = re.findall(r"failed at block line (\d+)", done.stderr)
            offset = int(failed[-1]) - 1 if failed else 0
            command = block.script.splitlines()[offset] if failed else block.script
            pytest.fail(
                f"{block.name}:{block.line + offset}: exit status {done.returncode}: {command}\n"
                f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
            )
