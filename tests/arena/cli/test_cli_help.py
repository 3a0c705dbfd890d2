"""Every command's help at 80 columns: each option name whole, every word of every help text there (no markup
eaten, nothing cut), and at the end one or two examples that parse with the command's own options.

The help was rich's boxed panels: at 80 columns they cut option names (``--largest-comp…``) and read help
text as markup, so ``[families]`` vanished from `arena recompute --help`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from arena.cli.main import build_app
from arena.cli.options import EXAMPLES_HEADING

#: Suffixes of the file names examples mention: made (empty) before an example is parsed, for the options
#: that want an existing file.
FILE_SUFFIXES = (".jsonl", ".json", ".gz", ".csv", ".parquet", ".toml")
#: Widest line of an example, its four columns of indent included.
WIDTH = 80


def _commands() -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group below `arena`, with its command path."""

    def walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
        if path:
            yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, (*path, name))

    yield from walk(typer.main.get_command(build_app(lazy=False)), ())


COMMAND_PATHS = dict(_commands())


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(build_app(), [*path, "--help"], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    return result.output


def _squeezed(text: str) -> str:
    """Text without whitespace: what survives any wrapping (click breaks lines at spaces and hyphens)."""
    return re.sub(r"\s+", "", text)


def _examples(output: str) -> list[str]:
    """The command lines of the Examples section that ends ``output`` (continuation lines joined)."""
    lines = output.rstrip().splitlines()
    heading = [i for i, line in enumerate(lines) if line.strip() == EXAMPLES_HEADING]
    assert heading, f"no {EXAMPLES_HEADING!r} section:\n{output}"
    body = lines[heading[-1] + 1 :]
    assert body and all(line.startswith("    ") for line in body), (
        f"the help does not end with examples:\n{output}"
    )
    assert all(len(line) <= WIDTH for line in body), body
    joined: list[str] = []
    for line in body:
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1] + line.strip()
        else:
            assert not line.startswith("     "), f"an indented line that continues nothing: {line!r}"
            joined.append(line.strip())
    return joined


def test_every_command_is_checked() -> None:
    assert {("import",), ("recompute",), ("models",), ("models", "add"), ("db", "upgrade")} <= set(
        COMMAND_PATHS
    )


@pytest.mark.parametrize("path", sorted(COMMAND_PATHS), ids=" ".join)
def test_help_at_80_columns_keeps_every_option_and_word(path: tuple[str, ...]) -> None:
    command = COMMAND_PATHS[path]
    output = _help(path)
    assert "…" not in output and "\x1b[" not in output, output
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        for name in (*param.opts, *param.secondary_opts):
            if name.startswith("-"):
                assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", output), (name, output)
        text = getattr(param, "help", None)
        if text:
            assert _squeezed(text) in _squeezed(output), (param.name, text, output)
    assert _squeezed(command.help or "") in _squeezed(output), output


def test_bracketed_help_text_survives() -> None:
    output = _help(("recompute",))
    assert "(optionally under [families])" in " ".join(output.split())


@pytest.mark.parametrize("path", sorted(COMMAND_PATHS), ids=" ".join)
def test_help_ends_with_examples_that_parse(
    path: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each example names this command and parses with its options: no unknown option, a value of the
    right type for each, every required one given (the command itself does not run)."""
    examples = _examples(_help(path))
    assert 1 <= len(examples) <= 2, examples
    monkeypatch.chdir(tmp_path)
    command = COMMAND_PATHS[path]
    for example in examples:
        words = shlex.split(example)
        assert words[: len(path) + 1] == ["arena", *path] or (
            hasattr(command, "commands") and words[: len(path) + 2][:-1] == ["arena", *path]
        ), example
        for word in words:
            if word.endswith(FILE_SUFFIXES) and not word.startswith("-") and "/" not in word:
                (tmp_path / word).touch()
        target, rest, prog = command, words[len(path) + 1 :], ["arena", *path]
        while hasattr(target, "commands") and rest:  # a group's example runs one of its commands
            prog.append(rest[0])
            target, rest = target.commands[rest[0]], rest[1:]
        target.make_context(" ".join(prog), rest)  # raises on an unknown option or a bad value


def test_the_top_level_help_ends_with_examples() -> None:
    result = CliRunner().invoke(build_app(), ["--help"], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0
    assert all(e.split()[1] in {p[0] for p in COMMAND_PATHS} for e in _examples(result.output))
