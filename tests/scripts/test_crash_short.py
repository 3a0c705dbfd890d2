"""Short crash test on both backends: SIGKILL a real server mid-load; nothing acknowledged is lost."""

from __future__ import annotations

import json

import pytest

from tests.script_modules import load_script


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_crash_short(
    backend: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--backend", backend, "--clients", "4", "--before-kill", "2.5", "--after-kill", "1.5"]
    if backend == "postgresql":
        argv += ["--pg-admin-url", request.getfixturevalue("pg_url")]
    status = load_script("crash_test").main(argv)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["backend"] == backend
    assert result["acknowledged"] > 20
    assert result["found"] == result["acknowledged"]
    assert result["lost"] == 0 and result["duplicated"] == 0
    assert result["replay_equal"] and result["integrity_ok"]
    assert status == 0
