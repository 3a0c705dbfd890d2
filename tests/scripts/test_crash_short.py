"""Short crash tests on both backends: SIGKILL a real server mid-load (one worker; two workers with their
vote writer process, all at once), or only the vote writer process; nothing acknowledged is lost."""

from __future__ import annotations

import json

import pytest

from tests.script_modules import load_script


@pytest.mark.parametrize(
    ("backend", "workers", "kill"),
    [
        ("sqlite", 1, "server"),
        pytest.param("postgresql", 1, "server", marks=pytest.mark.postgres),
        pytest.param("postgresql", 2, "server", marks=pytest.mark.postgres),
        ("sqlite", 2, "writer"),
    ],
)
def test_crash_short(
    backend: str, workers: int, kill: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--backend", backend, "--clients", "4", "--before-kill", "2.5", "--after-kill", "1.5"]
    argv += ["--workers", str(workers), "--kill", kill]
    if backend == "postgresql":
        argv += ["--pg-admin-url", request.getfixturevalue("pg_url")]
    status = load_script("crash_test").main(argv)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["backend"] == backend and result["workers"] == workers and result["killed"] == kill
    assert result["acknowledged"] > 20
    assert result["found"] == result["acknowledged"]
    assert result["lost"] == 0 and result["duplicated"] == 0
    assert result["replay_equal"] and result["integrity_ok"]
    if kill == "writer":  # the workers carried on: the votes the writer held were written by them
        assert result["client_errors"] == 0
    assert status == 0
