"""The command's roomy frame stack: no depth at which a loop of calls maps and unmaps a chunk each call.

The probe recurses level by level and, at each depth, calls a function with a large frame a few
thousand times, counting the process's minor page faults: where that frame's call crosses the end of a
16 KiB chunk, CPython 3.11 and 3.12 map a fresh chunk on every call, and writing the frame into it is a
page fault, so that depth shows about one fault per call; every other depth shows none. The large
frame (more than a recursion level) makes sure each chunk edge is hit by some depth.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest

from arena.cli.frame_stack import FIXED_IN, REMOVABLE_FROM, call_on_roomy_stack, keeps_a_spare_chunk

ROOT = Path(__file__).resolve().parents[3]
CALLS = 2_000
DEPTHS = 600  # some 60 KiB of recursion: several chunk edges outside the roomy stack


def _wide() -> None:
    """Called in the probe's loops; its frame is made wider than a recursion level below."""


_WIDE = types.FunctionType(_wide.__code__.replace(co_stacksize=64), globals())


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def worst_faults(depths: int = DEPTHS, calls: int = CALLS) -> int:
    """The most minor page faults ``calls`` calls of a wide function cost at any depth below here."""
    worst = 0

    def level(depth: int) -> None:
        nonlocal worst
        call = _WIDE
        before = _faults()
        for _ in range(calls):
            call()
        worst = max(worst, _faults() - before)
        if depth < depths:
            level(depth + 1)

    level(0)
    return worst


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="CPython's frame stack")
def test_no_depth_on_the_roomy_stack_maps_a_chunk_per_call() -> None:
    if sys.version_info < (3, 13):
        # the probe finds the edge where CPython maps a chunk per call (measured on 3.11 and 3.12; 3.13.13,
        # 3.14.4 and later keep a spare chunk, see arena.cli.frame_stack.FIXED_IN)
        assert worst_faults() >= CALLS // 2
    assert call_on_roomy_stack(worst_faults) < CALLS // 10


def test_the_call_returns_and_raises_as_the_function_does() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    def fail() -> None:
        raise KeyError("the function's own error")

    assert call_on_roomy_stack(add, 2, 3) == 5
    with pytest.raises(KeyError, match="the function's own error"):
        call_on_roomy_stack(fail)
    # nested calls (a command calling back into the CLI) each get a roomy frame of their own
    assert call_on_roomy_stack(call_on_roomy_stack, add, 1, 1) == 2


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="CPython's frame stack")
def test_the_arena_command_runs_on_the_roomy_stack() -> None:
    """``arena.cli.main.main``, as the console script calls it, with the probe as its app."""
    code = (
        "import arena.cli.main as cli\n"
        "from tests.arena.cli.test_frame_stack import worst_faults\n"
        "cli.app = lambda args: print(worst_faults())\n"
        "cli.main([])\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed program
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) < CALLS // 10


def requires_python_floor() -> tuple[int, int, int]:
    """The lowest Python the project supports: the floor of ``requires-python`` in ``pyproject.toml``."""
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
    found = re.fullmatch(r"\s*>=\s*(\d+)\.(\d+)(?:\.(\d+))?\s*", spec)
    assert found is not None, f"requires-python {spec!r}: read this floor by hand against REMOVABLE_FROM"
    major, minor, micro = found.groups()
    return int(major), int(minor), int(micro or 0)


def test_the_fixed_releases_are_those_that_keep_a_spare_chunk() -> None:
    for churning in ((3, 11, 14), (3, 12, 12), (3, 13, 12), (3, 14, 0), (3, 14, 3)):
        assert not keeps_a_spare_chunk(churning), churning
    for fixed in ((3, 13, 13), (3, 13, 14), (3, 14, 4), (3, 15, 0), (4, 0, 0)):
        assert keeps_a_spare_chunk(fixed), fixed
    # the floor from which the workaround can go is the first release after which no release churns
    assert REMOVABLE_FROM == max(FIXED_IN.values())
    assert keeps_a_spare_chunk(REMOVABLE_FROM) and not keeps_a_spare_chunk((3, 14, 3))


def test_the_workaround_stays_only_while_a_supported_python_needs_it() -> None:
    floor = requires_python_floor()
    assert floor < REMOVABLE_FROM, (
        f"requires-python now starts at {'.'.join(map(str, floor))}: every supported CPython keeps a spare "
        "frame-stack chunk (gh-142183), so the workaround can go: remove arena/cli/frame_stack.py, its call "
        "in arena.cli.main.main and this test file"
    )
