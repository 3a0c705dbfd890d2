"""Gold battles against live ones, side by side on the real app: the time to issue a battle and to vote.

The app runs in-process (FastAPI's TestClient) on a fresh SQLite database: a catalog of distinct answers
and a file of golds, served at ``--rate``. One voter fetches and votes ``--votes`` times (a fresh cookie
every 50 votes, so golds never run out); each request is timed and filed under gold or live (the harness
knows the gold prompts; the voter would not). Prints the median and 90th percentile of each, the ratios
gold / live (1.0 is indistinguishable by timing; a voter would need a ratio far from 1 to tell them apart
from a handful of requests), the served gold share, and one JSON line.

    python scripts/bench_gold_timing.py
    python scripts/bench_gold_timing.py --votes 2000 --rate 0.2
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _bench_common import machine_info, print_table
from fastapi.testclient import TestClient
from sqlmodel import Session

from arena.app import create_app
from arena.settings import Settings
from votes.db import make_engine
from votes.migrate import upgrade_database
from votes.models import Model, Output, Prompt
from votes.voting.gold_items import GoldSpec, add_golds

GOLD_PREFIX = "Gold question"


def _seed(db_url: str, n_prompts: int, n_models: int, n_golds: int) -> None:
    upgrade_database(db_url)
    engine = make_engine(db_url)
    try:
        with Session(engine) as session:
            models = [Model(name=f"model-{m:02d}") for m in range(n_models)]
            prompts = [
                Prompt(text=f"Question {p}: explain topic {p}.", category="generic") for p in range(n_prompts)
            ]
            session.add_all([*models, *prompts])
            session.flush()
            for p in prompts:
                for m in models:
                    text = f"Answer {m.id} to question {p.id}: " + "a sentence of the answer. " * 12
                    session.add(Output(prompt_id=p.id or 0, model_id=m.id or 0, text=text))
            specs = [
                GoldSpec(
                    "objective", None, f"{GOLD_PREFIX} {g}.", f"Right {g}. " * 12, f"Wrong {g}. " * 12, "a"
                )
                for g in range(n_golds)
            ]
            add_golds(session, specs, source="file")
            session.commit()
    finally:
        engine.dispose()


def run(*, votes: int, rate: float, n_prompts: int, n_models: int) -> dict[str, dict[str, float]]:
    """Time every fetch and vote; returns per kind (gold, live) and step the median, p90 and count (ms)."""
    times: dict[tuple[str, str], list[float]] = {
        (k, s): [] for k in ("gold", "live") for s in ("fetch", "vote")
    }
    with tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite:///{Path(tmp) / 'gold.db'}"
        _seed(db_url, n_prompts, n_models, n_golds=max(50, int(votes * rate)))
        now = [1_700_006_400.0]
        settings = Settings(
            database_url=db_url,
            secret_key=secrets.token_hex(16),
            group_commit_max_wait_ms=1.0,
            gold_rate=rate,
        )
        app = create_app(settings, clock=lambda: now[0], seed=1)
        with TestClient(app, base_url="http://testserver") as client:
            for n in range(votes):
                if n and n % 50 == 0:
                    client.cookies.clear()
                now[0] += 1.05
                started = time.perf_counter()
                battle = client.get("/api/battles/next")
                fetched = time.perf_counter() - started
                if battle.status_code != 200:
                    raise SystemExit(f"battle {n}: HTTP {battle.status_code}: {battle.text[:200]}")
                body = battle.json()
                kind = "gold" if body["prompt"]["text"].startswith(GOLD_PREFIX) else "live"
                started = time.perf_counter()
                vote = client.post(
                    "/api/votes",
                    json={"token": body["token"], "winner": "model_a"},
                    headers={"X-CSRF-Token": body["csrf_token"]},
                )
                voted = time.perf_counter() - started
                if vote.status_code != 200:
                    raise SystemExit(f"vote {n}: HTTP {vote.status_code}: {vote.text[:200]}")
                times[(kind, "fetch")].append(fetched * 1000)
                times[(kind, "vote")].append(voted * 1000)
    out: dict[str, dict[str, float]] = {}
    for (kind, step), values in times.items():
        v = np.asarray(values) if values else np.full(1, np.nan)
        out[f"{kind}_{step}"] = {
            "median_ms": float(np.median(v)),
            "p90_ms": float(np.percentile(v, 90)),
            "n": float(len(values)),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=0.2)
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--models", type=int, default=8)
    args = parser.parse_args(argv)
    if args.votes < 10 or not 0 < args.rate <= 0.2 or args.prompts < 1 or args.models < 2:
        parser.error("--votes >= 10, 0 < --rate <= 0.2, --prompts >= 1, --models >= 2")
    r = run(votes=args.votes, rate=args.rate, n_prompts=args.prompts, n_models=args.models)
    rows = []
    ratios: dict[str, float] = {}
    for step in ("fetch", "vote"):
        gold, live = r[f"gold_{step}"], r[f"live_{step}"]
        ratios[f"{step}_median"] = gold["median_ms"] / live["median_ms"]
        ratios[f"{step}_p90"] = gold["p90_ms"] / live["p90_ms"]
        rows.append(
            [step, int(gold["n"]), int(live["n"]), f"{gold['median_ms']:.2f}", f"{live['median_ms']:.2f}"]
            + [f"{ratios[f'{step}_median']:.2f}", f"{gold['p90_ms']:.2f}", f"{live['p90_ms']:.2f}"]
            + [f"{ratios[f'{step}_p90']:.2f}"]
        )
    header = [
        "step",
        "golds",
        "lives",
        "gold med ms",
        "live med ms",
        "ratio",
        "gold p90",
        "live p90",
        "ratio",
    ]
    print_table(header, rows)
    share = r["gold_fetch"]["n"] / args.votes
    print(f"served gold share {share:.3f} at rate {args.rate}")
    print(
        json.dumps({"machine": machine_info(), "rate": args.rate, "gold_share": share, "ratios": ratios, **r})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
