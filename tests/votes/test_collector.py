"""The collector paused over batch work, and spared its last pass when a command's process exits."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

from votes.collector import gc_paused

ROOT = Path(__file__).resolve().parents[2]

# Cyclic garbage whose finaliser says when the collector reached it; the process then exits.
SCRIPT = textwrap.dedent(
    """
    import gc
    import sys

    from votes.collector import no_collection_at_exit

    class Cycle:
        def __del__(self) -> None:
            sys.stdout.write("collected\\n")
            sys.stdout.flush()

    gc.disable()
    a, b = Cycle(), Cycle()
    a.other, b.other = b, a
    del a, b
    if sys.argv[1] == "spared":
        no_collection_at_exit()
        no_collection_at_exit()  # registered once however often asked
    """
)


def _exit_output(mode: str) -> str:
    run = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, cwd=ROOT, check=True, timeout=60
    )
    return run.stdout


def test_the_last_collection_at_exit_is_skipped_when_asked() -> None:
    assert _exit_output("plain").count("collected") == 2  # the shutdown collection finds the cycle
    assert _exit_output("spared") == ""


def test_no_collection_at_exit_leaves_this_process_collector_alone() -> None:
    from votes.collector import no_collection_at_exit

    frozen = gc.get_freeze_count()
    no_collection_at_exit()
    assert gc.get_freeze_count() == frozen  # nothing frozen before the exit


def test_gc_paused_restores_the_collector() -> None:
    was = gc.isenabled()
    gc.enable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert gc.isenabled()
    finally:
        if not was:
            gc.disable()
