"""A command run on a roomy stretch of the interpreter's frame stack, so no hot call sits on a chunk edge.

CPython (3.11 on) keeps each thread's Python frames in chunks of 16 KiB it maps from the operating
system. A call whose frame does not fit in the current chunk maps a new one, and the return that pops
the first frame of a chunk unmaps it again. A loop that calls a function at exactly that depth maps and
unmaps a chunk on every call: a system call pair and a page fault each time, and the kernel's lock on
the process's memory taken for writing, so another thread that is reading a file or allocating waits.
CPython fixed this by keeping one spare chunk per thread (gh-142183, "Avoid a pathological case where
repeated calls at a specific stack depth could be significantly slower"): in 3.13.13 and 3.14.4 (both
released 2026-04-07) and 3.15. Every 3.11 and 3.12, 3.13 before 3.13.13 and 3.14 before 3.14.4 still map
and unmap.

Which loop lands on an edge depends on how deep the command runs, so it changed with the way it was
started. ``arena publish`` started as the console script spent a second of a six-second run in 56,000 such
map/unmap pairs (scipy parsing its docstrings while scikit-learn was imported, beside a thread that then
read the votes ahead), and not one when started as ``python -m arena.cli.main``, whose calls sit a few
frames deeper. :func:`call_on_roomy_stack` calls the command from a frame that is made to need half a MiB
of stack (its code claims that much operand room, which the interpreter reserves and never touches, so no
memory is used for it): that frame gets a chunk of 1 MiB to itself, and every frame the command pushes on
top of it, up to some 500 KiB of them (far more than a thousand frames of recursion), stays in that one
chunk. No edge, wherever the command's loops run.

**When it can go**: once every Python the project supports has the fix, that is once the floor of
``requires-python`` in ``pyproject.toml`` is :data:`REMOVABLE_FROM` (3.14.4) or later. A floor of 3.13.13
is not enough: it still admits 3.14.0 to 3.14.3. Then this module and its one call in
:func:`arena.cli.main.main` are removed; ``tests/arena/cli/test_frame_stack.py`` fails from that day on to
say so.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

__all__ = ["FIXED_IN", "REMOVABLE_FROM", "ROOMY_FRAME_SLOTS", "call_on_roomy_stack", "keeps_a_spare_chunk"]

#: The first release of each CPython line that keeps a spare chunk per thread (gh-142183); every line
#: after 3.14 has it from its first release.
FIXED_IN = {(3, 13): (3, 13, 13), (3, 14): (3, 14, 4)}
#: The lowest ``requires-python`` floor from which every supported CPython keeps a spare chunk.
REMOVABLE_FROM = (3, 14, 4)

#: Stack slots (8 bytes each) the roomy frame claims: just over 512 KiB, so its chunk is rounded up to
#: 1 MiB (CPython doubles from 16 KiB until the frame fits) and about 500 KiB of it is left for the
#: frames the command pushes.
ROOMY_FRAME_SLOTS = 65_600


def keeps_a_spare_chunk(version: tuple[int, int, int]) -> bool:
    """Whether CPython ``version`` (major, minor, micro) keeps a spare chunk, so no depth maps and unmaps
    one per call (see :data:`FIXED_IN`)."""
    line = version[:2]
    if line in FIXED_IN:
        return version >= FIXED_IN[line]
    return line > max(FIXED_IN)


def _call(run: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    return run(*args)


def _roomy(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with a code object that claims :data:`ROOMY_FRAME_SLOTS` of operand stack; itself
    where the interpreter is not CPython (nothing of this applies there)."""
    if sys.implementation.name != "cpython" or not isinstance(function, types.FunctionType):
        return function
    code = function.__code__.replace(co_stacksize=function.__code__.co_stacksize + ROOMY_FRAME_SLOTS)
    return types.FunctionType(code, function.__globals__, function.__name__)


_roomy_call = _roomy(_call)


def call_on_roomy_stack(run: Callable[..., Any], *args: Any) -> Any:
    """``run(*args)``, called from a frame that starts a 1 MiB chunk of the frame stack (see the
    module): its result returned, its exceptions raised as they are."""
    return _roomy_call(run, args)
