"""Builders shared by the tests: catalogs and battles in a store, battles files, settings, counts, boards.

One home for what used to be four ad-hoc helper modules; also the few read-backs of the store that the
tests compare against (row counts, live ratings) and the wipe that empties it.
"""

from __future__ import annotations

import dataclasses
import json
import random
import secrets
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import delete, func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from arena.settings import Settings
from leaderboard.battles import Battles
from leaderboard.data import OUTCOME_STRINGS, PairCounts, aggregate_battles
from leaderboard.result import Leaderboard
from votes.models import Model, Output, Prompt
from votes.tables import annotator_t, battle_t, liverating_t, model_t, output_t, prompt_t, vote_t
from votes.voting.battles import CatalogRow, IssuedBattle, issue_battle
from votes.voting.views import load_pairing_catalog

MODEL_NAMES = ("alpha-7b", "bravo-13b", "charlie-70b", "delta-mini")
ADMIN_TOKEN = "admin-secret-for-tests"
WINNERS = tuple(OUTCOME_STRINGS.values())
TABLES = (model_t, prompt_t, output_t, annotator_t, battle_t, vote_t, liverating_t)


# ----------------------------------------------------------------------------------------- the store


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


_JUDGED: weakref.WeakKeyDictionary[Engine, dict[int, set[tuple[int, int, int]]]] = weakref.WeakKeyDictionary()


def battles_for(engine: Engine, rng: random.Random, annotator_id: int, n: int) -> list[IssuedBattle]:
    """``n`` battles for an annotator, never a (prompt, unordered pair) it was given before on this
    database (the store takes one judgement of each); raises ``ValueError`` when the catalog runs out."""
    with Session(engine) as s:
        rows = load_pairing_catalog(session=s)
    by_prompt: dict[int, list[CatalogRow]] = {}
    for row in rows:
        by_prompt.setdefault(row.prompt_id, []).append(row)
    judged = _JUDGED.setdefault(engine, {}).setdefault(annotator_id, set())
    free = [
        (prompt_id, a, b)
        for prompt_id in sorted(by_prompt)
        for i, a in enumerate(by_prompt[prompt_id])
        for b in by_prompt[prompt_id][i + 1 :]
        if (prompt_id, min(a.model_id, b.model_id), max(a.model_id, b.model_id)) not in judged
    ]
    if n > len(free):
        raise ValueError(
            f"only {len(free)} unjudged prompt and pair battles left for annotator {annotator_id}"
        )
    out = []
    for prompt_id, a, b in rng.sample(free, n):
        judged.add((prompt_id, min(a.model_id, b.model_id), max(a.model_id, b.model_id)))
        if rng.random() < 0.5:
            a, b = b, a
        out.append(
            issue_battle(
                token_id=secrets.token_hex(12),
                annotator_id=annotator_id,
                prompt_id=prompt_id,
                output_a=a,
                output_b=b,
                pair_probability=0.5,
            )
        )
    return out


# ----------------------------------------------------------------------------------- reading it back


def row_counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t.name: int(conn.scalar(select(func.count()).select_from(t)) or 0) for t in TABLES}


def live_ratings(engine: Engine) -> dict[str, tuple[float, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(model_t.c.name, liverating_t.c.rating, liverating_t.c.games).join(
                liverating_t, liverating_t.c.model_id == model_t.c.id
            )
        ).all()
    return {str(n): (float(r), int(g)) for n, r, g in rows}


def live_rows(engine: Engine, *, with_rater: bool = True) -> dict[str, dict[str, Any]]:
    """Every rated model's LiveRating columns, by model name: what a replay of the votes must equal.

    Without ``with_rater`` only rating and games (the columns an Elo row has).
    """
    cols = ["rating", "games"] + (["deviation", "state", "clock", "rater"] if with_rater else [])
    with engine.connect() as conn:
        rows = conn.execute(
            select(model_t.c.name, *(liverating_t.c[c] for c in cols))
            .join(liverating_t, liverating_t.c.model_id == model_t.c.id)
            .where(liverating_t.c.games > 0)
        ).all()
    return {str(row[0]): dict(zip(cols, row[1:], strict=True)) for row in rows}


def clear(engine: Engine) -> None:
    """Delete every row (children first): an empty database again."""
    with engine.begin() as conn:
        for table in reversed(TABLES):
            conn.execute(delete(table))


# ------------------------------------------------------------------------------------ files, settings


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any] | str]) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def conversation(question: str, answer: str, *more: str) -> list[dict[str, str]]:
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    for i in range(0, len(more) - 1, 2):
        messages += [{"role": "user", "content": more[i]}, {"role": "assistant", "content": more[i + 1]}]
    return messages


