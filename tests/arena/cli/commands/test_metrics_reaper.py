"""The live gauges of exited processes leave the multiprocess metrics folder; their counts stay."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from arena.cli.commands.serve import reap_dead_processes

_CHILD = textwrap.dedent(
    """
    from prometheus_client import Counter, Gauge
    Gauge("waiting", "in flight", multiprocess_mode="livesum").inc(3)
    Counter("done", "finished").inc(2)
    """
)


def _run_child(folder: Path) -> int:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    child = subprocess.run([sys.executable, "-c", _CHILD], env=env, check=True)  # noqa: S603
    assert child.returncode == 0
    pids = {int(p.stem.rsplit("_", 1)[1]) for p in folder.glob("gauge_livesum_*.db")}
    assert len(pids) == 1
    return pids.pop()


def test_a_dead_process_loses_its_live_gauge_and_keeps_its_counter(tmp_path: Path) -> None:
    pid = _run_child(tmp_path)
    # a live process's gauge (this test's own pid) is left alone
    (tmp_path / f"gauge_livesum_{os.getpid()}.db").write_bytes(
        (tmp_path / f"gauge_livesum_{pid}.db").read_bytes()
    )
    assert reap_dead_processes(str(tmp_path)) == [pid]
    names = sorted(p.name for p in tmp_path.iterdir())
    assert f"gauge_livesum_{pid}.db" not in names
    assert f"gauge_livesum_{os.getpid()}.db" in names
    assert f"counter_{pid}.db" in names
    assert reap_dead_processes(str(tmp_path)) == []
