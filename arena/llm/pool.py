"""One client per registered endpoint for the web app, so an endpoint's ``max_concurrency`` holds across
all the live battles of a worker (each `EndpointClient` bounds only its own requests).

A client is made on first use and kept while the endpoint's registration stays the same; a changed
registration gets a fresh client (the old one is closed when the pool closes).
"""

from __future__ import annotations

import threading

from arena.llm.client import EndpointClient
from arena.llm.registry import config_for
from votes.catalog.endpoints import EndpointRecord

__all__ = ["EndpointPool"]


class EndpointPool:
    """Endpoint clients by name, for one event loop (the worker's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str, tuple[EndpointRecord, EndpointClient]] = {}
        self._retired: list[EndpointClient] = []

    def client(self, record: EndpointRecord) -> EndpointClient:
        """The client of ``record`` (raises ``EndpointError`` when its key variable is not set)."""
        with self._lock:
            known = self._clients.get(record.name)
            if known is not None and known[0] == record:
                return known[1]
            client = EndpointClient(config_for(record))
            if known is not None:
                self._retired.append(known[1])
            self._clients[record.name] = (record, client)
            return client

    async def aclose(self) -> None:
        with self._lock:
            clients = [c for _, c in self._clients.values()] + self._retired
            self._clients.clear()
            self._retired = []
        for client in clients:
            await client.aclose()
