"""The command's roomy frame stack: no depth at which a loop of calls maps and unmaps a chunk each call.

The probe recurses level by level and, at each depth, calls a function with a large frame a few
thousand times, counting the process's minor page faults: where that frame's call crosses the end of a
16 KiB chunk, CPython 3.11 and 3.12 map a fresh chunk on every call, and writing the frame into it is a
page fault, so that depth shows about one fault per call; every other depth shows none. The large
frame (more than a recursion level) makes sure each chunk edge is hit by some depth.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import types
from pathlib import Path

import pytest

from arena.cli.frame_stack import call_on_roomy_stack

ROOT = Path(__file__).resolve().parents[2]
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
        # the probe finds the edge where CPython maps a chunk per call (3.13 and later keep a spare one)
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
        "from tests.arena.test_frame_stack import worst_faults\n"
        "cli.app = lambda args: print(worst_faults())\n"
        "cli.main([])\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed program
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) < CALLS // 10
