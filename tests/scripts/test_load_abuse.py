"""A short run of scripts/load_abuse.py: idle slow sockets, oversized bodies and headers from 127.0.0.1,
and `GET /` from 127.0.0.2 still answers within a second with the server under 500 MB; the abusive
connections beyond the per-address cap get 503 and the slow ones 408 when their headers take too long."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from arena.security import address_key
from tests.script_modules import load_script


def test_address_key_groups_ipv6_by_64() -> None:
    assert address_key("203.0.113.7") == "203.0.113.7"
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    assert address_key("::ffff:198.51.100.4") == "198.51.100.4"


def test_load_abuse_short(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--sockets", "200", "--seconds", "10", "--oversized", "20", "--header-timeout", "2"]
    # In a thread of its own: the script runs its own event loop, and a test worker's main thread may
    # hold one already (another test's, e.g. a browser driver's).
    with ThreadPoolExecutor(max_workers=1) as pool:
        status = pool.submit(load_script("load_abuse").main, argv).result()
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["probes"] >= 10 and figures["probe_failures"] == 0, figures
    assert figures["slowest_probe_s"] < 1.0, figures
    assert figures["peak_server_rss_mb"] < 500, figures
    answers = figures["answers_to_abuse"]
    assert answers.get("503", 0) > 0, answers  # beyond the per-address cap
    assert answers.get("408", 0) > 0, answers  # headers too slow
    assert figures["server_tracebacks"] == 0
    assert status == 0