def vote_once(client: TestClient, winner: str = "model_a") -> int:
    """Fetch a battle through the JSON API and vote on it: the vote's status (or the fetch's, if refused)."""
    battle = client.get("/api/battles/next")
    if battle.status_code != 200:
        return battle.status_code
    body = battle.json()
    r = client.post(
        "/api/votes",
        json={"token": body["token"], "winner": winner},
        headers={"X-CSRF-Token": body["csrf_token"]},
    )
    return r.status_code


def make_settings(db_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "database_url": db_url,
        "secret_key": "test-secret-key",
        "admin_token": ADMIN_TOKEN,
        "rate_limit_per_minute": 10_000,
        "rate_limit_per_address_per_minute": 100_000,
        "votes_per_address_per_minute": 100_000,
        "votes_per_address_per_day": 1_000_000,
        "new_sessions_per_address_per_hour": 100_000,
        "group_commit_max_wait_ms": 1.0,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- counts and boards


def simulated_counts(n_models: int = 6, n_votes: int = 3000, seed: int = 7) -> PairCounts:
    """Battles among ``n_models`` models of spread-out strength, with some ties."""
    rng = np.random.default_rng(seed)
    strength = np.linspace(1300.0, 900.0, n_models)
    names = [f"model-{i:03d}" for i in range(n_models)]
    a = rng.integers(0, n_models, n_votes)
    b = (a + rng.integers(1, n_models, n_votes)) % n_models
    p = 1.0 / (1.0 + 10.0 ** ((strength[b] - strength[a]) / 400.0))
    u = rng.random(n_votes)
    winner = np.where(u < 0.1, "tie", np.where(u < 0.1 + 0.9 * p, "model_a", "model_b"))
    return aggregate_battles([names[i] for i in a], [names[i] for i in b], winner.tolist())


def handmade_leaderboard(counts: PairCounts, *, spread: float = 20.0) -> Leaderboard:
    """Ratings from win rates (monotone, deterministic): enough for exercising files and plots."""
    n = counts.n_models
    battles = np.zeros(n)
    points = np.zeros(n)
    score = np.where(counts.outcome == 0, 1.0, np.where(counts.outcome == 1, 0.0, 0.5))
    np.add.at(battles, counts.model_a, counts.count)
    np.add.at(battles, counts.model_b, counts.count)
    np.add.at(points, counts.model_a, counts.count * score)
    np.add.at(points, counts.model_b, counts.count * (1.0 - score))
    win_rate = points / battles
    shrunk = (points + 1.0) / (battles + 2.0)
    rating = 1000.0 + 400.0 * np.log10(shrunk / (1.0 - shrunk))
    low, high = rating - spread, rating + spread
    rank = np.array([1 + int(np.sum(rating > r)) for r in rating], dtype=np.int64)
    rank_ub = np.array([1 + int(np.sum(low > h)) for h in high], dtype=np.int64)
    rank_low = np.array([1 + int(np.sum(low > h)) for h in high], dtype=np.int64)
    rank_high = np.array([int(np.sum(high >= lo)) for lo in low], dtype=np.int64)
    return Leaderboard(
        models=counts.models,
        rating=rating,
        ci_low=low,
        ci_high=high,
        rank=rank,
        rank_low=rank_low,
        rank_high=rank_high,
        rank_ub=rank_ub,
        battles=battles,
        win_rate=win_rate,
        method="bt",
        parameters={"level": 0.95, "n_rounds": 100, "random_state": 1},
        parameters_fitted={"position_advantage": {"value": 12.5, "ci_low": 8.0, "ci_high": 17.0}},
        n_votes=counts.n_votes,
    )


def assert_same_battles(a: Battles, b: Battles) -> None:
    """Every field of two reads of the votes equal: arrays value for value and of one dtype."""
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert isinstance(y, np.ndarray) and x.dtype == y.dtype, f.name
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        else:
            assert x == y, f.name
