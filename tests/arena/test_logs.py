"""Structured logs: the request log with its id, JSON lines, and probe lines kept below info level."""

from __future__ import annotations

import json
import logging
import logging.config

import pytest
from fastapi.testclient import TestClient

from arena.logs import JsonFormatter, ProbeFilter, log_config
from tests.arena.conftest import AppFactory


def test_json_request_log_carries_id_route_status_latency(
    make_client: AppFactory, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client(log_format="json")
    with caplog.at_level(logging.DEBUG, logger="arena.request"):
        reply = client.get("/api/battles/next", headers={"X-Request-ID": "abc-123"})
        probe = client.get("/healthz")
    assert reply.status_code == 200 and reply.headers["x-request-id"] == "abc-123"
    assert len(probe.headers["x-request-id"]) == 16  # a fresh id when none is given
    records = {r.route: r for r in caplog.records if r.name == "arena.request"}  # type: ignore[attr-defined]
    battle = records["/api/battles/next"]
    assert battle.levelno == logging.INFO
    line = json.loads(JsonFormatter().format(battle))
    assert line["request_id"] == "abc-123" and line["status"] == 200 and line["method"] == "GET"
    assert line["route"] == "/api/battles/next" and line["latency_ms"] > 0 and line["level"] == "info"
    assert records["/healthz"].levelno == logging.DEBUG


def test_a_hostile_request_id_is_replaced(make_client: AppFactory) -> None:
    client = make_client(log_format="json")
    reply = client.get("/healthz", headers={"X-Request-ID": 'x" onload=1 ' + "y" * 100})
    assert reply.headers["x-request-id"].isalnum() and len(reply.headers["x-request-id"]) == 16


def test_text_logs_add_no_request_id(client: TestClient) -> None:
    assert "x-request-id" not in client.get("/healthz").headers


def _access(path: str) -> logging.LogRecord:
    return logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("1.2.3.4:5", "GET", path, "1.1", 200),
        None,
    )


def test_probe_access_lines_are_debug_and_dropped_at_info() -> None:
    logger = logging.getLogger("uvicorn.access")
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        probe, page = _access("/readyz"), _access("/vote")
        assert ProbeFilter().filter(probe) is False and probe.levelno == logging.DEBUG
        assert ProbeFilter().filter(page) is True and page.levelno == logging.INFO
        logger.setLevel(logging.DEBUG)
        assert ProbeFilter().filter(_access("/metrics?x=1")) is True
    finally:
        logger.setLevel(old)


def test_access_line_as_json() -> None:
    line = json.loads(JsonFormatter().format(_access("/vote")))
    assert line["client"] == "1.2.3.4:5" and line["path"] == "/vote" and line["status"] == 200
    assert line["logger"] == "uvicorn.access" and line["ts"].endswith("+00:00")


@pytest.mark.parametrize("json_lines", [True, False])
def test_log_config_builds(json_lines: bool) -> None:
    config = log_config(json_lines=json_lines, level="warning")
    configurator = logging.config.DictConfigurator(config)
    formatter = configurator.configure_formatter(dict(config["formatters"]["access"]))
    assert isinstance(formatter, JsonFormatter) is json_lines
    assert config["loggers"]["uvicorn.access"]["level"] == "WARNING"
