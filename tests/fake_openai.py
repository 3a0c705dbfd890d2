"""A scripted OpenAI-style chat server for fault tests: fails on purpose, answers slowly, counts requests.

It runs the standard library's threading HTTP server on a loopback port in a thread. The first requests
get the statuses in ``failures`` (one each), later ones a small ``chat.completion`` (or, when asked to
stream, its words as server-sent events with a usage chunk, ``word_delay_s`` apart); every answer waits
``delay_s`` first. It records when each request arrived, its body and Authorization header, the most
requests it held at once, and how many streams the client cut short (closed before the last word).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAI", "serve_fake_openai"]


@dataclass
class FakeOpenAI:
    """What the fake server was told to do and what it saw."""

    failures: list[int] = field(default_factory=list)
    delay_s: float = 0.0
    word_delay_s: float = 0.0
    retry_after_ms: int | None = None
    answer: str = "fake answer"
    stream_finishes: bool = True  # False: a stream whose last chunk has no finish_reason (cut short)
    base_url: str = ""
    arrivals: list[float] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)
    max_in_flight: int = 0
    cut_short: int = 0
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def n_requests(self) -> int:
        return len(self.arrivals)

    def _begin(self, body: dict[str, Any], authorization: str) -> int | None:
        """Record a request; the status to fail it with, or None to answer it."""
        with self._lock:
            self.arrivals.append(time.monotonic())
            self.bodies.append(body)
            self.authorizations.append(authorization)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            index = len(self.arrivals) - 1
            return self.failures[index] if index < len(self.failures) else None

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1


def _completion_body(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            """Quiet: tests read the counters, not a log."""

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            status = fake._begin(body, self.headers.get("Authorization", ""))
            try:
                time.sleep(fake.delay_s)
                if status is None and body.get("stream"):
                    self._stream(str(body.get("model")))
                    return
                if status is None:
                    payload = _completion_body(str(body.get("model")), fake.answer)
                    status = 200
                else:
                    payload = {"error": {"message": f"scripted failure {status}", "type": "fake"}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status != 200 and fake.retry_after_ms is not None:
                    self.send_header("retry-after-ms", str(fake.retry_after_ms))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                with fake._lock:
                    fake.cut_short += 1  # the client gave up (a timeout or a stop)
            finally:
                fake._end()

        def _stream(self, model: str) -> None:
            """The answer word by word as server-sent events, a usage chunk, then ``[DONE]``."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            words = fake.answer.split(" ")
            for i, word in enumerate(words):
                if i:
                    time.sleep(fake.word_delay_s)
                last = i == len(words) - 1
                delta = {"content": word if last else word + " "}
                finish = "stop" if last and fake.stream_finishes else None
                choice = {"index": 0, "delta": delta, "finish_reason": finish}
                self._event(
                    {"id": "c", "object": "chat.completion.chunk", "model": model, "choices": [choice]}
                )
            usage = {"prompt_tokens": 3, "completion_tokens": len(words), "total_tokens": 3 + len(words)}
            self._event(
                {"id": "c", "object": "chat.completion.chunk", "model": model, "choices": [], "usage": usage}
            )
            self.wfile.write(b"data: [DONE]\n\n")

        def _event(self, payload: dict[str, Any]) -> None:
            self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
            self.wfile.flush()

    return Handler


class _Server(ThreadingHTTPServer):
    request_queue_size = 64  # the default 5 drops connections of a burst (the overlap test sends 8)
    daemon_threads = True


@contextmanager
def serve_fake_openai(fake: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """Serve ``fake`` on a free loopback port (its ``base_url`` is set) until the block ends."""
    server = _Server(("127.0.0.1", 0), _handler(fake))
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
