"""Logging for operators: one JSON object per line (``ARENA_LOG_FORMAT=json``), a request log with a
request id, and probe requests (``/healthz``, ``/readyz``, ``/metrics``) demoted below info level.

Everything goes through the standard :mod:`logging` module; :func:`log_config` is the ``dictConfig`` that
`arena serve` hands to uvicorn, so its access log takes the same form in every worker.
"""

from __future__ import annotations

import contextvars
import json
import logging
import secrets
import time
from datetime import UTC, datetime
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from votes.voting.battles import MAX_REQUEST_ID

__all__ = [
    "PROBE_PATHS",
    "REQUEST_ID",
    "REQUEST_ID_HEADER",
    "JsonFormatter",
    "ProbeFilter",
    "RequestLogMiddleware",
    "log_config",
]

#: Paths whose log lines are written at debug level: orchestrators ask them every few seconds.
PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
REQUEST_ID_HEADER = "x-request-id"
#: The current request's id, for any log line written while it is served.
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("arena_request_id", default=None)

# Attributes every LogRecord has; anything else on a record was passed in ``extra`` and is written out.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the request id, and any ``extra`` fields.

    uvicorn's access records are given named fields (client, method, path, status) instead of its
    positional arguments.
    """

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == 5:
            client, method, path, http_version, status = record.args
            out.update(client=client, method=method, path=path, http=http_version, status=status)
            out["message"] = "access"
        else:
            out["message"] = record.getMessage()
        request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        if request_id:
            out["request_id"] = request_id
        out.update({k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class ProbeFilter(logging.Filter):
    """Demotes uvicorn access lines of probe paths to debug; they pass only when debug is on."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and str(args[2]).split("?")[0] in PROBE_PATHS:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


class RequestLogMiddleware:
    """A request id for every HTTP request (the client's ``X-Request-ID`` if sane, else a new one), set
    for the log lines written while it is served, echoed in the response, and one ``arena.request`` line
    per request with its route template, method, status and latency."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.log = logging.getLogger("arena.request")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(REQUEST_ID_HEADER.encode(), b"").decode("latin-1")
        ok = 0 < len(given) <= MAX_REQUEST_ID and given.replace("-", "").replace("_", "").isalnum()
        request_id = given if ok else secrets.token_hex(8)
        token = REQUEST_ID.set(request_id)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [
                    *message.get("headers", []),
                    (REQUEST_ID_HEADER.encode(), request_id.encode()),
                ]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            level = logging.DEBUG if scope["path"] in PROBE_PATHS else logging.INFO
            self.log.log(
                level,
                "%s %s %d",
                scope["method"],
                route,
                status,
                extra={
                    "request_id": request_id,
                    "route": route,
                    "method": scope["method"],
                    "status": status,
                    "latency_ms": round((time.perf_counter() - started) * 1000.0, 3),
                },
            )
            REQUEST_ID.reset(token)


def log_config(*, json_lines: bool, level: str = "info") -> dict[str, Any]:
    """A :func:`logging.config.dictConfig` for uvicorn and Arena's loggers, as text or JSON lines."""
    level = level.upper()
    if json_lines:
        default: dict[str, Any] = {"()": "arena.logs.JsonFormatter"}
        access: dict[str, Any] = {"()": "arena.logs.JsonFormatter"}
    else:
        default = {"()": "uvicorn.logging.DefaultFormatter", "fmt": "%(levelprefix)s %(name)s: %(message)s"}
        access = {
            "()": "uvicorn.logging.AccessFormatter",
            "fmt": '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s',
        }
    stream = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"probes": {"()": "arena.logs.ProbeFilter"}},
        "formatters": {"default": default, "access": access},
        "handlers": {
            "default": {**stream, "formatter": "default"},
            "access": {**stream, "formatter": "access", "filters": ["probes"], "stream": "ext://sys.stdout"},
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": ["access"], "level": level, "propagate": False},
            "arena": {"handlers": ["default"], "level": level, "propagate": False},
            "votes": {"handlers": ["default"], "level": level, "propagate": False},
        },
    }
