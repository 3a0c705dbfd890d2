"""Fixtures for the voting site: a small catalog (with hostile Markdown) and an app on each backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from arena.app import create_app
from arena.settings import Settings
from votes.models import Model, Output, Prompt

MODEL_NAMES = ("alpha-7b", "bravo-13b", "charlie-70b", "delta-mini")
ADMIN_TOKEN = "admin-secret-for-tests"


def seed_catalog(engine: Engine, *, n_prompts: int = 6, models: tuple[str, ...] = MODEL_NAMES) -> None:
    """Every model answers every prompt; answers carry Markdown, code and would-be HTML."""
    with Session(engine) as session:
        rows = [Model(name=name, organisation=f"org-{name.split('-')[0]}") for name in models]
        session.add_all(rows)
        prompts = [
            Prompt(text=f"Question {i}: explain **topic {i}**.", category="generic") for i in range(n_prompts)
        ]
        session.add_all(prompts)
        session.flush()
        for prompt in prompts:
            for model in rows:
                text = (
                    f"Answer to {prompt.id} from a model.\n\n```python\nprint({prompt.id})\n```\n\n"
                    "<script>window.__pwned = 1</script> <img src=x onerror=alert(1)>"
                )
                assert prompt.id is not None and model.id is not None
                session.add(Output(prompt_id=prompt.id, model_id=model.id, text=text))
        session.commit()


def make_settings(db_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "database_url": db_url,
        "secret_key": "test-secret-key",
        "admin_token": ADMIN_TOKEN,
        "rate_limit_per_minute": 10_000,
        "rate_limit_per_address_per_minute": 100_000,
        "group_commit_max_wait_ms": 1.0,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
def seeded(engine: Engine) -> Engine:
    seed_catalog(engine)
    return engine


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
