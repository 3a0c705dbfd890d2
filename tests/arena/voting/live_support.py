"""Helpers of the live-battle tests: register endpoints, read the page's form fields, read a turn's events."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from votes.catalog.endpoints import EndpointRecord, add_endpoint

#: Names whose aliases cannot turn up by chance in a tiny random model's text.
NAMES = ("Quokkatron-7", "Narwhalix-9")


def register(engine: Engine, servers: Sequence[tuple[str, str, str]], **params: Any) -> None:
    """Register ``(name, base_url, served_model)`` endpoints with ``params``."""
    with Session(engine) as session:
        for name, base_url, served in servers:
            record = EndpointRecord(name=name, base_url=base_url, served_model=served, params=dict(params))
            add_endpoint(session=session, record=record, replace=True)
        session.commit()


def field_value(html: str, name: str) -> str:
    found = re.search(rf'name="{re.escape(name)}" value="([^"]+)"', html)
    assert found, f"no {name} field in the page"
    return found.group(1)


@dataclass
class Turn:
    """What a turn's stream said: the events in order, the raw bytes and the response headers."""

    status: int
    headers: Any
    raw: bytes = b""
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def updates(self, side: str) -> int:
        return sum(1 for name, data in self.events if name == "update" and data["side"] == side)

    def ended(self, side: str) -> str:
        return next(name for name, data in self.events if name in ("done", "failed") and data["side"] == side)

    def final_html(self, side: str) -> str:
        return str(next(d["html"] for n, d in self.events if n in ("done", "failed") and d["side"] == side))

    @property
    def end(self) -> dict[str, Any]:
        return next(data for name, data in self.events if name == "end")

    @property
    def token(self) -> str | None:
        controls = self.end["controls"]
        found = re.search(r'name="token" value="([^"]+)"', controls)
        return found.group(1) if found and 'id="vote-form"' in controls else None


def parse_events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The events of a stream, in order; heartbeats (comment lines only) left out."""
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip() or all(line.startswith(":") for line in block.strip().splitlines()):
            continue
        name = re.search(r"^event: (.*)$", block, re.M)
        data = re.search(r"^data: (.*)$", block, re.M)
        assert name and data, block
        events.append((name.group(1), json.loads(data.group(1))))
    return events


def stream_turn(client: Any, message: str, csrf: str, token: str | None = None, on_event: Any = None) -> Turn:
    """POST a turn to /battle/stream and read its events as they arrive (``on_event(name, data)``; when
    it returns True the reading stops and the connection closes, as the page's Stop button does)."""
    form = {"message": message, "csrf_token": csrf, **({"token": token} if token else {})}
    with client.stream("POST", "/battle/stream", data=form) as response:
        turn = Turn(response.status_code, response.headers)
        buffer = b""
        for chunk in response.iter_bytes():
            turn.raw += chunk
            buffer += chunk
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                for event in parse_events(block + b"\n\n"):
                    turn.events.append(event)
                    if on_event is not None and on_event(*event):
                        return turn
    return turn


def open_battle_page(client: Any) -> str:
    # Any: an httpx client, or Starlette's TestClient (built on its own httpx fork)
    """GET /battle (a session cookie arrives with it); the page's CSRF token."""
    page = client.get("/battle")
    assert page.status_code == 200, page.text
    return field_value(page.text, "csrf_token")
