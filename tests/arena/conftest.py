"""Fixtures for the voting site: an app on each backend over the seeded catalog (see tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from arena.app import create_app
from tests.factories import make_settings

AppFactory = Callable[..., TestClient]


@pytest.fixture
def make_client(seeded: Engine, db_url: str) -> Iterator[AppFactory]:
    """Build clients on the seeded database; settings overrides and a clock can be passed."""
    clients: list[TestClient] = []

    def factory(clock: Callable[[], float] | None = None, **overrides: object) -> TestClient:
        kwargs: dict[str, Any] = {"clock": clock} if clock else {}
        app = create_app(make_settings(db_url, **overrides), engine=seeded, seed=1, **kwargs)
        client = TestClient(app, base_url="http://testserver")
        client.__enter__()
        clients.append(client)
        return client

    yield factory
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: AppFactory) -> TestClient:
    return make_client()
