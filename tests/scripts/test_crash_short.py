"""Short crash test on both backends: SIGKILL a real server mid-load; nothing acknowledged is lost."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "crash_test.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("crash_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_crash_short(
    backend: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--backend", backend, "--clients", "4", "--before-kill", "2.5", "--after-kill", "1.5"]
    if backend == "postgresql":
        argv += ["--pg-admin-url", request.getfixturevalue("pg_url")]
    status = load_script().main(argv)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["backend"] == backend
    assert result["acknowledged"] > 20
    assert result["found"] == result["acknowledged"]
    assert result["lost"] == 0 and result["duplicated"] == 0
    assert result["replay_equal"] and result["integrity_ok"]
    assert status == 0
